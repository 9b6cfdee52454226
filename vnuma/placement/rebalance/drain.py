"""The ``drain`` objective: move every VM off one host, each once, where the engine puts it.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.engine import best_reason, place
from vnuma.placement.model import Objective, Placement, Strategy
from vnuma.placement.rebalance.base import Plan, is_movable, make_move, request_of
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.topology import count_of


def plan_drain(search: Search, host: str, max_moves: int | None) -> Plan:
    """Move the host's VMs, largest first, each to where the engine places it with the host avoided.

    A VM that cannot move stays, with the reason, in ``Plan.left``; so do
    the VMs past ``max_moves`` and those not tried before the time limit.
    ``before``/``after``: VMs on the host before and after the plan.
    """
    on_host = sorted(search.placements_on(host), key=_largest_first)
    moves, left = [], []
    others = [name for name in search.fleet.host_names() if name != host]
    try:
        for p in on_host:
            why = _why_not(search, p, host, others, max_moves, len(moves))
            if why is not None:
                left.append((p.vm, why))
                continue
            search.tick()
            req = replace(request_of(p, search.iso(p.tenant)), avoid_hosts=frozenset({host}))
            search.fleet.remove(p.vm)
            try:
                result = place(req, search.fleet, Strategy.PACK, explain=True)
            finally:
                search.fleet.record(p)
            if result.chosen is None:
                left.append((p.vm, f"fits on no other host ({best_reason(result)})"))
                continue
            search.apply(p, result.chosen)
            moves.append(make_move(p, result.chosen, f"drain host {host}"))
    except Deadline:
        done = {m.vm for m in moves} | {vm for vm, _ in left}
        left += [(p.vm, "not tried within the time limit") for p in on_host if p.vm not in done]
    return Plan(Objective.DRAIN, len(on_host), len(left), not left, tuple(moves), tuple(left))


def _largest_first(p: Placement) -> tuple[int, int, int, str]:
    return (-p.vcpus, -p.memory_kib, -len(p.devices), p.vm)


def _why_not(search: Search, p: Placement, host: str, others: list[str], most: int | None, moved: int) -> str | None:
    if not is_movable(p):
        return "it holds devices other than GPUs, which no plan moves"
    if not others:
        return f"the inventory has no host but {host}"
    if most is not None and moved >= most:
        return f"over --max-moves {most} ({count_of(most, 'move')} planned)"
    return None
