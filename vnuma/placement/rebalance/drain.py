"""The ``drain`` objective: move every VM off one host, each once, where the engine puts it.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.engine import best_reason, place
from vnuma.placement.groups import GroupIndex, affinity_words, group_hosts
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
    on_host = sorted(search.placements_on(host), key=largest_first)
    moves, left = [], []
    others = [name for name in search.fleet.host_names() if name != host]
    try:
        for p in on_host:
            why = why_not(p, host, others, search.fleet.groups)
            if why is None and max_moves is not None and len(moves) >= max_moves:
                why = f"over --max-moves {max_moves} ({count_of(max_moves, 'move')} planned)"
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


def largest_first(p: Placement) -> tuple[int, int, int, str]:
    """The order a drain moves VMs in: most vCPUs, then memory, then devices, then name."""
    return (-p.vcpus, -p.memory_kib, -len(p.devices), p.vm)


def why_not(p: Placement, host: str, others: list[str], groups: GroupIndex) -> str | None:
    """Why a VM of the drained host cannot move at all (None: it may).

    A drain does not move an affine group: each of its VMs alone would leave the others on the host
    (admission refuses that move), and moving the group whole is not planned. A group's only VM moves.
    """
    if not is_movable(p):
        return "it holds devices no plan moves (not GPUs, or NICs placed before vnuma recorded how they were asked)"
    if not others:
        return f"the inventory has no host but {host}"
    bound = group_hosts(groups, p.vm, p.group, p.affinity)
    if host in bound and p.group is not None:
        return (
            f"{affinity_words(p.group, bound)}: a drain does not move an affine group "
            "(release its VMs and place them again to move it)"
        )
    return None
