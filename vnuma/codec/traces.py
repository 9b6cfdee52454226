"""The inventory as a workload trace (``vnuma trace export``): hosts, and optionally VMs as requests.

Pure: no I/O. Format: ``docs/traces.md`` (version 1), read back by
:func:`vnuma.sources.trace.load_trace`. A trace describes a *starting*
state, so a host is written as it is now: the placeable CPUs no VM holds
(sibling groups cut to them), the pages of each size still free (``total``
the cell's pool), the GPUs no VM holds; reserved CPUs are left out. With
``with_vms`` the hosts are written whole instead and every VM becomes one of
the first requests (in VM name order), so a replay re-places them before
whatever follows, each as the request it keeps, as it was asked
(:func:`vnuma.sources.tracerequests.request_keys`: version 1's keys, then
every option that differs from its default). GPUs without a NUMA node are
left out (noted).

Memory-only cells are written with ``cpus`` empty and their pages still free
(a cold tier's claims taken off); the host's HMAT as ``hmat``. A cell that has
CPUs but none free to write (all held, reserved or in a shared pool) is written
with ``cpus`` empty too, so in the trace it looks memory-only: its pages are written none free
(no trace request could use them, and no cold tier may) and its HMAT rows as
an initiator are left out.

GPUs and NICs are written with their place in the PCIe tree when the
inventory knows it (``root_complex``, ``bridges``; a bare address
otherwise), a NIC with its SR-IOV virtual functions as ``vfs`` (a count when
their addresses are the ones a trace numbers, else the list); a VF is never
a NIC of its own there. As it is now, a NIC a VM holds, or one of whose VFs
a VM holds, is left out (its free VFs with it, noted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from vnuma.placement.kept import kept_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import Placement, Tenant
from vnuma.sources.trace import vf_addresses
from vnuma.sources.tracerequests import request_keys
from vnuma.sources.tracestates import states_to_trace
from vnuma.topology import KIB_PER_MIB, PAGE_4K, Cell, DeviceKind, Host, PciDevice
from vnuma.topology.devstates import NO_DEVICE_STATES
from vnuma.topology.hmat import nested

FORMAT = "numa-placement-trace"


def trace_document(
    hosts: Sequence[Host], placements: Sequence[Placement], tenants: Iterable[Tenant], *, with_vms: bool
) -> dict[str, Any]:
    """The trace document of ``hosts`` (their VMs among ``placements``); see the module doc."""
    names = {h.name for h in hosts}
    mine = [p for p in placements if p.host in names]
    # Whole, a host carries its device states in the trace (its tainted and cleaning devices written with the
    # others); as it is now, they are left out as the devices VMs hold are.
    fleet = Fleet([replace(h, device_states=NO_DEVICE_STATES) for h in hosts] if with_vms else hosts,
                  () if with_vms else mine, tenants)
    requests = [request_keys(kept_request(p)) for p in sorted(mine, key=lambda p: p.vm)] if with_vms else []
    loose = sum(1 for h in hosts for d in h.devices if d.kind is DeviceKind.GPU and d.numa_node is None)
    notes = [f"{len(hosts)} host(s)"]
    notes.append(f"{len(requests)} VM(s) as the first requests" if with_vms else f"as they are now ({len(mine)} VM(s))")
    if loose:
        notes.append(f"{loose} GPU(s) without a NUMA node left out")
    loose_nics = sum(1 for h in hosts for d in h.devices if _is_pf_nic(d) and d.numa_node is None)
    if loose_nics:
        notes.append(f"{loose_nics} NIC(s) without a NUMA node left out")
    shared: dict[int, tuple[dict[str, Any], int, int]] = {}
    written = [_written(fleet.state(h.name), h, with_vms, shared) for h in sorted(hosts, key=lambda h: h.name)]
    emptied = sum(n for _, n, _ in written)
    if emptied:
        notes.append(f"{emptied} cell(s) with no free CPU written memory-only, no page free")
    via_vf = sum(n for _, _, n in written)
    if via_vf:
        notes.append(f"{via_vf} NIC(s) with a virtual function held left out, their free VFs with them")
    return {
        "format": FORMAT,
        "version": 1,
        "scenario": "inventory",
        "seed": None,
        "description": "exported from the vnuma inventory: " + "; ".join(notes),
        "hosts": [doc for doc, _, _ in written],
        "requests": requests,
    }


def _written(
    hs: HostState, host: Host, whole: bool, shared: dict[int, tuple[dict[str, Any], int, int]]
) -> tuple[dict[str, Any], int, int]:
    """:func:`_host`; a host without claims or device states is its shape's unclaimed state, so such hosts of one
    shape share one document but for the name (100,000 hosts of a few shapes: a few documents)."""
    if hs.built or (whole and states_to_trace(host.device_states) is not None):
        return _host(hs, host, whole)
    if id(hs.shape) not in shared:
        shared[id(hs.shape)] = _host(hs, host, whole)
    doc, emptied, via_vf = shared[id(hs.shape)]
    return {**doc, "name": host.name}, emptied, via_vf


def _host(hs: HostState, host: Host, whole: bool) -> tuple[dict[str, Any], int, int]:
    """The host's document (``whole``: with its device states), how many of its cells with CPUs were written
    without any, and how many of its NICs were left out for a VF a VM holds."""
    cells = [_cell(hs, host, cell) for cell in host.cells]
    doc: dict[str, Any] = {"name": host.name, "cells": cells}
    states = states_to_trace(host.device_states) if whole else None
    if states is not None:
        doc["device_states"] = states
    initiators = {c["id"] for c in cells if c["cpus"]}
    hmat = _hmat(host, initiators)
    if hmat:
        doc["hmat"] = hmat
    taken = hs.devices_taken
    via_vf = sum(1 for d in host.devices if _is_pf_nic(d) and d.address not in taken and any(v in taken for v in d.vfs))
    return doc, sum(1 for cell, c in zip(host.cells, cells, strict=True) if cell.cpus and not c["cpus"]), via_vf


def _hmat(host: Host, initiators: set[int]) -> dict[str, Any]:
    """The host's HMAT in the shape ``host show --json`` uses, only the matrices it has, only rows from
    ``initiators`` (the cells written with CPUs: a trace's HMAT initiator must have some)."""
    out: dict[str, Any] = {}
    for name, matrix in host.hmat.matrices().items():
        rows = {str(i): {str(t): v for t, v in row.items()} for i, row in nested(matrix).items() if i in initiators}
        if rows:
            out[name] = rows
    return out


def _cell(hs: HostState, host: Host, cell: Cell) -> dict[str, Any]:
    state = hs.cell_by_id.get(cell.id)
    if state is None:  # memory-only, or no placeable CPU: nothing of it is claimed by CPU
        cpus: list[int] = []
        groups: list[list[int]] = []
        own = {p.size_kib: p.count for p in cell.pages} or {PAGE_4K: cell.memory_kib // PAGE_4K}
        # A memory-only cell: what the cold tiers of the VMs counted in ``hs`` left.
        pools = {size: (total, hs.cold_free.get((cell.id, size), total)) for size, total in own.items()}
        gpus = [d.address for d in host.devices if d.kind is DeviceKind.GPU and d.numa_node == cell.id]
    else:
        free = [sorted(core.free - set(core.shared)) for core in state.cores]
        groups = [g for g in free if g]
        cpus = sorted(c for g in groups for c in g)
        pools = {size: (total, state.pages_free.get(size, 0)) for size, total in state.pages_total.items()}
        gpus = sorted(state.gpus_free)
    if cell.cpus and not cpus:
        # Looks memory-only in the trace: no page free, or a replay's cold tiers would take its memory.
        pools = {size: (total, 0) for size, (total, _free) in pools.items()}
    doc: dict[str, Any] = {
        "id": cell.id,
        "cpus": cpus,
        "siblings": groups,
        "memory_mib": cell.memory_kib // KIB_PER_MIB,
        "hugepages": {str(size): {"total": total, "free": free} for size, (total, free) in sorted(pools.items())},
        "distances": {str(other): d for other, d in cell.distances},
        "gpus": [_device(hs.shape.device_at[a]) for a in gpus],
    }
    taken = hs.devices_taken
    nics = [
        _device(d) for d in host.devices
        if _is_pf_nic(d) and d.numa_node == cell.id and d.address not in taken and not any(v in taken for v in d.vfs)
    ]
    if nics:
        doc["nics"] = nics
    return doc


def _is_pf_nic(d: PciDevice) -> bool:
    """A NIC that is not a virtual function (a trace writes VFs under their PF)."""
    return d.kind is DeviceKind.NIC and d.pf is None


def _device(d: PciDevice) -> str | dict[str, Any]:
    """A GPU or NIC as a trace writes it: a bare address when the inventory knows nothing of its place."""
    vfs = d.vfs if d.kind is DeviceKind.NIC else ()  # a trace models NICs' virtual functions only
    if d.root_complex is None and not d.bridges and not vfs:
        return d.address
    doc: dict[str, Any] = {"address": d.address, "root_complex": d.root_complex}
    if d.bridges:
        doc["bridges"] = list(d.bridges)
    if vfs:
        try:
            numbered = vf_addresses(d.address, len(d.vfs)) == d.vfs
        except ValueError:
            numbered = False
        doc["vfs"] = len(d.vfs) if numbered else list(d.vfs)
    return doc
