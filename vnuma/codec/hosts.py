"""Host codec: ``host_to_dict`` / ``host_from_dict`` and the ``host list`` summary.

Pure: no I/O. See :mod:`vnuma.codec` for the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnuma.codec.checks import (
    At,
    as_bool,
    as_int,
    as_ints,
    as_list,
    as_mapping,
    as_opt_int,
    as_opt_str,
    as_str,
    enum_of,
    get_key,
    int_map,
    list_of,
    take,
)
from vnuma.codec.devstates import device_states_from_dict, device_states_to_dict
from vnuma.codec.hmat import hmat_from_dict, hmat_to_dict
from vnuma.codec.resctrl import classes_to_dict, resctrl_from_dict, resctrl_to_dict
from vnuma.errors import InvalidInputError
from vnuma.placement.resctrl import ResctrlUse, classes
from vnuma.sources.migprofiles import geometry_from_dict, profile_document
from vnuma.topology import (
    Cell,
    Cpu,
    DeviceKind,
    Host,
    Mdev,
    MdevType,
    MemoryCache,
    PagePool,
    PciDevice,
    PciLink,
    Source,
    count_of,
    format_size_kib,
)
from vnuma.topology.hmat import NO_HMAT
from vnuma.topology.hostcheck import check_host
from vnuma.topology.nvlink import NvLink
from vnuma.topology.partitions import GpuUse, HeldPartition, MigPartition, Partition, mig_partitions, vgpu_partitions
from vnuma.topology.resctrl import NO_POLICY, NO_RESCTRL, ResctrlPolicy
from vnuma.topology.tiers import cell_kinds, cell_tiers

_SOURCE = enum_of(Source)
_UNCLAIMED = GpuUse(None, {})
_KIND = enum_of(DeviceKind)


def host_to_dict(
    host: Host, use: Mapping[str, GpuUse] | None = None, held: ResctrlUse | None = None
) -> dict[str, Any]:
    """The host as a JSON-ready dict (see the module docstring for the contract); each GPU's ``mode`` and
    free partitions from ``use`` (what vnuma's claims leave: ``host show``), else unclaimed (null, free =
    total: the stored topology); with ``held`` (what its VMs' slices hold: ``host show``), the resctrl
    classes of service they leave (``"resctrl": {"classes"}``)."""
    use = use or {}
    kinds, tiers, partitions, mig = cell_kinds(host), cell_tiers(host), vgpu_partitions(host), mig_partitions(host)
    resctrl = resctrl_to_dict(host.resctrl, host.cells_of)
    if held is not None:
        resctrl["classes"] = classes_to_dict(classes(host, held))
    return {
        "name": host.name,
        "uri": host.uri,
        "source": host.source.value,
        "reserved_cpus": sorted(host.reserved_cpus),
        "cordoned": host.cordoned,
        "resctrl_policy": {"llc_default_ways": host.resctrl_policy.llc_default_ways,
                           "mem_bw_limit": host.resctrl_policy.mem_bw_limit},
        "cells": [_cell_to_dict(c, kinds[c.id], tiers[c.id]) for c in host.cells],
        "devices": [_device_to_dict(d, partitions.get(d.address, ()), mig.get(d.address, ()),
                                    use.get(d.address, _UNCLAIMED)) for d in host.devices],
        "resctrl": resctrl,
        "hmat": hmat_to_dict(host.hmat),
        "mdevs": [{"uuid": m.uuid, "type": m.type, "parent": m.parent, "iommu_group": m.iommu_group}
                  for m in host.mdevs],
        "gpu_profiles": [profile_document(g) for g in host.gpu_profiles],
        "device_states": device_states_to_dict(host.device_states),
        "nvlinks": [{"a": n.a, "b": n.b, "count": n.count} for n in host.nvlinks],
        "arch": host.arch,
    }


def _cell_to_dict(cell: Cell, kind: str, tier: int) -> dict[str, Any]:
    pages = {str(p.size_kib): p.count for p in cell.pages}
    distances = {str(other): dist for other, dist in cell.distances}
    if len(pages) != len(cell.pages) or len(distances) != len(cell.distances):
        raise InvalidInputError(f"cell {cell.id}: duplicate page size or distance entries")
    return {
        "id": cell.id,
        "memory_kib": cell.memory_kib,
        "memory_only": cell.memory_only,
        "cpus": [
            {"id": c.id, "socket": c.socket, "die": c.die, "core": c.core, "siblings": sorted(c.siblings)}
            for c in cell.cpus
        ],
        "pages": pages,
        "distances": distances,
        "subtype": cell.subtype,
        "gpu": cell.gpu,
        "kind": kind,
        "tier": tier,
        "caches": [
            {"level": m.level, "size_kib": m.size_kib, "line_bytes": m.line_bytes, "associativity": m.associativity,
             "policy": m.policy}
            for m in cell.caches
        ],
    }


def _device_to_dict(
    dev: PciDevice, partitions: tuple[Partition, ...], mig: tuple[MigPartition, ...], use: GpuUse
) -> dict[str, Any]:
    link = dev.link
    return {
        "address": dev.address,
        "kind": dev.kind.value,
        "numa_node": dev.numa_node,
        "vendor_id": dev.vendor_id,
        "product_id": dev.product_id,
        "product_name": dev.product_name,
        "parent": dev.parent,
        "root_complex": dev.root_complex,
        "bridges": list(dev.bridges),
        "iommu_group": dev.iommu_group,
        "iommu_peers": list(dev.iommu_peers),
        "class": None if dev.pci_class is None else f"0x{dev.pci_class:06x}",
        "vfs": list(dev.vfs),
        "vf_max": dev.vf_max,
        "pf": dev.pf,
        "link": None if link is None else {
            "speed_gts": link.speed_gts, "width": link.width,
            "max_speed_gts": link.max_speed_gts, "max_width": link.max_width,
        },
        "mdev_types": [
            {"id": t.id, "name": t.name, "device_api": t.device_api, "available": t.available}
            for t in dev.mdev_types
        ],
        "mode": use.mode,
        "layout": [{"vm": h.vm, ("profile" if h.start is not None else "type"): h.name, "start": h.start, "vf": h.vf}
                   for h in use.layout],
        "partitions": [{"type": p.type, "name": p.name, "free": use.free.get(p.type, p.total), "total": p.total}
                       for p in partitions]
        + [{"profile": m.profile, "free": use.free.get(m.profile, m.total), "total": m.total} for m in mig],
    }


def use_from_dict(d: Mapping[str, Any]) -> dict[str, GpuUse]:
    """The GPUs' ``mode`` and free partitions of a ``host show --json`` document (what :func:`host_to_dict`
    wrote from ``use``), by GPU address; the document is trusted (it was read from the API)."""
    out: dict[str, GpuUse] = {}
    for dev in d.get("devices", ()):
        free = {str(p.get("type", p.get("profile"))): int(p["free"]) for p in dev.get("partitions", ())}
        layout = tuple(HeldPartition(h["vm"], h.get("profile") or h["type"], h.get("start"), h.get("vf"))
                       for h in dev.get("layout", ()))
        if dev.get("mode") is not None or free:
            out[str(dev["address"])] = GpuUse(dev.get("mode"), free, layout)
    return out


def host_from_dict(d: Mapping[str, Any]) -> Host:
    """Build and check a host from its dict form.

    Raises:
        InvalidInputError: a missing key or wrong type (named by its key path),
            or an inconsistent topology (see :func:`vnuma.topology.hostcheck.check_host`).
    """
    at = At("host")
    d = as_mapping(d, at)
    name = take(d, "name", at, as_str)
    at = At(f"host {name!r}")
    host = Host(
        name=name,
        cells=take(d, "cells", at, _CELLS),
        devices=take(d, "devices", at, _DEVICES, []),
        uri=take(d, "uri", at, as_opt_str, None),
        source=take(d, "source", at, _SOURCE, Source.CAPABILITIES.value),
        reserved_cpus=frozenset(take(d, "reserved_cpus", at, as_ints, [])),
        cordoned=take(d, "cordoned", at, as_bool, False),
        resctrl_policy=_policy(d.get("resctrl_policy"), at.key("resctrl_policy")),
        hmat=hmat_from_dict(d["hmat"], at.key("hmat")) if d.get("hmat") is not None else NO_HMAT,
        resctrl=resctrl_from_dict(d["resctrl"], at.key("resctrl")) if d.get("resctrl") is not None else NO_RESCTRL,
        mdevs=take(d, "mdevs", at, _MDEVS, []),
        nvlinks=take(d, "nvlinks", at, _NVLINKS, []),
        device_states=device_states_from_dict(d.get("device_states"), at.key("device_states")),
        arch=take(d, "arch", at, as_str, "x86_64"),
        gpu_profiles=tuple(
            geometry_from_dict(g, f"{at.doc}: gpu_profiles[{i}]")
            for i, g in enumerate(take(d, "gpu_profiles", at, as_list, []))
        ),
    )
    return check_host(host)


def _policy(value: object, at: At) -> ResctrlPolicy:
    """``resctrl_policy`` (absent or null: none set)."""
    if value is None:
        return NO_POLICY
    d = as_mapping(value, at)
    ways = take(d, "llc_default_ways", at, as_opt_int, None)
    limit = take(d, "mem_bw_limit", at, as_int, NO_POLICY.mem_bw_limit)
    if (ways is not None and ways < 0) or limit < 1:
        raise at.fail("llc_default_ways must be 0 or more and mem_bw_limit 1 or more")
    return ResctrlPolicy(ways, limit)


def _cell_from_dict(value: object, parent: At, i: int) -> Cell:
    at = parent.index(i)
    d = as_mapping(value, at)
    cpus = take(d, "cpus", at, _CPUS, [])
    memory_only = get_key(d, "memory_only", at, None)
    if memory_only is not None and as_bool(memory_only, at.key("memory_only")) != (not cpus):
        raise at.key("memory_only").fail(f"is {memory_only} but the cell has {len(cpus)} CPUs")
    return Cell(
        id=take(d, "id", at, as_int),
        memory_kib=take(d, "memory_kib", at, as_int),
        cpus=cpus,
        pages=tuple(PagePool(s, n) for s, n in take(d, "pages", at, int_map, {})),
        distances=take(d, "distances", at, int_map, {}),
        subtype=take(d, "subtype", at, as_opt_str, None),
        caches=take(d, "caches", at, _CACHES, []),
        gpu=take(d, "gpu", at, as_opt_str, None),
    )


def _cache_from_dict(value: object, parent: At, i: int) -> MemoryCache:
    at = parent.index(i)
    d = as_mapping(value, at)
    return MemoryCache(
        level=take(d, "level", at, as_int),
        size_kib=take(d, "size_kib", at, as_int),
        line_bytes=take(d, "line_bytes", at, as_int),
        associativity=take(d, "associativity", at, as_str),
        policy=take(d, "policy", at, as_str),
    )


def _cpu_from_dict(value: object, parent: At, i: int) -> Cpu:
    # Hosts are loaded by the thousand: a well-formed CPU takes this fast path,
    # and anything else goes through the checked path that names the bad key.
    if type(value) is dict:
        try:
            cid, socket, die, core = value["id"], value["socket"], value["die"], value["core"]
            siblings = value["siblings"]
        except KeyError:
            return _checked_cpu_from_dict(value, parent, i)
        if (
            type(cid) is int
            and (type(socket) is int or socket is None)
            and (type(die) is int or die is None)
            and (type(core) is int or core is None)
            and type(siblings) is list
            and _all_ints(siblings)
        ):
            return Cpu(cid, socket, die, core, frozenset(siblings))
    return _checked_cpu_from_dict(value, parent, i)


def _all_ints(items: list[Any]) -> bool:
    # A plain loop: all() over a generator costs more than the check itself here.
    for item in items:  # noqa: SIM110
        if type(item) is not int:
            return False
    return True


def _checked_cpu_from_dict(value: object, parent: At, i: int) -> Cpu:
    at = parent.index(i)
    d = as_mapping(value, at)
    return Cpu(
        id=take(d, "id", at, as_int),
        socket=take(d, "socket", at, as_opt_int),
        die=take(d, "die", at, as_opt_int),
        core=take(d, "core", at, as_opt_int),
        siblings=frozenset(take(d, "siblings", at, as_ints)),
    )


def _device_from_dict(value: object, parent: At, i: int) -> PciDevice:
    at = parent.index(i)
    d = as_mapping(value, at)
    return PciDevice(
        address=take(d, "address", at, as_str),
        kind=take(d, "kind", at, _KIND),
        vendor_id=take(d, "vendor_id", at, as_str),
        product_id=take(d, "product_id", at, as_str),
        numa_node=take(d, "numa_node", at, as_opt_int),
        parent=take(d, "parent", at, as_opt_str, None),
        root_complex=take(d, "root_complex", at, as_opt_str, None),
        bridges=take(d, "bridges", at, _strs, []),
        iommu_group=take(d, "iommu_group", at, as_opt_int, None),
        iommu_peers=take(d, "iommu_peers", at, _strs, []),
        pci_class=take(d, "class", at, _opt_class, None),
        vfs=take(d, "vfs", at, _strs, []),
        vf_max=take(d, "vf_max", at, as_opt_int, None),
        pf=take(d, "pf", at, as_opt_str, None),
        link=take(d, "link", at, _link, None),
        mdev_types=take(d, "mdev_types", at, _MDEV_TYPES, []),
        product_name=take(d, "product_name", at, as_opt_str, None),
    )


def _mdev_type_from_dict(value: object, parent: At, i: int) -> MdevType:
    at = parent.index(i)
    d = as_mapping(value, at)
    return MdevType(
        id=take(d, "id", at, as_str),
        name=take(d, "name", at, as_str),
        device_api=take(d, "device_api", at, as_str),
        available=take(d, "available", at, as_int),
    )


def _strs(value: object, at: At) -> tuple[str, ...]:
    return tuple(as_str(v, at.index(i)) for i, v in enumerate(as_list(value, at)))


def _opt_class(value: object, at: At) -> int | None:
    if value is None:
        return None
    text = as_str(value, at)
    try:
        return int(text, 16)
    except ValueError:
        raise at.fail(f"{text!r} is not a hex PCI class such as 0x030200") from None


def _link(value: object, at: At) -> PciLink | None:
    if value is None:
        return None
    d = as_mapping(value, at)
    return PciLink(
        speed_gts=take(d, "speed_gts", at, _number),
        width=take(d, "width", at, as_int),
        max_speed_gts=take(d, "max_speed_gts", at, lambda v, a: None if v is None else _number(v, a), None),
        max_width=take(d, "max_width", at, as_opt_int, None),
    )


def _number(value: object, at: At) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise at.fail(f"must be a number, not {value!r}")
    return float(value)


_CPUS = list_of(_cpu_from_dict)
_CELLS = list_of(_cell_from_dict)
_CACHES = list_of(_cache_from_dict)
_MDEV_TYPES = list_of(_mdev_type_from_dict)
_DEVICES = list_of(_device_from_dict)


def _mdev_from_dict(value: object, parent: At, i: int) -> Mdev:
    at = parent.index(i)
    d = as_mapping(value, at)
    return Mdev(
        uuid=take(d, "uuid", at, as_str), type=take(d, "type", at, as_str), parent=take(d, "parent", at, as_str),
        iommu_group=take(d, "iommu_group", at, as_opt_int, None),
    )


def _nvlink_from_dict(value: object, parent: At, i: int) -> NvLink:
    at = parent.index(i)
    d = as_mapping(value, at)
    return NvLink(a=take(d, "a", at, as_str), b=take(d, "b", at, as_str), count=take(d, "count", at, as_int))


_MDEVS, _NVLINKS = list_of(_mdev_from_dict), list_of(_nvlink_from_dict)


def summary_text(summary: Mapping[str, Any]) -> str:
    """A :func:`host_summary` in words: ``4 cells, 128 CPUs, 8 GPUs, 1 TiB``."""
    counts = (count_of(summary["cells"], "cell"), count_of(summary["cpus"], "CPU"), count_of(summary["gpus"], "GPU"))
    return f"{', '.join(counts)}, {format_size_kib(summary['memory_kib'])}"


def host_summary(host: Host) -> dict[str, Any]:
    """One line of ``vnuma host list --json``: counts and totals, no topology."""
    return {
        "name": host.name,
        "uri": host.uri,
        "source": host.source.value,
        "cells": len(host.cells),
        "cpus": sum(len(c.cpus) for c in host.cells),
        "gpus": len(host.devices_of(DeviceKind.GPU)),
        "memory_kib": host.memory_kib,
        "cordoned": host.cordoned,
    }
