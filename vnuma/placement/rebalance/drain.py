"""The ``drain`` objective: move every VM off one host, each once, where the engine puts it.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from vnuma.placement.engine import best_reason, place
from vnuma.placement.groups import GroupIndex, affinity_words, group_hosts
from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance.base import Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.topology import count_of


def plan_drain(search: Search, host: str, max_moves: int | None) -> Plan:
    """Move the host's VMs, largest first, each to where the engine places it with the host avoided; the VMs
    of an affine group move together, to one other host (:func:`move_together`).

    A VM that cannot move stays, with the reason, in ``Plan.left`` (an affine
    group's VMs all stay when they cannot all go); so do the VMs past
    ``max_moves`` and those not tried before the time limit.
    ``before``/``after``: VMs on the host before and after the plan.
    """
    on_host = sorted(search.placements_on(host), key=largest_first)
    moves: list[Move] = []
    left: list[tuple[str, str]] = []
    others = [name for name in search.fleet.host_names() if name != host]
    seen: set[str] = set()
    try:
        for p in on_host:
            if p.vm in seen:
                continue
            unit = together(p, on_host, search.fleet.groups)
            seen.update(m.vm for m in unit)
            why = next((w for m in unit if (w := why_not(m, host, others, search.fleet.groups))), None)
            if why is None and max_moves is not None and len(moves) + len(unit) > max_moves:
                why = f"over --max-moves {max_moves} ({count_of(len(moves), 'move')} planned)"
            if why is not None:
                left += [(m.vm, why) for m in unit]
                continue
            search.tick()
            placed, why = move_together(search, unit, host)
            if not placed:
                left += [(m.vm, why) for m in unit]
                continue
            moves += [make_move(old, new, f"drain host {host}") for old, new in placed]
    except Deadline:
        done = {m.vm for m in moves} | {vm for vm, _ in left}
        left += [(p.vm, "not tried within the time limit") for p in on_host if p.vm not in done]
    return Plan(Objective.DRAIN, len(on_host), len(left), not left, tuple(moves), tuple(left))


GROUP_HOSTS = 3
"""Hosts an affine group is tried on, each the engine's choice for its largest VM with the ones before avoided."""


def together(p: Placement, on_host: list[Placement], groups: GroupIndex) -> list[Placement]:
    """``p`` and the VMs that must move with it: the other VMs of its affine group on the host (largest first)."""
    if p.group is None or not (p.affinity is not None or groups.is_affine(p.group)):
        return [p]
    return [q for q in on_host if q.group == p.group]


def move_together(search: Search, unit: list[Placement], host: str) -> tuple[list[tuple[Placement, Placement]], str]:
    """Where the engine puts ``unit`` (one VM, or an affine group's VMs, largest first) with ``host`` avoided
    (:func:`fit_together`), applied to the search's fleet when found; else ``([], why)`` and the fleet as it was."""
    placed, why, _tried = fit_together(search, unit, frozenset({host}))
    for old, new in placed:
        search.apply(old, new)
    return placed, why


def fit_together(
    search: Search, unit: list[Placement], avoid: frozenset[str], explain: bool = True
) -> tuple[list[tuple[Placement, Placement]], str, frozenset[str]]:
    """Where the engine puts ``unit`` off the ``avoid`` hosts, all on one host: the VMs leave together, the
    first goes where the engine puts it and the others there. A group that does not fit whole on that host is
    tried on the engine's next choice, up to :data:`GROUP_HOSTS` hosts. The fleet is left as it was. Returns
    the (old, new) pairs (empty with the reason when none fits; ``explain`` False: the engine's fast path,
    and no reason) and the hosts avoided or tried."""
    tried = avoid
    why = ""
    for _ in range(GROUP_HOSTS if len(unit) > 1 else 1):
        placed, why = try_unit(search, unit, lambda m, target, off=tried: replace(
            move_request(m, search.iso(m.tenant)), avoid_hosts=off, host=target), explain=explain)
        target = placed[0][1].host if placed else None
        if len(placed) == len(unit):
            return placed, "", tried | {placed[0][1].host}
        if target is None:  # its largest VM fits on no other host: no other choice would take the group
            break
        tried |= {target}
    if len(unit) == 1:
        return [], f"fits on no other host ({why})", tried
    return [], (f"group {unit[0].group!r} (affinity host): its {len(unit)} VMs fit together on no other host "
                f"({why})"), tried


def try_unit(
    search: Search, unit: list[Placement], ask: Callable[[Placement, str | None], VmRequest], explain: bool = False
) -> tuple[list[tuple[Placement, Placement]], str]:
    """Place ``unit``'s VMs one after the other with all of them gone from their host first, each by
    ``ask(vm, host the first went to)``; the fleet is left as it was. Returns the (old, new) pairs placed
    before the first that did not fit (all of them when every one did) and that one's reason."""
    for m in unit:
        search.fleet.remove(m.vm)
    placed: list[tuple[Placement, Placement]] = []
    why = ""
    try:
        for m in unit:
            result = place(ask(m, placed[0][1].host if placed else None), search.fleet, Strategy.PACK,
                           explain=explain)
            if result.chosen is None:
                why = best_reason(result) if explain else "no room"
                break
            search.fleet.record(result.chosen)
            placed.append((m, result.chosen))
    finally:
        for _old, new in placed:
            search.fleet.remove(new.vm)
        for m in unit:
            search.fleet.record(m)
    return placed, why


def largest_first(p: Placement) -> tuple[int, int, int, str]:
    """The order a drain moves VMs in: most vCPUs, then memory, then devices, then name."""
    return (-p.vcpus, -p.memory_kib, -len(p.devices), p.vm)


def why_not(p: Placement, host: str, others: list[str], groups: GroupIndex) -> str | None:
    """Why a VM of the drained host cannot move at all (None: it may). An affine group moves whole
    (:func:`move_together`), so only one that also has VMs on other hosts keeps its VMs here; a group's only
    VM moves."""
    if not is_movable(p):
        return "it holds devices no plan moves (not GPUs, or NICs placed before vnuma recorded how they were asked)"
    if not others:
        return f"the inventory has no host but {host}"
    bound = group_hosts(groups, p.vm, p.group, p.affinity)
    if host in bound and p.group is not None and bound != (host,):
        return f"{affinity_words(p.group, bound)}: a drain moves an affine group only when it is all on {host!r}"
    return None
