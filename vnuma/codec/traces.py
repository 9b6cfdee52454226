"""The inventory as a workload trace (``vnuma trace export``): hosts, and optionally VMs as requests.

Pure: no I/O. Format: ``docs/traces.md`` (version 1), read back by
:func:`vnuma.sources.trace.load_trace`. A trace describes a *starting*
state, so a host is written as it is now: the placeable CPUs no VM holds
(sibling groups cut to them), the pages of each size still free (``total``
the cell's pool), the GPUs no VM holds; reserved CPUs are left out. With
``with_vms`` the hosts are written whole instead and every VM becomes one of
the first requests (in VM name order), so a replay re-places them before
whatever follows. What version 1 cannot say is simplified and listed in the
description: a VM with guest cells of different sizes is written with
``numa_nodes`` null (auto), GPUs without a NUMA node are left out, and VM
policies the format lacks (memory modes, emulator threads, groups) are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import Placement, Tenant
from vnuma.topology import KIB_PER_MIB, PAGE_4K, Cell, DeviceKind, Host

FORMAT = "numa-placement-trace"


def trace_document(
    hosts: Sequence[Host], placements: Sequence[Placement], tenants: Iterable[Tenant], *, with_vms: bool
) -> dict[str, Any]:
    """The trace document of ``hosts`` (their VMs among ``placements``); see the module doc."""
    names = {h.name for h in hosts}
    mine = [p for p in placements if p.host in names]
    fleet = Fleet(hosts, () if with_vms else mine, tenants)
    requests = [_request(p) for p in sorted(mine, key=lambda p: p.vm)] if with_vms else []
    uneven = sum(1 for p in mine if _uneven(p)) if with_vms else 0
    loose = sum(1 for h in hosts for d in h.devices if d.kind is DeviceKind.GPU and d.numa_node is None)
    notes = [f"{len(hosts)} host(s)"]
    notes.append(f"{len(requests)} VM(s) as the first requests" if with_vms else f"as they are now ({len(mine)} VM(s))")
    if uneven:
        notes.append(f"{uneven} VM(s) with guest cells of different sizes written as auto")
    if loose:
        notes.append(f"{loose} GPU(s) without a NUMA node left out")
    return {
        "format": FORMAT,
        "version": 1,
        "scenario": "inventory",
        "seed": None,
        "description": "exported from the vnuma inventory: " + "; ".join(notes),
        "hosts": [_host(fleet.state(h.name), h) for h in sorted(hosts, key=lambda h: h.name)],
        "requests": requests,
    }


def _host(hs: HostState, host: Host) -> dict[str, Any]:
    return {"name": host.name, "cells": [_cell(hs, host, cell) for cell in host.cells]}


def _cell(hs: HostState, host: Host, cell: Cell) -> dict[str, Any]:
    state = hs.cell_by_id.get(cell.id)
    if state is None:  # memory-only, or no placeable CPU: nothing of it is claimed by CPU
        cpus: list[int] = []
        groups: list[list[int]] = []
        pools = {p.size_kib: (p.count, p.count) for p in cell.pages} or {
            PAGE_4K: (cell.memory_kib // PAGE_4K,) * 2
        }
        gpus = [d.address for d in host.devices if d.kind is DeviceKind.GPU and d.numa_node == cell.id]
    else:
        free = [sorted(core.free - set(core.shared)) for core in state.cores]
        groups = [g for g in free if g]
        cpus = sorted(c for g in groups for c in g)
        pools = {size: (total, state.pages_free.get(size, 0)) for size, total in state.pages_total.items()}
        gpus = sorted(state.gpus_free)
    doc: dict[str, Any] = {
        "id": cell.id,
        "cpus": cpus,
        "siblings": groups,
        "memory_mib": cell.memory_kib // KIB_PER_MIB,
        "hugepages": {str(size): {"total": total, "free": free} for size, (total, free) in sorted(pools.items())},
        "distances": {str(other): d for other, d in cell.distances},
        "gpus": gpus,
    }
    nics = [d.address for d in host.devices if d.kind is DeviceKind.NIC and d.numa_node == cell.id]
    if nics:
        doc["nics"] = nics
    return doc


def _uneven(p: Placement) -> bool:
    """Guest cells of different sizes (version 1 has no way to say so)."""
    return len({(len(c.vcpus), c.memory_kib) for c in p.cells}) > 1


def _request(p: Placement) -> dict[str, Any]:
    return {
        "tenant": p.tenant,
        "name": p.vm,
        "vcpus": p.vcpus,
        "memory_mib": p.memory_kib // KIB_PER_MIB,
        "numa_nodes": None if _uneven(p) else p.numa_nodes,
        "cpu_policy": str(p.cpu_policy),
        "thread_policy": str(p.thread_policy),
        "page_size_kib": p.cells[0].page_size_kib if p.cells else None,
        "gpus": sum(1 for d in p.devices if d.kind is DeviceKind.GPU),
    }
