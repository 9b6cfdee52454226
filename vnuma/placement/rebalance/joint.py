"""``locality``, ``fragmentation``, ``spread-tenants`` as one joint assignment for CP-SAT (``--solver cp-sat``).

Pure: no I/O (the solver runs in this process, bounded by the planner's
time limit). The greedy (:mod:`.locality`, :mod:`.fragmentation`,
:mod:`.spread`) makes one best move at a time; here the moves are chosen together with the model,
capacities and replay of :mod:`.assign`, so a VM may leave cells another
VM needs (neither move gains alone; together they do).

1. The greedy runs first, with at most half the time limit; its plan is the
   solver's first answer (a hint) and the yardstick.
2. Modelled VMs: the greedy's moved VMs, then the objective's own: for
   ``fragmentation`` the movable VMs on partly used cells (smallest first);
   for ``locality`` those with a positive cost (highest first), for
   ``spread-tenants`` those sharing a cell with another VM of their tenant
   (smallest first), at most ``MODELLED``/2 (:mod:`.picks`) of them, and on their hosts
   ``HELPERS`` other movable VMs each (smallest first: the ones that may
   make room). At most ``MODELLED`` VMs (more only if the greedy moved more).
3. Candidates per modelled VM: staying; where the greedy left it; re-pins
   on its host (the engine on its own host, and with its own cells blocked;
   for ``spread-tenants`` also with its tenant's other VMs' cells there
   blocked); for one of the objective's own VMs (``locality``,
   ``spread-tenants``) that last re-pin again with its host's helpers
   removed (room they may make); and, on a multi-host fleet, the engine's
   ``OTHER_HOSTS`` best other hosts (each found with the ones before
   avoided). GPUs on the VM's cells first, anywhere on the host if that
   finds nothing, as the greedy tries them.
4. Objective, minimised: the goal in units of ``scale`` plus a price per
   move (:data:`.assign.MOVE_UNIT`, plus up to as much again in proportion to the memory
   it migrates), ``scale`` being more than all prices together: the goal
   always wins, ties take fewer moves, then less memory to migrate.
   ``locality``: each candidate costs :func:`.locality.locality_cost` of its
   placement (the objective's own function). ``fragmentation`` and
   ``spread-tenants`` are not sums over VMs: :mod:`.terms` writes them over
   the variables (partly used cells; crowded VMs less the unavoidable).
5. The assignment is replayed (:func:`.assign.replay`: the greedy's moves
   in its order first, then the other VMs in model order; a move whose room
   a later departure frees is retried in the next pass); failures add cuts
   and the model is solved again, at most ``ROUNDS`` times. Each round's
   replay is valued by the objective's own function on the hosts it
   touched; the best round is kept.

The plan is the solver's unless the greedy's is better (a lower value, or
the same value with fewer moves): then the greedy's, with ``solver``
``search``. No assignment at all within the time limit (the time ran out
while building the candidates, or CP-SAT found none): NoRoomError (exit 5),
nothing planned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from vnuma.errors import NoRoomError
from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.assign import (
    MOVE_UNIT,
    Candidate,
    Choice,
    Extra,
    cut_for,
    move_price,
    rank_of,
    replay,
    room_for,
    solve,
    undo,
)
from vnuma.placement.rebalance.base import Move, Plan
from vnuma.placement.rebalance.fragmentation import host_value, plan_fragmentation
from vnuma.placement.rebalance.locality import locality_cost, plan_locality
from vnuma.placement.rebalance.picks import candidates_of, modelled
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.placement.rebalance.spread import crowding, plan_spread
from vnuma.placement.rebalance.terms import crowding_terms, partly_used_terms

ROUNDS = 4


@dataclass(frozen=True, slots=True)
class _Round:
    after: int
    moves: tuple[Move, ...]
    gap: float | None
    complete: bool


def host_locality(search: Search, host: str) -> int:
    """The ``locality`` objective on one host: its VMs' :func:`.locality.locality_cost`."""
    return sum(locality_cost(search, p) for p in search.placements_on(host))


def host_crowding(search: Search, host: str) -> int:
    """The ``spread-tenants`` objective on one host: :func:`.spread.crowding` per tenant."""
    by_tenant: dict[str | None, list[Placement]] = {}
    for p in search.placements_on(host):
        by_tenant.setdefault(p.tenant, []).append(p)
    return sum(crowding(vms, search.cpu_cells(host)) for vms in by_tenant.values())


@dataclass(frozen=True, slots=True)
class _Goal:
    """An objective as the joint plan uses it: its greedy, its value on one host, its model terms (None:
    a per-candidate cost, ``locality``) and the words of a move's reason."""

    greedy: Callable[[Search, int], Plan]
    value: Callable[[Search, str], int]
    terms: Callable[[Search, int], Extra] | None
    words: str


