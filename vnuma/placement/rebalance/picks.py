"""Which VMs the joint plan (:mod:`.joint`) models, and each one's candidates.

Pure: no I/O. Choice and order of the modelled VMs, and the candidates per
VM: see :mod:`.joint` (steps 2 and 3). Every candidate is an engine
placement on the working fleet with the VM itself removed (and, for the
helpers' room, its host's helpers removed too), so each alone is admissible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.assign import Candidate, stay, usage
from vnuma.placement.rebalance.base import Plan, is_movable
from vnuma.placement.rebalance.fragmentation import partly_used
from vnuma.placement.rebalance.locality import locality_cost
from vnuma.placement.rebalance.search import Search

MODELLED = 64
HELPERS = 4
OTHER_HOSTS = 3


def modelled(search: Search, objective: Objective, greedy: Plan) -> tuple[list[Placement], set[str]]:
    """The VMs in the model, in replay order (the greedy's, the objective's own, their helpers; see the
    module doc), and the names of the objective's own."""
    chosen: dict[str, Placement] = {}
    for m in greedy.moves:
        p = search.fleet.placement(m.vm)
        if p is not None:
            chosen.setdefault(m.vm, p)
    movable = [p for p in search.fleet.placements() if is_movable(p)]
    helpers: list[Placement] = []
    if objective is Objective.FRAGMENTATION:
        partial = {(h, c.id) for h in sorted(search.on_host) for c in search.fleet.state(h).cells if partly_used(c)}
        picks = sorted((p for p in movable if any((p.host, c) in partial for c in p.host_cells)), key=_size)
    else:
        if objective is Objective.LOCALITY:
            costly = sorted(((locality_cost(search, p), p) for p in movable), key=lambda cp: (-cp[0], cp[1].vm))
            picks = [p for c, p in costly if c > 0][: MODELLED // 2]
        else:
            picks = sorted((p for p in movable if is_crowded(search, p)), key=_size)[: MODELLED // 2]
        own = {p.vm for p in picks}
        for host in dict.fromkeys(p.host for p in picks):
            there = (q for q in search.placements_on(host) if is_movable(q) and q.vm not in own)
            helpers += sorted(there, key=_size)[:HELPERS]
    for p in picks + helpers:
        if len(chosen) >= max(MODELLED, len(greedy.moves)):
            break
        chosen.setdefault(p.vm, p)
    return list(chosen.values()), {p.vm for p in picks}


def is_crowded(search: Search, p: Placement) -> bool:
    """Does ``p`` share a cell with another VM of its tenant on its host?"""
    use = Counter(c for q in search.placements_on(p.host) if q.tenant == p.tenant for c in set(q.host_cells))
    return any(use[c] > 1 for c in p.host_cells)


def _size(p: Placement) -> tuple[int, int, str]:
    return (p.vcpus, p.memory_kib, p.vm)


def candidates_of(
    search: Search, objective: Objective, p: Placement, order: list[Placement], goal: set[str],
    last: Placement | None,
) -> list[Candidate]:
    """Stay, the greedy's answer, re-pins on the VM's host, the best other hosts (see the module doc)."""
    found, add = collector(search, p)
    add(last)
    helpers = [q.vm for q in order if q.host == p.host and q.vm not in goal and q.vm != p.vm
               and q.vm not in search.excluded.vms]  # (an excluded VM makes no room: it stays)
    req = move_request(p, search.iso(p.tenant))
    here = replace(req, host=p.host)
    add(search.refit(p, here))
    add(search.replace_vm(p, here, frozenset(p.host_cells)))
    if objective is Objective.SPREAD_TENANTS:  # onto cells none of its tenant's other VMs there use
        theirs = {c for q in search.placements_on(p.host) if q.tenant == p.tenant and q.vm != p.vm
                  for c in q.host_cells}
        here = replace(here, avoid_cells=here.avoid_cells | {(p.host, c) for c in theirs})
        add(search.refit(p, here))
    if p.vm in goal and helpers and objective is not Objective.FRAGMENTATION:
        add(_refit_without(search, helpers, p, here))
    add_other_hosts(search, p, req, OTHER_HOSTS, add)
    return found


def collector(search: Search, p: Placement) -> tuple[list[Candidate], Callable[[Placement | None], None]]:
    """``p``'s candidate list, staying first, and the function that adds a placement to it (ranks in order;
    None, or the host, cells and devices of one already there, is skipped)."""
    found = [stay(search, p, 0)]
    seen = {(p.host, p.host_cells, p.devices)}

    def add(new: Placement | None) -> None:
        if new is not None and (new.host, new.host_cells, new.devices) not in seen:
            seen.add((new.host, new.host_cells, new.devices))
            found.append(Candidate(p.vm, len(found), new, 1, usage(search, new)))

    return found, add


def add_other_hosts(
    search: Search, p: Placement, req: VmRequest, count: int, add: Callable[[Placement | None], None]
) -> None:
    """The engine's ``count`` best hosts for ``req`` other than ``p``'s (each found with the ones before
    avoided), on a multi-host fleet."""
    avoid = frozenset({p.host})
    for _ in range(count if len(search.on_host) > 1 else 0):
        new = search.refit(p, replace(req, avoid_hosts=req.avoid_hosts | avoid))
        if new is None:
            break
        avoid |= {new.host}
        add(new)


def _refit_without(search: Search, vms: list[str], p: Placement, req: VmRequest) -> Placement | None:
    """:meth:`.Search.refit` of ``p`` on the fleet with ``vms`` removed (put back after)."""
    removed = [search.fleet.remove(vm) for vm in vms]
    try:
        return search.refit(p, req)
    finally:
        for q in removed:
            search.fleet.record(q)
