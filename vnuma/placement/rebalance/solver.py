"""The ``drain`` objective as an assignment problem for OR-Tools CP-SAT.

Pure: no I/O (the solver runs in this process, bounded by the planner's
time limit). The hand-written drain (:mod:`.drain`) moves the host's VMs one
by one, largest first, each where the engine puts it; a VM it can no longer
fit stays. Here every VM's destination is chosen together, with the model,
capacities and replay of :mod:`.assign`:

* Units: each VM of the host is one, but the VMs of an affine group are one
  unit (:func:`.drain.together`) that moves whole, to one host, and counts
  its VMs against ``max_moves`` (``weights``); the unit's candidates hold
  the placements of all its VMs.
* Candidates: for each unit, staying (rank 0), where the hand-written
  drain puts it, which is also the solver's first answer (a hint), so the
  model always holds an assignment as good as that one; and the engine's
  placement of it with the drained host avoided, then with that host avoided
  too, and so on: the ``CANDIDATE_HOSTS`` hosts it ranks best, each with the
  cells the engine picks there on the fleet as it is (the unit left out; a
  group on the engine's choice for its largest VM, the others there:
  :func:`.drain.fit_together`).
* Objective: the most VMs moved (a staying VM costs more than any move),
  then the least cost: the guest cells a candidate uses beyond the fewest
  the engine gives each VM on an empty host of its shape, and the host's
  rank among the unit's candidates (the engine's own preference; the
  hand-written drain's answer ranks first, so ties go its way). At most
  ``max_moves`` VMs move.

The chosen assignment is replayed: the groups first, each VM of a group
taken off the host, then placed confined to its chosen host and cells
(:func:`.drain.try_unit`), then the single VMs largest first
(:func:`.assign.replay`); a unit the replay cannot place adds a cut
forbidding that set of choices on its host, and the model is solved again,
at most ``ROUNDS`` times; then the units not placed stay. The plan reports
the solver's status: proven optimal (for the model), or the gap between
the moves found and the best bound. Should the replayed plan still move
fewer VMs than the hand-written drain, that one is returned
(``Plan.solver`` says ``search``): a solver plan is never the worse one.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.assign import Candidate, Choice, Key, cut_for, replay, room_for, solve, undo, usage
from vnuma.placement.rebalance.base import Move, Plan, make_move
from vnuma.placement.rebalance.drain import fit_together, largest_first, plan_drain, together, try_unit, why_not
from vnuma.placement.rebalance.search import Deadline, Search

CANDIDATE_HOSTS = 6
ROUNDS = 4
MOVE_WEIGHT = 1_000_000
"""The cost of a VM that stays: more than any move's cost."""


def plan_drain_cpsat(search: Search, host: str, max_moves: int | None, time_limit_s: float) -> Plan:
    """The drain of ``host`` chosen by CP-SAT (see the module doc); ``Plan.gap`` is 0.0 when proven."""
    on_host = sorted(search.placements_on(host), key=largest_first)
    others = [name for name in search.fleet.host_names() if name != host]
    left: list[tuple[str, str]] = []
    units: dict[str, list[Placement]] = {}
    seen: set[str] = set()
    for p in on_host:
        if p.vm in seen:
            continue
        unit = together(p, on_host, search.fleet.groups)
        seen.update(m.vm for m in unit)
        why = next((w for m in unit if (w := why_not(m, host, others, search.fleet.groups))), None)
        if why is not None:
            left += [(m.vm, why) for m in unit]
        else:
            units[p.vm] = unit
    original = {m.vm: m for unit in units.values() for m in unit}
    greedy = plan_drain(search, host, max_moves)
    undo(search, list(greedy.moves), original)  # back to the state it started from
    hint_at = {m.vm: m.placement for m in greedy.moves}
    unplaced: dict[str, str] = {}
    try:
        candidates = {vm: _candidates(search, unit, host, hint_at, unplaced) for vm, unit in units.items()}
    except Deadline:
        return _no_better(greedy, on_host, left, [(vm, "not tried within the time limit") for vm in original])
    room = room_for(search, original, {k for cs in candidates.values() for c in cs for k in c.use})
    weights = {vm: len(unit) for vm, unit in units.items()}
    hint = {vm: 1 for vm, unit in units.items() if unit[0].vm in hint_at}
    cuts: list[list[Choice]] = []
    timed_out = False
    chosen: dict[str, int] = {}
    gap: float | None = None
    moves: list[Move] = []
    for round_ in range(ROUNDS):
        solved = solve(candidates, room, max_moves=max_moves, cuts=cuts, time_limit_s=search.remaining(time_limit_s),
                       hint=hint, weights=weights)
        if solved is None:  # no assignment within the time limit: nothing moves (unless the search's does)
            chosen, gap, moves, timed_out = {}, None, [], True
            break
        chosen, gap = {vm: rank for vm, rank in solved.chosen.items() if rank}, solved.gap
        moves, failed = _replay(search, host, units, candidates, chosen)
        if not failed or round_ == ROUNDS - 1:
            break
        cuts += [cut_for(original[vm], chosen, candidates) for vm in failed]
        undo(search, moves, original)  # before solving again
    moved = {m.vm for m in moves}
    if any(vm not in moved for vm in chosen):
        gap = None  # the solver's gap is of its answer, which the replay did not carry out whole
    if len(moved) < len(greedy.moves):
        undo(search, moves, original)
        return _no_better(greedy, on_host, left, [])
    moving = sum(weights[vm] for vm in chosen)
    for vm, unit in units.items():
        if vm not in moved:
            why = ("CP-SAT found no plan within the time limit" if timed_out and len(candidates[vm]) > 1
                   else _why_left(vm, candidates[vm], chosen, moving, max_moves, unplaced.get(vm)))
            left += [(m.vm, why) for m in unit]
    return Plan(Objective.DRAIN, len(on_host), len(left), not left or gap == 0.0, tuple(moves), tuple(left), "cp-sat",
                gap)