GOALS = {
    Objective.LOCALITY: _Goal(plan_locality, host_locality, None, "locality"),
    Objective.FRAGMENTATION: _Goal(plan_fragmentation, host_value, partly_used_terms, "fewer partly used cells"),
    Objective.SPREAD_TENANTS: _Goal(plan_spread, host_crowding, crowding_terms, "fewer crowded tenant VMs"),
}
"""The objectives the joint plan takes."""


def plan_joint(search: Search, objective: Objective, max_moves: int, time_limit_s: float) -> Plan:
    """``objective`` (one of :data:`GOALS`) planned by CP-SAT (see the module doc).

    Raises:
        NoRoomError: no assignment within the time limit (nothing is planned).
    """
    goal = GOALS[objective]
    original = {p.vm: p for p in search.fleet.placements()}
    greedy = search.first_half(time_limit_s, lambda: goal.greedy(search, max_moves))
    last = _undo_greedy(search, greedy, original)
    before = greedy.before
    try:
        order, goal_vms = modelled(search, objective, greedy)
        candidates = {p.vm: candidates_of(search, objective, p, order, goal_vms, last.get(p.vm)) for p in order}
    except Deadline:
        raise _no_plan(time_limit_s) from None
    scale = (len(order) + 1) * 2 * MOVE_UNIT  # more than all the moves' prices together
    biggest = max((p.memory_kib + p.cold_kib for p in order), default=0) or 1
    candidates = {vm: [replace(c, cost=_price(search, objective, scale, biggest, original[vm], c)) for c in cs]
                  for vm, cs in candidates.items()}
    room = room_for(search, candidates, {k for cs in candidates.values() for c in cs for k in c.use})
    extra = goal.terms(search, scale) if goal.terms is not None else None
    hint = {vm: rank_of(cs, last[vm]) for vm, cs in candidates.items() if vm in last}
    best: _Round | None = None
    cuts: list[list[Choice]] = []
    for _ in range(ROUNDS):
        solved = solve(candidates, room, max_moves=max_moves, cuts=cuts, time_limit_s=search.remaining(time_limit_s),
                       hint=hint,
                       extra=extra)
        if solved is None:
            break
        targets = {vm: candidates[vm][r].placement for vm, r in solved.chosen.items() if r}
        moves, failed = replay(search, order, targets, _reason(search, objective, goal.words),
                               lambda p: move_request(p, search.iso(p.tenant)))
        touched = {h for m in moves for h in (m.from_host, m.to_host)}
        after = before + sum(goal.value(search, h) for h in touched)
        undo(search, moves, original)
        after -= sum(goal.value(search, h) for h in touched)
        found = _Round(after, tuple(moves), solved.gap, not failed)
        if best is None or (found.after, len(found.moves)) < (best.after, len(best.moves)):
            best = found
        if not failed:
            break
        cuts += [cut_for(p, solved.chosen, candidates) for p in failed]
    if best is None:
        raise _no_plan(time_limit_s)
    if (greedy.after, len(greedy.moves)) < (best.after, len(best.moves)):
        return replace(greedy, solver="search")
    gap = best.gap if best.complete else None  # the solver's gap is of its answer, which the replay cut short
    return Plan(objective, before, best.after, best.after == 0 or gap == 0.0, best.moves, (), "cp-sat", gap)


def _price(search: Search, objective: Objective, scale: int, biggest: int, old: Placement, c: Candidate) -> int:
    """A candidate's cost: its locality in units of ``scale`` (``locality``), plus its move's price."""
    goal = scale * locality_cost(search, c.placement) if objective is Objective.LOCALITY else 0
    return goal + (move_price(biggest, old, c.placement) if c.moves else 0)


def _no_plan(time_limit_s: float) -> NoRoomError:
    return NoRoomError(
        f"CP-SAT found no plan within the time limit ({time_limit_s:g} s); nothing was moved",
        hint="allow more time (`vnuma rebalance --time-limit S`) or plan with the search "
        "(`vnuma rebalance --solver search`)",
    )


def _undo_greedy(search: Search, greedy: Plan, original: dict[str, Placement]) -> dict[str, Placement]:
    """Take the greedy's moves back (a VM it moved twice too); where it left each VM it moved."""
    last = {m.vm: m.placement for m in greedy.moves}
    previous: list[Placement] = []
    seen = dict(original)
    for m in greedy.moves:
        previous.append(seen[m.vm])
        seen[m.vm] = m.placement
    for m, old in zip(reversed(greedy.moves), reversed(previous), strict=True):
        search.apply(m.placement, old)
    return last


def _reason(search: Search, objective: Objective, words: str) -> Callable[[Placement, Placement], str]:
    def reason(old: Placement, new: Placement) -> str:
        to = f"cells {list(new.host_cells)}" if new.host == old.host else f"{new.host} cells {list(new.host_cells)}"
        where = f"cells {list(old.host_cells)} -> {to}"
        if objective is Objective.LOCALITY:
            return f"locality cost {locality_cost(search, old)} -> {locality_cost(search, new)} ({where}; CP-SAT plan)"
        return f"CP-SAT plan for {words} ({where})"

    return reason
