"""The workload-trace format (``numa-placement-trace`` version 1): parse and validate.

Pure: parses bytes the caller read; no I/O. Format: ``docs/traces.md``
(examples in ``examples/traces/``). Every problem raises :class:`InvalidInputError`
naming the file and the key path (``trace.json: hosts[3].cells[1].siblings``).

Hosts become topology ``Host`` objects (source ``trace``): CPUs carry no
socket/die/core ids (the format has none), siblings come from the groups,
each ``hugepages`` pool becomes a page pool of its ``free`` count (the trace
describes the starting state), GPUs and NICs become PCI devices on their
cell, a cell with ``cpus`` empty is a memory-only cell, and the optional
``hmat`` (the shape ``host show --json`` uses) becomes the host's HMAT.
A request's optional ``cold_memory_mib`` / ``cold_tier`` ask for a cold
tier (:mod:`vnuma.placement.cold`); absent: none.

A GPU or NIC is a bare PCI address (no place in the PCIe tree: every level
to it is unknown) or an object giving its place: ``root_complex``,
``switch`` (the upstream bridge of the switch it hangs below; alone it
stands for ``bridges`` ``[switch]``) and ``bridges`` (nearest first, up to
the root port), and for a NIC its SR-IOV virtual functions ``vfs`` (a count,
numbered from routing ID PF + 2 with stride 1 as ConnectX NICs do: PF
``0000:16:00.0`` has ``0000:16:00.2`` .. ``0000:16:01.1`` for 8, or a list of
addresses). A VF sits where its PF does. A request's optional ``nics``
(a count or ``per-gpu``), ``nic_affinity`` and ``nic_function`` ask for NICs
beside its GPUs (:mod:`vnuma.placement.nics`); absent: none.

GPU partitions: the optional top-level ``gpu_profiles`` lists MIG geometries
(profile files' keys, :mod:`vnuma.sources.migprofiles`); a GPU object's
``mig`` names one of them by ``model`` (the GPU gets its first PCI id, so
the geometry is its), and its ``vgpu`` (``{"TYPE": instances}``) gives vGPU
types its physical function offers. A request's optional ``vgpu`` or ``mig``
(``"NAME"`` or ``"NAME:COUNT"``, with ``gpus`` 0) asks for partitions
(:mod:`vnuma.placement.partitions`).

Here: the document and its hosts; a request's keys are read by
:mod:`.tracerequests`, key paths kept by :mod:`.tracekeys`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.model import VmRequest
from vnuma.sources.migprofiles import geometry_from_dict
from vnuma.sources.tracekeys import At
from vnuma.sources.tracerequests import parse_request
from vnuma.sources.tracescan import HostEntry, scan_trace
from vnuma.sources.tracestates import states_from_trace
from vnuma.topology import KIB_PER_MIB, Cell, Cpu, DeviceKind, Host, MdevType, PagePool, PciDevice, Source
from vnuma.topology.hmat import NO_HMAT, hmat_from_json
from vnuma.topology.hostcheck import check_host
from vnuma.topology.mig import MigGeometry, ProfileError
from vnuma.topology.names import name_problem
from vnuma.topology.partitions import with_gpu_profiles

FORMAT = "numa-placement-trace"
VF_OFFSET = 2
"""A PF's first VF is this many routing IDs (device/function numbers) after it, the next ones one apart."""
_PCI_ADDRESS = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


@dataclass(frozen=True, slots=True)
class Trace:
    """A parsed trace: the fleet's hosts (in file order) and the requests in arrival order."""

    scenario: str
    hosts: tuple[Host, ...]
    requests: tuple[VmRequest, ...]


