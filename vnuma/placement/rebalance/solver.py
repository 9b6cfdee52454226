"""The ``drain`` objective as an assignment problem for OR-Tools CP-SAT.

Pure: no I/O (the solver runs in this process, bounded by the planner's
time limit). The hand-written drain (:mod:`.drain`) moves the host's VMs one
by one, largest first, each where the engine puts it; a VM it can no longer
fit stays. Here every VM's destination is chosen together, with the model,
capacities and replay of :mod:`.assign`:

* Affine groups first: each group's VMs move together as the hand-written
  drain moves them (:func:`.drain.move_together`), counted in ``max_moves``;
  the model is about the single VMs left.
* Candidates: for each movable VM, staying (rank 0), where the hand-written
  drain puts it, which is also the solver's first answer (a hint), so the
  model always holds an assignment as good as that one; and the engine's
  placement of it with the drained host avoided, then with that host avoided
  too, and so on: the ``CANDIDATE_HOSTS`` hosts it ranks best, each with the
  cells the engine picks there on the fleet as it is (the VM left out).
* Objective: the most VMs moved (staying costs more than any move), then
  the least cost: the guest cells a candidate uses beyond the fewest the
  engine gives the VM on an empty host of its shape, and the host's rank
  among the VM's candidates (the engine's own preference). At most
  ``max_moves`` move.

The chosen assignment is replayed largest VM first (:func:`.assign.replay`);
a VM the replay cannot place adds a cut forbidding that set of choices on
its host, and the model is solved again, at most ``ROUNDS`` times; then the
VMs not placed stay. The plan reports the solver's status: proven optimal
(for the model), or the gap between the moves found and the best bound.
Should the replayed plan still move fewer VMs than the hand-written drain,
that one is returned (``Plan.solver`` says ``search``): a solver plan is
never the worse one.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.engine import place
from vnuma.placement.model import Objective, Placement, Strategy
from vnuma.placement.rebalance.assign import Candidate, Choice, cut_for, replay, room_for, solve, stay, undo, usage
from vnuma.placement.rebalance.base import Move, Plan, make_move, request_of
from vnuma.placement.rebalance.drain import largest_first, move_together, plan_drain, together, why_not
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.topology import count_of

CANDIDATE_HOSTS = 6
ROUNDS = 4
MOVE_WEIGHT = 1_000_000
"""The cost of a VM that stays: more than any move's cost."""