def _no_better(greedy: Plan, on_host: list[Placement], left: list[tuple[str, str]],
               more: list[tuple[str, str]]) -> Plan:
    """The hand-written drain's plan (``solver`` ``search``), or, when it moves nothing, every VM left."""
    if greedy.moves or not more:
        return replace(greedy, before=len(on_host), solver="search")
    stays = (*left, *more)
    return Plan(Objective.DRAIN, len(on_host), len(stays), False, (), tuple(stays), "cp-sat", None)


def _candidates(
    search: Search, unit: list[Placement], host: str, hint_at: dict[str, Placement], unplaced: dict[str, str]
) -> list[Candidate]:
    """Rank 0 stays, rank 1 is the hand-written drain's answer when it moved the unit, then the engine's best
    other hosts (a group: :func:`.drain.fit_together`). Why the unit fits nowhere goes to ``unplaced``."""
    leader = unit[0]
    found = [Candidate(leader.vm, 0, leader, MOVE_WEIGHT * len(unit), _use(search, unit), tuple(unit[1:]))]

    def add(news: list[Placement], rank: int) -> None:
        found.append(Candidate(leader.vm, len(found), news[0], _cost(search, unit, news) + rank,
                               _use(search, news), tuple(news[1:])))

    hinted = [hint_at[m.vm] for m in unit if m.vm in hint_at]
    if len(hinted) == len(unit):
        add(hinted, 0)
    tried = frozenset({host})
    for rank in range(CANDIDATE_HOSTS):
        search.tick()
        placed, _why, tried = fit_together(search, unit, tried, explain=False)
        if not placed:
            if rank == 0:  # fits nowhere: the engine's reason, from its explaining path
                unplaced[leader.vm] = fit_together(search, unit, frozenset({host}))[1]
            break
        news = [new for _old, new in placed]
        if hinted and [(p.host, p.host_cells) for p in news] == [(p.host, p.host_cells) for p in hinted]:
            continue
        add(news, rank + 1)  # the hand-written drain's answer (0) wins a tie
    return found


def _use(search: Search, placements: list[Placement]) -> dict[Key, int]:
    total: dict[Key, int] = {}
    for p in placements:
        for key, n in usage(search, p).items():
            total[key] = total.get(key, 0) + n
    return total


def _cost(search: Search, unit: list[Placement], news: list[Placement]) -> int:
    """10 per guest cell beyond the fewest the engine gives each VM on an empty host of its shape."""
    return sum(10 * max(0, len(new.cells) - search.fewest_cells(old)) for old, new in zip(unit, news, strict=True))


def _replay(
    search: Search, host: str, units: dict[str, list[Placement]], candidates: dict[str, list[Candidate]],
    chosen: dict[str, int],
) -> tuple[list[Move], list[str]]:
    """Carry the assignment out: the groups first (each VM confined to its chosen host and cells), then the
    single VMs (:func:`.assign.replay`). The moves made, and the units (by first VM) not placed."""
    moves: list[Move] = []
    failed: list[str] = []
    reason = f"drain host {host}"
    for vm, rank in chosen.items():
        unit = units[vm]
        if len(unit) == 1:
            continue
        c = candidates[vm][rank]
        target = dict(zip((m.vm for m in unit), (c.placement, *c.others), strict=True))
        placed, _why = try_unit(search, unit, lambda m, _first, at=target: _confined(search, m, at[m.vm]))
        if len(placed) < len(unit):
            failed.append(vm)
            continue
        for old, new in placed:
            search.apply(old, new)
            moves.append(make_move(old, new, reason))
    singles = sorted((units[vm][0] for vm in chosen if len(units[vm]) == 1), key=largest_first)
    targets = {p.vm: candidates[p.vm][chosen[p.vm]].placement for p in singles}
    placed_singles, still = replay(search, singles, targets, lambda _p, _n: reason,
                                   lambda p: move_request(p, search.iso(str(p.tenant))))
    return moves + placed_singles, failed + [p.vm for p in still]


def _confined(search: Search, m: Placement, target: Placement) -> VmRequest:
    """``m``'s request held to ``target``'s host and cells."""
    cells = {c.id for c in search.fleet.state(target.host).cells} - set(target.host_cells)
    req = move_request(m, search.iso(str(m.tenant)))
    return replace(req, host=target.host, avoid_cells=req.avoid_cells | {(target.host, c) for c in cells})


def _why_left(vm: str, found: list[Candidate], chosen: dict[str, int], moving: int, max_moves: int | None,
              unplaced: str | None) -> str:
    if len(found) == 1:
        return unplaced or "fits on no other host"
    if vm in chosen:
        return "the engine could not place it where the solver put it (threads or core isolation there)"
    if max_moves is not None and moving + len(found[0].others) >= max_moves:
        return f"over --max-moves {max_moves}"
    return "no room left for it once the other VMs move (the solver keeps it here)"
