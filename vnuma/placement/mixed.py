"""Cpu policy ``mixed`` (Nova's): what a mixed request and a mixed placement must be, by themselves.

Pure: no I/O. A mixed VM's ``dedicated_vcpus`` are pinned 1:1 as a dedicated
VM's (under thread policy ``prefer`` or ``isolate``), its other vCPUs float as
a shared VM's over the pool of their guest cell. What a mixed cell needs of a
host cell is not decided here but by the one capacity rule,
:meth:`vnuma.placement.ledger.cell.CellState.capacity` (every vCPU counted as
if pinned); how a cell lists its pins and float set is
:func:`vnuma.placement.model.mixed_split`. :mod:`.request` asks
:func:`mixed_request_problem`, admission's ``shape`` check
:func:`mixed_shape_problem`.
"""

from __future__ import annotations

from collections import Counter

from vnuma.placement.model import CpuPolicy, Placement, ThreadPolicy, VmRequest, mixed_split
from vnuma.topology import format_cpuset


def mixed_request_problem(request: VmRequest) -> str | None:
    """What is wrong with a request's dedicated vCPUs (None: nothing): ``--dedicated-vcpus`` only with
    ``mixed``, and then some but not all of an explicit vCPU count; ``require`` refused (it promises the
    guest sibling pairs, which floating vCPUs are not)."""
    dedicated = request.dedicated_vcpus
    if request.cpu_policy is not CpuPolicy.MIXED:
        return "--dedicated-vcpus needs cpu policy mixed" if dedicated else None
    if not dedicated:
        return "cpu policy mixed needs the vCPUs to dedicate (--dedicated-vcpus LIST, e.g. 0-3)"
    if request.vcpus is None:
        return "cpu policy mixed needs an explicit vCPU count (--vcpus) to number its dedicated vCPUs in"
    outside = sorted(v for v in dedicated if not 0 <= v < request.vcpus)
    if outside:
        return (
            f"dedicated vCPU(s) {format_cpuset(outside)} out of range: the VM has {request.vcpus} vCPUs "
            f"(0-{request.vcpus - 1})"
        )
    if len(dedicated) == request.vcpus:
        return "every vCPU is dedicated: use cpu policy dedicated"
    if request.thread_policy is ThreadPolicy.REQUIRE:
        return "thread policy require needs cpu policy dedicated (a mixed VM's floating vCPUs are not sibling pairs)"
    return None


def mixed_shape_problem(p: Placement) -> str | None:
    """What is malformed in a ``mixed`` placement (None: nothing): it dedicates some but not all of its own
    vCPUs, no pCPU is pinned twice or both pinned and floated over, and a cell with a floating vCPU has a
    float set."""
    if not p.dedicated_vcpus or not p.dedicated_vcpus < frozenset(v for ca in p.cells for v in ca.vcpus):
        return "a mixed placement dedicates some but not all of its own vCPUs"
    pins: list[int] = []
    for ca in p.cells:
        own, floats = mixed_split(ca, p.dedicated_vcpus)
        pins += own.values()
        asked = sum(1 for v in ca.vcpus if v in p.dedicated_vcpus)
        if len(own) < asked:
            return f"guest cell {ca.guest_cell} pins {asked} dedicated vCPUs to {len(own)} pCPUs"
        if len(own) < len(ca.vcpus) and not floats:
            return f"guest cell {ca.guest_cell} has floating vCPUs but no float set"
    bad = {cpu for cpu, n in Counter(pins).items() if n > 1} | (frozenset(pins) & p.shared_pcpus)
    if bad:
        return f"pCPU(s) {format_cpuset(bad)} pinned to more than one vCPU or floated over"
    return None