def plan_drain_cpsat(search: Search, host: str, max_moves: int | None, time_limit_s: float) -> Plan:
    """The drain of ``host`` chosen by CP-SAT (see the module doc); ``Plan.gap`` is 0.0 when proven. Affine
    groups move first, as the hand-written drain moves them (:func:`.drain.move_together`); the solver
    chooses for the single VMs, within the moves left."""
    on_host = sorted(search.placements_on(host), key=largest_first)
    others = [name for name in search.fleet.host_names() if name != host]
    left: list[tuple[str, str]] = []
    movable: list[Placement] = []
    grouped: list[Move] = []
    seen: set[str] = set()
    for p in on_host:
        if p.vm in seen:
            continue
        unit = together(p, on_host, search.fleet.groups)
        seen.update(m.vm for m in unit)
        why = next((w for m in unit if (w := why_not(m, host, others, search.fleet.groups))), None)
        if why is None and len(unit) > 1:
            if max_moves is not None and len(grouped) + len(unit) > max_moves:
                why = f"over --max-moves {max_moves} ({count_of(len(grouped), 'move')} planned)"
            else:
                placed, why = move_together(search, unit, host)  # applied to the search's fleet
                grouped += [make_move(old, new, f"drain host {host}") for old, new in placed]
                if placed:
                    continue
        if why is not None:
            left += [(m.vm, why) for m in unit]
        else:
            movable.append(p)
    budget = None if max_moves is None else max_moves - len(grouped)
    original = {p.vm: p for p in movable}
    greedy = plan_drain(search, host, budget)
    undo(search, list(greedy.moves), original)  # back to the state it started from (the groups moved)
    hint = {m.vm: m.placement for m in greedy.moves}
    try:
        candidates = {p.vm: _candidates(search, p, host, hint.get(p.vm)) for p in movable}
    except Deadline:
        return Plan(Objective.DRAIN, len(on_host), len(on_host) - len(grouped), False, tuple(grouped),
                    tuple(left + [(p.vm, "not tried within the time limit") for p in movable]), "cp-sat", None)
    room = room_for(search, original, {k for cs in candidates.values() for c in cs for k in c.use})
    cuts: list[list[Choice]] = []
    timed_out = False
    chosen: dict[str, int] = {}
    gap: float | None = None
    moves: list[Move] = []
    for round_ in range(ROUNDS):
        solved = solve(candidates, room, max_moves=budget, cuts=cuts, time_limit_s=_remaining(search, time_limit_s),
                       hint={vm: 1 for vm in hint})
        if solved is None:  # no assignment within the time limit: nothing moves (unless the search's does)
            chosen, gap, moves, timed_out = {}, None, [], True
            break
        chosen, gap = {vm: rank for vm, rank in solved.chosen.items() if rank}, solved.gap
        targets = {vm: candidates[vm][rank].placement for vm, rank in chosen.items()}
        moves, failed = replay(search, movable, targets, lambda _p, _n: f"drain host {host}",
                               lambda p: request_of(p, search.iso(str(p.tenant))))
        if not failed or round_ == ROUNDS - 1:
            break
        cuts += [cut_for(p, chosen, candidates) for p in failed]
        undo(search, moves, original)  # before solving again
    moved = {m.vm for m in moves}
    if len(moved) < len(greedy.moves):
        undo(search, moves, original)
        stays = (*left, *greedy.left)
        return replace(greedy, before=len(on_host), after=len(stays), optimal=not stays,
                       moves=(*grouped, *greedy.moves), left=stays, solver="search")
    left += [
        (p.vm, "CP-SAT found no plan within the time limit" if timed_out and len(candidates[p.vm]) > 1
         else _why_left(p.vm, candidates[p.vm], chosen, budget))
        for p in movable if p.vm not in moved
    ]
    return Plan(Objective.DRAIN, len(on_host), len(left), not left, (*grouped, *moves), tuple(left), "cp-sat", gap)


def _remaining(search: Search, time_limit_s: float) -> float:
    return search.deadline - search.clock() if search.clock is not None else time_limit_s


def _candidates(search: Search, p: Placement, host: str, hint: Placement | None) -> list[Candidate]:
    """Rank 0 stays, rank 1 is the hand-written drain's answer when it moved the VM, then the engine's best
    other hosts."""
    base = request_of(p, search.iso(str(p.tenant)))
    fewest = search.fewest_cells(p)
    avoid = frozenset({host})
    found = [stay(search, p, MOVE_WEIGHT)]
    if hint is not None:
        found.append(Candidate(p.vm, 1, hint, 10 * max(0, len(hint.cells) - fewest), usage(search, hint)))
    search.fleet.remove(p.vm)
    try:
        for rank in range(CANDIDATE_HOSTS):
            search.tick()
            chosen = place(replace(base, avoid_hosts=avoid), search.fleet, Strategy.PACK, explain=False).chosen
            if chosen is None:
                break
            avoid = avoid | {chosen.host}
            if hint is not None and (chosen.host, chosen.host_cells) == (hint.host, hint.host_cells):
                continue
            cost = 10 * max(0, len(chosen.cells) - fewest) + rank
            found.append(Candidate(p.vm, len(found), chosen, cost, usage(search, chosen)))
    finally:
        search.fleet.record(p)
    return found


def _why_left(vm: str, found: list[Candidate], chosen: dict[str, int], max_moves: int | None) -> str:
    if len(found) == 1:
        return "fits on no other host"
    if vm in chosen:
        return "the engine could not place it where the solver put it (threads or core isolation there)"
    if max_moves is not None and len(chosen) >= max_moves:
        return f"over --max-moves {max_moves}"
    return "no room left for it once the other VMs move (the solver keeps it here)"