def load_trace(data: bytes | str, what: str) -> Trace:
    """Parse and validate a trace file's bytes (or text); ``what`` names it in errors.

    The document is read host by host (:mod:`.tracescan`): hosts that differ only in name are decoded once and
    share one topology (cells, devices, HMAT), so memory grows with the hosts' names, not their topologies.

    Raises:
        InvalidInputError: not JSON, not this format or version, a missing
            key, a wrong type, an inconsistent host (siblings that do not
            partition the CPUs, distances to missing cells, duplicate names).
    """
    try:
        doc = scan_trace(data if isinstance(data, str) else trace_text(data, what))
    except ValueError as err:
        raise InvalidInputError(f"{what}: not valid JSON: {err}") from None
    at = At(what)
    if not isinstance(doc, dict):
        raise at.fail("expected a JSON object")
    if at.get(doc, "format", str) != FORMAT:
        raise at.key("format").fail(f"expected {FORMAT!r}, got {doc['format']!r}")
    if at.get(doc, "version", int) != 1:
        raise at.key("version").fail(f"only version 1 is supported, got {doc['version']}")
    scenario = at.get(doc, "scenario", str)
    geometries = _geometries(at.get(doc, "gpu_profiles", list, optional=True) or [], at.key("gpu_profiles"))
    decoded: dict[int, Host] = {}
    hosts = tuple(
        _shared_host(entry, at.key("hosts").index(i), geometries, decoded)
        for i, entry in enumerate(at.get(doc, "hosts", list))
    )
    _unique([h.name for h in hosts], at.key("hosts"), "host name")
    requests = tuple(
        parse_request(r, at.key("requests").index(i)) for i, r in enumerate(at.get(doc, "requests", list))
    )
    _unique([r.name for r in requests], at.key("requests"), "request name")
    return Trace(scenario, hosts, requests)


def trace_text(data: bytes, what: str) -> str:
    """A trace file's bytes as text (UTF-8, or UTF-16/32 as JSON allows); a caller holding only the text
    holds the file once.

    Raises:
        InvalidInputError: not text in any of those encodings.
    """
    try:
        return data.decode(json.detect_encoding(data), "surrogatepass")
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{what}: not valid JSON: {err}") from None


def _shared_host(entry: HostEntry, at: At, geometries: Mapping[str, MigGeometry], decoded: dict[int, Host]) -> Host:
    """A scanned host; the first of those sharing its object is decoded, the others are it renamed."""
    name, body = entry
    if name is None:
        return _host(body, at, geometries)
    found = decoded.get(id(body))
    if found is None:
        found = decoded[id(body)] = _host({"name": name, **body}, at, geometries)
        return found
    problem = name_problem(name, "host")
    if problem is not None:
        raise at.key("name").fail(problem)
    return replace(found, name=name)


def _geometries(raw: list[Any], at: At) -> dict[str, MigGeometry]:
    """The trace's MIG geometries by model."""
    out: dict[str, MigGeometry] = {}
    for i, doc in enumerate(raw):
        try:
            g = geometry_from_dict(doc, "geometry")
        except ProfileError as err:
            raise at.index(i).fail(str(err)) from None
        if g.model in out:
            raise at.index(i).fail(f"model {g.model!r} is listed twice")
        out[g.model] = g
    return out


