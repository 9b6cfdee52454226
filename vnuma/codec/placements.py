"""Placement and tenant codecs: ``placement_to_dict`` / ``placement_from_dict``, ``tenant_*``.

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
    as_mapping,
    as_opt_int,
    as_opt_str,
    as_str,
    enum_of,
    get_key,
    list_of,
    take,
)
from vnuma.placement.kept import kept_document
from vnuma.placement.model import (
    Affinity,
    AntiAffinity,
    CellAssignment,
    ColdTier,
    CpuPolicy,
    DeviceAssignment,
    IoThreadPolicy,
    Isolation,
    MemoryMode,
    NicFunction,
    Placement,
    Tenant,
    ThreadPolicy,
)
from vnuma.placement.partitionmodel import PartitionAssignment, PartitionKind
from vnuma.topology import KIB_PER_MIB, DeviceKind
from vnuma.topology.pcie import Level

_KIND = enum_of(DeviceKind)
_CPU_POLICY = enum_of(CpuPolicy)
_THREAD_POLICY = enum_of(ThreadPolicy)
_ISOLATION = enum_of(Isolation)
_ANTI = enum_of(AntiAffinity)
_AFFINITY = enum_of(Affinity)
_MEMORY_MODE = enum_of(MemoryMode)
_IOTHREAD_POLICY = enum_of(IoThreadPolicy)
_COLD_TIER = enum_of(ColdTier)
_NIC_FUNCTION = enum_of(NicFunction)
_PARTITION_KINDS = frozenset(k.value for k in PartitionKind)
_PARTITION_NAME = {PartitionKind.VGPU: "type", PartitionKind.MIG: "profile"}


def _cell(c: CellAssignment) -> dict[str, Any]:
    return {
        "guest_cell": c.guest_cell,
        "host_cell": c.host_cell,
        "vcpus": list(c.vcpus),
        "pcpus": list(c.pcpus),
        "memory_mib": c.memory_kib // KIB_PER_MIB,
        "memory_kib": c.memory_kib,
        "page_size_kib": c.page_size_kib,
        "memory_mode": c.memory_mode.value,
    }


def _partition(a: PartitionAssignment) -> dict[str, Any]:
    """A GPU partition as a ``devices`` entry: ``type`` names a vGPU type, ``profile`` a MIG profile."""
    return {
        "kind": a.kind.value, "gpu": a.gpu, "vf": a.vf, _PARTITION_NAME[a.kind]: a.name, "start": a.start,
        "uuid": a.uuid, "guest_cell": a.guest_cell, "host_cell": a.host_cell,
    }


def placement_to_dict(p: Placement) -> dict[str, Any]:
    """The placement as a JSON-ready dict; ``memory_mib`` is for readers, ``memory_kib`` is exact.
    GPU partitions are ``devices`` entries of kind ``vgpu``/``mig`` (``{"kind", "gpu", "vf", "type"|"profile",
    "start", "uuid", "guest_cell", "host_cell"}``), after the devices passed through whole.
    ``llc`` (``[{"cache", "ways"}]``) and ``mem_bw`` (``[{"domain", "cap"}]``) only when it holds them;
    a cold tier is the last entry of ``cells``, with ``"vcpus": []`` and ``"cold": true``, and
    ``"cold_tier"`` says what it was chosen under (both only when it has one); ``"dedicated_vcpus"``
    (sorted) only under cpu policy ``mixed``, whose cells list their pins first, then their float set;
    ``"request"``: the request the VM keeps, as asked (:func:`vnuma.placement.asks.as_asked`: every option of
    ``vnuma place`` by name, the body ``POST /v1/place`` takes; ``"reconstructed": true`` when vnuma rebuilt it
    from where the VM was); ``"alternative"``: which of that request's alternatives the VM got (0: the request
    itself), only when it lists alternatives."""
    slices: dict[str, Any] = {}
    if p.llc:
        slices["llc"] = [{"cache": i, "ways": w} for i, w in p.llc]
    if p.mem_bw:
        slices["mem_bw"] = [{"domain": i, "cap": c} for i, c in p.mem_bw]
    if p.cold:
        slices["cold_tier"] = p.cold_tier.value
    if p.cpu_policy is CpuPolicy.MIXED:
        slices["dedicated_vcpus"] = sorted(p.dedicated_vcpus)
    if p.nic_affinity is not None:
        slices["nic_affinity"] = p.nic_affinity.value.lower()
        slices["nics_per_gpu"] = p.nics_per_gpu
        slices["nic_function"] = p.nic_function.value
    request = kept_document(p)
    if request is not None:
        if request.get("alternatives"):
            slices["alternative"] = p.alternative
        slices["request"] = request
    return {
        "vm": p.vm,
        "tenant": p.tenant,
        "host": p.host,
        "cpu_policy": p.cpu_policy.value,
        "thread_policy": p.thread_policy.value,
        "threads_per_core": p.threads_per_core,
        "numa_nodes": "auto" if p.numa_nodes is None else p.numa_nodes,
        "group": None if p.group is None else {
            "name": p.group, "anti_affinity": _opt(p.anti_affinity), "affinity": _opt(p.affinity)
        },
        "iothreads": p.iothreads,
        "iothread_policy": p.iothread_policy.value,
        "cells": [_cell(c) for c in p.cells] + [{**_cell(c), "cold": True} for c in p.cold],
        "emulator_pcpus": list(p.emulator_pcpus),
        "devices": [
            {"address": d.address, "kind": d.kind.value, "guest_cell": d.guest_cell, "host_cell": d.host_cell,
             **({"peer_of": d.peer_of} if d.peer_of is not None else {})}
            for d in p.devices
        ] + [_partition(a) for a in p.partitions],
        **slices,
    }


def placement_from_dict(d: Mapping[str, Any]) -> Placement:
    """Build a placement from its dict form (``memory_kib`` wins over ``memory_mib``).

    ``numa_nodes`` is ``"auto"`` or the guest cell count the VM asked for;
    a document without it (written before vnuma recorded the shape) keeps
    the cell count it has: a move must not change a shape nobody recorded.

    Raises:
        InvalidInputError: a missing key or wrong type, named by its key path.
    """
    at = At("placement")
    d = as_mapping(d, at)
    vm = take(d, "vm", at, as_str)
    at = At(f"placement of VM {vm!r}")
    every = take(d, "cells", at, _ASSIGNMENTS)
    cells = tuple(c for c, cold in every if not cold)
    cold = tuple(c for c, cold in every if cold)
    nodes = get_key(d, "numa_nodes", at, len(cells))
    group, anti, affinity = _group(get_key(d, "group", at, None), at.key("group"))
    entries = take(d, "devices", at, _DEVICE_ASSIGNMENTS, [])
    return Placement(
        vm=vm,
        tenant=take(d, "tenant", at, as_str),
        host=take(d, "host", at, as_str),
        cells=cells,
        numa_nodes=None if nodes == "auto" else _node_count(nodes, at.key("numa_nodes"), len(cells)),
        group=group,
        anti_affinity=anti,
        affinity=affinity,
        emulator_pcpus=take(d, "emulator_pcpus", at, as_ints, []),
        devices=tuple(e for e in entries if isinstance(e, DeviceAssignment)),
        partitions=tuple(e for e in entries if isinstance(e, PartitionAssignment)),
        cpu_policy=take(d, "cpu_policy", at, _CPU_POLICY, CpuPolicy.DEDICATED.value),
        thread_policy=take(d, "thread_policy", at, _THREAD_POLICY, ThreadPolicy.PREFER.value),
        threads_per_core=take(d, "threads_per_core", at, as_int, 1),
        iothreads=take(d, "iothreads", at, as_int, 0),
        iothread_policy=take(d, "iothread_policy", at, _IOTHREAD_POLICY, IoThreadPolicy.EMULATOR.value),
        llc=take(d, "llc", at, _LLC, []),
        mem_bw=take(d, "mem_bw", at, _MEM_BW, []),
        cold=cold,
        cold_tier=take(d, "cold_tier", at, _COLD_TIER, ColdTier.ANY.value),
        nic_affinity=_level(get_key(d, "nic_affinity", at, None), at.key("nic_affinity")),
        nics_per_gpu=take(d, "nics_per_gpu", at, as_bool, False),
        nic_function=take(d, "nic_function", at, _NIC_FUNCTION, NicFunction.PF.value),
        dedicated_vcpus=frozenset(take(d, "dedicated_vcpus", at, as_ints, [])),
        alternative=take(d, "alternative", at, as_int, 0),
        request=_opt_mapping(get_key(d, "request", at, None), at.key("request")),
    )


def _opt_mapping(value: object, at: At) -> Mapping[str, Any] | None:
    """An object or null (a request kept as stored, read when a move asks it:
    :func:`vnuma.placement.kept.kept_request`)."""
    return None if value is None else as_mapping(value, at)


def _level(value: object, at: At) -> Level | None:
    """``"pix"|"pxb"|"phb"|"node"|"sys"`` or null."""
    if value is None:
        return None
    text = as_str(value, at)
    try:
        return Level(text.upper())
    except ValueError:
        raise at.fail(f"{text!r} is not one of pix, pxb, phb, node, sys") from None


def _pair(first: str, second: str) -> Any:
    def decode(value: object, parent: At, i: int) -> tuple[int, int]:
        at = parent.index(i)
        d = as_mapping(value, at)
        return take(d, first, at, as_int), take(d, second, at, as_int)

    return list_of(decode)


_LLC = _pair("cache", "ways")
_MEM_BW = _pair("domain", "cap")


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _group(value: object, at: At) -> tuple[str | None, AntiAffinity | None, Affinity | None]:
    """``{"name", "anti_affinity": "host"|"cell"|null, "affinity": "host"|null}`` or null (``affinity`` absent:
    null, as documents written before it was recorded)."""
    if value is None:
        return None, None, None
    d = as_mapping(value, at)
    anti = get_key(d, "anti_affinity", at, None)
    affinity = get_key(d, "affinity", at, None)
    return (
        take(d, "name", at, as_str),
        None if anti is None else _ANTI(anti, at.key("anti_affinity")),
        None if affinity is None else _AFFINITY(affinity, at.key("affinity")),
    )


def _node_count(value: object, at: At, cells: int) -> int:
    count = as_int(value, at)
    if count != cells:
        raise at.fail(f"says {count} guest cells but the placement has {cells}; use \"auto\" or {cells}")
    return count


def _assignment_from_dict(value: object, parent: At, i: int) -> tuple[CellAssignment, bool]:
    """A guest cell, and whether it is the cold tier."""
    at = parent.index(i)
    d = as_mapping(value, at)
    kib = get_key(d, "memory_kib", at, None)
    memory_kib = take(d, "memory_mib", at, as_int) * KIB_PER_MIB if kib is None else as_int(kib, at.key("memory_kib"))
    cold = get_key(d, "cold", at, False)
    if not isinstance(cold, bool):
        raise at.key("cold").fail(f"must be true or false, got {cold!r}")
    return CellAssignment(
        guest_cell=take(d, "guest_cell", at, as_int),
        host_cell=take(d, "host_cell", at, as_int),
        vcpus=take(d, "vcpus", at, as_ints),
        pcpus=take(d, "pcpus", at, as_ints),
        memory_kib=memory_kib,
        page_size_kib=take(d, "page_size_kib", at, as_int),
        memory_mode=take(d, "memory_mode", at, _MEMORY_MODE, MemoryMode.STRICT.value),
    ), cold


def _device_assignment_from_dict(value: object, parent: At, i: int) -> DeviceAssignment | PartitionAssignment:
    """A device passed through whole, or a GPU partition (kind ``vgpu``/``mig``)."""
    at = parent.index(i)
    d = as_mapping(value, at)
    if d.get("kind") in _PARTITION_KINDS:
        return _partition_from_dict(d, at)
    return DeviceAssignment(
        address=take(d, "address", at, as_str),
        kind=take(d, "kind", at, _KIND),
        guest_cell=take(d, "guest_cell", at, as_int),
        host_cell=take(d, "host_cell", at, as_opt_int, None),
        peer_of=take(d, "peer_of", at, as_opt_str, None),
    )


def _partition_from_dict(d: Mapping[str, Any], at: At) -> PartitionAssignment:
    kind = PartitionKind(d["kind"])
    return PartitionAssignment(
        kind=kind,
        gpu=take(d, "gpu", at, as_str),
        name=take(d, _PARTITION_NAME[kind], at, as_str),
        uuid=take(d, "uuid", at, as_str),
        guest_cell=take(d, "guest_cell", at, as_int),
        host_cell=take(d, "host_cell", at, as_opt_int, None),
        vf=take(d, "vf", at, as_opt_str, None),
        start=take(d, "start", at, as_opt_int, None),
    )


_ASSIGNMENTS = list_of(_assignment_from_dict)
_DEVICE_ASSIGNMENTS = list_of(_device_assignment_from_dict)


def tenant_to_dict(t: Tenant) -> dict[str, Any]:
    """The tenant as a JSON-ready dict: ``name``, ``isolation``, ``max_vcpus``, ``max_gpus``, and its VMs'
    default cache slice and bandwidth cap ``llc_kib``, ``llc_ways``, ``mem_bw`` (null: none)."""
    return {"name": t.name, "isolation": t.isolation.value, "max_vcpus": t.max_vcpus, "max_gpus": t.max_gpus,
            "llc_kib": t.llc_kib, "llc_ways": t.llc_ways, "mem_bw": t.mem_bw}


def tenant_from_dict(d: Mapping[str, Any]) -> Tenant:
    """Build a tenant from its dict form.

    Raises:
        InvalidInputError: a missing key, a wrong type or an unknown isolation.
    """
    at = At("tenant")
    d = as_mapping(d, at)
    name = take(d, "name", at, as_str)
    at = At(f"tenant {name!r}")
    return Tenant(
        name=name,
        isolation=take(d, "isolation", at, _ISOLATION, Isolation.CORE.value),
        max_vcpus=take(d, "max_vcpus", at, as_opt_int, None),
        max_gpus=take(d, "max_gpus", at, as_opt_int, None),
        llc_kib=take(d, "llc_kib", at, as_opt_int, None),
        llc_ways=take(d, "llc_ways", at, as_opt_int, None),
        mem_bw=take(d, "mem_bw", at, as_opt_int, None),
    )