def _unique(names: list[str], at: At, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise at.index(i).fail(f"duplicate {what} {name!r}")
        seen.add(name)


def _host(raw: object, at: At, geometries: Mapping[str, MigGeometry]) -> Host:
    if not isinstance(raw, dict):
        raise at.fail("expected an object")
    name = at.get(raw, "name", str)
    problem = name_problem(name, "host")
    if problem is not None:
        raise at.key("name").fail(problem)
    cells: list[Cell] = []
    devices: list[PciDevice] = []
    for i, rc in enumerate(at.get(raw, "cells", list)):
        cell, devs = _cell(rc, at.key("cells").index(i), geometries)
        cells.append(cell)
        devices += devs
    seen: set[str] = set()
    for dev in devices:
        if dev.address in seen:
            raise at.fail(
                f"PCI address {dev.address} is listed twice"
                + (f" (a virtual function of {dev.pf})" if dev.pf is not None else "")
            )
        seen.add(dev.address)
    raw_hmat = at.get(raw, "hmat", dict, optional=True)
    host = Host(
        name,
        tuple(sorted(cells, key=lambda c: c.id)),
        tuple(sorted(devices, key=lambda d: d.address)),
        source=Source.TRACE,
        hmat=NO_HMAT if raw_hmat is None else hmat_from_json(raw_hmat, at.key("hmat")),
        device_states=states_from_trace(at.get(raw, "device_states", dict, optional=True), at.key("device_states"),
                                        devices),
    )
    try:
        return with_gpu_profiles(check_host(host), geometries.values())
    except InvalidInputError as err:
        raise at.fail(str(err)) from None


def _cell(raw: object, at: At, geometries: Mapping[str, MigGeometry]) -> tuple[Cell, list[PciDevice]]:
    if not isinstance(raw, dict):
        raise at.fail("expected an object")
    cid = at.count(raw, "id", 0)
    cpus = at.get(raw, "cpus", list)
    siblings = at.get(raw, "siblings", list)
    group_of: dict[int, frozenset[int]] = {}
    for i, group in enumerate(siblings):
        g_at = at.key("siblings").index(i)
        if not isinstance(group, list) or not group or not all(type(c) is int for c in group):
            raise g_at.fail("expected a non-empty list of CPU ids")
        for cpu in group:
            if cpu in group_of:
                raise g_at.fail(f"CPU {cpu} is in more than one sibling group")
            group_of[cpu] = frozenset(group)
    if not all(type(c) is int and c >= 0 for c in cpus):
        raise at.key("cpus").fail("expected a list of CPU ids (integers >= 0)")
    if set(group_of) != set(cpus) or len(set(cpus)) != len(cpus):
        raise at.key("siblings").fail("sibling groups must partition the cell's cpus")
    cpu_objs = tuple(Cpu(c, None, None, None, group_of[c]) for c in sorted(cpus))
    pages = _pages(at.get(raw, "hugepages", dict), at.key("hugepages"))
    distances = _distances(at.get(raw, "distances", dict), at.key("distances"))
    memory_kib = at.count(raw, "memory_mib", 0) * KIB_PER_MIB
    devices = [
        d
        for i, a in enumerate(at.get(raw, "gpus", list))
        for d in _gpu(a, cid, at.key("gpus").index(i), geometries)
    ]
    nics = at.get(raw, "nics", list, optional=True) or []
    devices += [d for i, a in enumerate(nics) for d in _device(a, DeviceKind.NIC, cid, at.key("nics").index(i))]
    return Cell(cid, memory_kib, cpu_objs, pages, distances), devices


def _pages(raw: Mapping[str, Any], at: At) -> tuple[PagePool, ...]:
    pools = []
    for key, pool in raw.items():
        p_at = at.key(key)
        if not key.isdecimal() or len(key) > 12 or int(key) < 4 or int(key) % 4:
            raise p_at.fail(
                "page size must be a decimal number of KiB, a multiple of 4 (4, 2048, 1048576, ...)"
            )
        if not isinstance(pool, dict):
            raise p_at.fail("expected an object with total and free")
        total, free = p_at.count(pool, "total", 0), p_at.count(pool, "free", 0)
        if free > total:
            raise p_at.key("free").fail(f"{free} free pages exceed the total {total}")
        pools.append(PagePool(int(key), free))
    return tuple(sorted(pools, key=lambda p: p.size_kib))


def _distances(raw: Mapping[str, Any], at: At) -> tuple[tuple[int, int], ...]:
    out = []
    for key, value in raw.items():
        if not key.isdecimal() or len(key) > 9:
            raise at.key(key).fail("cell ids must be decimal strings")
        if type(value) is not int or value < 10:
            raise at.key(key).fail(f"expected a distance of 10 or more, got {value!r}")
        out.append((int(key), value))
    return tuple(sorted(out))


def _device(raw: object, kind: DeviceKind, cell: int, at: At) -> list[PciDevice]:
    """A GPU or NIC: a bare address, or an object with its place in the PCIe tree (and a NIC's VFs);
    for a NIC with VFs, the PF then its VFs."""
    if isinstance(raw, str) and raw:
        return [PciDevice(raw, kind, "0x0000", "0x0000", cell)]
    if not isinstance(raw, dict):
        raise at.fail("expected a PCI address string or an object with an address")
    address = at.get(raw, "address", str)
    if not address:
        raise at.key("address").fail("expected a PCI address, got ''")
    root_complex = _name(raw, "root_complex", at)
    switch = _name(raw, "switch", at)
    raw_bridges = at.get(raw, "bridges", list, optional=True)
    if raw_bridges is None:
        bridges: tuple[str, ...] = () if switch is None else (switch,)
    else:
        if not all(isinstance(b, str) and b for b in raw_bridges):
            raise at.key("bridges").fail("expected a list of PCI addresses (nearest first)")
        bridges = tuple(raw_bridges)
        if len(set(bridges)) != len(bridges):
            raise at.key("bridges").fail("a bridge is listed twice")
        if switch is not None and switch not in bridges:
            raise at.key("switch").fail(f"switch {switch} is not one of the device's bridges")
    vf_addresses = _vfs(raw, address, kind, at)
    pf = PciDevice(
        address, kind, "0x0000", "0x0000", cell, parent=bridges[0] if bridges else None,
        root_complex=root_complex, bridges=bridges, vfs=vf_addresses,
        vf_max=len(vf_addresses) if vf_addresses else None,
    )
    vfs = [
        PciDevice(a, kind, "0x0000", "0x0000", cell, parent=pf.parent, root_complex=root_complex, bridges=bridges,
                  pf=address)
        for a in vf_addresses
    ]
    return [pf, *vfs]


def _gpu(raw: object, cell: int, at: At, geometries: Mapping[str, MigGeometry]) -> list[PciDevice]:
    """A GPU (:func:`_device`) with what it can be cut into: ``mig`` (a model of ``gpu_profiles``) and ``vgpu``
    (types its physical function offers, with their instances)."""
    found = _device(raw, DeviceKind.GPU, cell, at)
    if not isinstance(raw, dict) or not ({"mig", "vgpu"} & raw.keys()):
        return found
    gpu = found[0]
    model = _name(raw, "mig", at)
    if model is not None:
        if model not in geometries:
            known = ", ".join(sorted(geometries)) or "none"
            raise at.key("mig").fail(f"no MIG geometry of model {model!r} in gpu_profiles (known: {known})")
        g = geometries[model]
        if not g.pci_ids:
            raise at.key("mig").fail(f"the geometry of {model!r} lists no PCI id to match its GPUs")
        vendor, product = g.pci_ids[0].split(":")
        gpu = replace(gpu, vendor_id=vendor, product_id=product)
    types = at.get(raw, "vgpu", dict, optional=True) or {}
    for name, count in types.items():
        if not name or type(count) is not int or count < 1:
            raise at.key("vgpu").fail("expected {\"TYPE\": instances} with at least 1 instance each")
    mdevs = tuple(MdevType(name, name, "vfio-pci", count) for name, count in sorted(types.items()))
    return [replace(gpu, mdev_types=mdevs), *found[1:]]


def _name(raw: Mapping[str, Any], key: str, at: At) -> str | None:
    """An optional string key (absent or null: None); an empty string is refused."""
    value = at.get(raw, key, str, optional=True)
    if value == "":
        raise at.key(key).fail("expected a non-empty string or null, got ''")
    return value


def _vfs(raw: Mapping[str, Any], address: str, kind: DeviceKind, at: At) -> tuple[str, ...]:
    """A NIC's virtual functions: ``vfs`` as a count (numbered from the PF, :data:`VF_OFFSET`) or a list."""
    if "vfs" not in raw:
        return ()
    v_at = at.key("vfs")
    value = raw["vfs"]
    if kind is not DeviceKind.NIC:
        raise v_at.fail("only a NIC has virtual functions here")
    if isinstance(value, list):
        if not all(isinstance(a, str) and a for a in value):
            raise v_at.fail("expected a list of PCI addresses")
        if address in value or len(set(value)) != len(value):
            raise v_at.fail("virtual function addresses must be distinct from each other and from the PF")
        return tuple(value)
    count = at.count(raw, "vfs", 0)
    if not count:
        return ()
    try:
        return vf_addresses(address, count)
    except ValueError as err:
        raise v_at.fail(str(err)) from None


def vf_addresses(pf: str, count: int) -> tuple[str, ...]:
    """The addresses a trace gives ``count`` VFs of the PF at ``pf``: routing IDs (device/function numbers on
    the PF's bus) from the PF's + :data:`VF_OFFSET`, one apart (``0000:16:00.0`` -> ``0000:16:00.2`` ..
    ``0000:16:00.7``, ``0000:16:01.0``, ...).

    Raises:
        ValueError: ``pf`` is not ``dddd:bb:ss.f``, or the VFs run past the bus's last routing ID.
    """
    match = _PCI_ADDRESS.match(pf)
    if match is None or int(match[3], 16) > 0x1F:
        raise ValueError(f"a count of VFs needs the PF's address as dddd:bb:ss.f, got {pf!r}")
    domain, bus, slot, fn = match.groups()
    first = (int(slot, 16) << 3 | int(fn)) + VF_OFFSET
    if first + count > 0x100:
        raise ValueError(f"{count} VFs after {pf} do not fit on its bus (give their addresses as a list)")
    return tuple(f"{domain}:{bus}:{devfn >> 3:02x}.{devfn & 7}" for devfn in range(first, first + count))


