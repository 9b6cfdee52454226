"""The ``room`` objective as one assignment problem for OR-Tools CP-SAT (``--solver cp-sat``).

Pure: no I/O (the solver runs in this process, bounded by the planner's
time limit). The search (:mod:`.room`) deepens move by move, one target
host at a time, and only ever moves the target host's VMs to where the
engine puts them one by one; here the shape's place and the moves that free
it are chosen together, with the model, capacities and replay of
:mod:`.assign`:

1. The search runs first, with at most half the time limit; its plan is
   the solver's first answer (a hint) and the yardstick. A shape that fits
   now needs no plan.
2. Target hosts: those whose capacity bound (:func:`.room.fewest_departures`) lets
   the shape in after at most ``max_moves`` departures, fewest departures
   first, then name; at most ``TARGETS``, the search's own target first.
3. The shape is one more item of the model (key :data:`SHAPE`, no VM is
   named ""): it takes exactly one of its candidates and is never a move.
   Its candidates, per target host: the engine's placement of the shape
   with every movable VM of the host removed, and again with each cell of
   the host avoided in turn (other cell sets); and where the search's plan
   lets it in.
4. Modelled VMs: the movable VMs of the target hosts, host by host in that
   order, smallest first within a host, at most ``MODELLED``. Candidates
   per VM: staying; where the search's plan moves it; a re-pin on its host
   off each cell set the shape may take there; the engine's
   ``OTHER_HOSTS`` best other hosts. GPUs on the VM's cells first, anywhere
   on the host if that finds nothing (as the search's re-fits).
5. Objective: the moves' prices (:func:`.assign.move_price`: one unit each,
   plus up to one more for the memory it migrates), so the fewest moves
   win, then the least memory to migrate; at most ``max_moves`` moves.
6. Replay: the moves (:func:`.assign.replay`), then the shape confined to
   its chosen host and cells. A move that fails gives its cut
   (:func:`.assign.cut_for`); a shape that does not fit forbids that
   combination (its cell set with the chosen fates of that host's VMs);
   the model is solved again, at most ``ROUNDS`` times.

Plan: ``before`` 1, ``after`` 0 when the replayed moves let the shape in
(0 and 0 with no moves when it fits now). ``optimal``: CP-SAT proved its
answer optimal for the model (or that the model has none) and the replay
carried it out. The search's plan comes back instead (``solver``
``search``) when it makes room and the solver's does not, or with fewer
moves. No answer from CP-SAT within the time limit: the search's plan
(room made or not), as the drain does; :class:`~vnuma.errors.NoRoomError`
is only for objectives whose search has nothing to hand back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance.assign import (
    Candidate,
    Choice,
    Room,
    confined,
    cut_for,
    move_price,
    rank_of,
    replay,
    room_for,
    solve,
    undo,
    usage,
)
from vnuma.placement.rebalance.base import Move, Plan, is_movable
from vnuma.placement.rebalance.picks import add_other_hosts, collector
from vnuma.placement.rebalance.room import fewest_departures, plan_room, room_reason
from vnuma.placement.rebalance.search import Deadline, Search

SHAPE = ""
"""The shape's key among the modelled items (a VM name is never empty)."""
TARGETS = 8
MODELLED = 64
OTHER_HOSTS = 2
ROUNDS = 4


@dataclass(frozen=True, slots=True)
class _Round:
    moves: tuple[Move, ...]
    made: bool
    gap: float | None


def plan_room_cpsat(search: Search, want: VmRequest, max_moves: int, time_limit_s: float) -> Plan:
    """Room for ``want`` planned by CP-SAT (see the module doc)."""
    greedy = search.first_half(time_limit_s, lambda: plan_room(search, want, max_moves))
    if greedy.before == 0:
        return replace(greedy, solver="cp-sat", gap=0.0)
    hint = {m.vm: m.placement for m in greedy.moves}
    try:
        shape_hint = _shape_after(search, want, greedy.moves)
        targets = _targets(search, want, max_moves, greedy.moves)
        if not targets:  # the bound rules out every host: no plan within max_moves exists
            return Plan(Objective.ROOM, 1, 1, True, (), (), "cp-sat", 0.0)
        order = _modelled(search, targets)
        shapes = _shape_candidates(search, want, targets, shape_hint)
        candidates = {p.vm: _vm_candidates(search, p, shapes, hint.get(p.vm)) for p in order}
    except Deadline:
        return replace(greedy, solver="search")
    biggest = max((p.memory_kib + p.cold_kib for p in order), default=0) or 1
    original = {p.vm: p for p in order}
    candidates = {vm: [replace(c, cost=move_price(biggest, original[vm], c.placement) if c.moves else 0) for c in cs]
                  for vm, cs in candidates.items()}
    candidates[SHAPE] = shapes
    room = room_for(search, original, {k for cs in candidates.values() for c in cs for k in c.use})
    ranks = {vm: rank_of(candidates[vm], p) for vm, p in hint.items() if vm in candidates}
    if shape_hint is not None:
        ranks[SHAPE] = rank_of(shapes, shape_hint)
    found = _solve(search, want, order, candidates, room, max_moves, ranks, time_limit_s)
    if found is None or (greedy.after, len(greedy.moves)) < (0 if found.made else 1, len(found.moves)):
        return replace(greedy, solver="search")
    return Plan(Objective.ROOM, 1, 0 if found.made else 1, found.gap == 0.0, found.moves, (), "cp-sat", found.gap)


def _solve(
    search: Search, want: VmRequest, order: list[Placement], candidates: dict[str, list[Candidate]],
    room: Room, max_moves: int, ranks: dict[str, int], time_limit_s: float,
) -> _Round | None:
    """Solve, replay, cut and solve again (at most ``ROUNDS``); the last round, None when CP-SAT had no
    answer within the time limit."""
    original = {p.vm: p for p in order}
    cuts: list[list[Choice]] = []
    for round_ in range(ROUNDS):
        solved = solve(candidates, room, max_moves=max_moves, cuts=cuts, time_limit_s=search.remaining(time_limit_s),
                       hint=ranks,
                       placed=SHAPE)
        if solved is None:
            return None
        if not solved.chosen:  # proven: no assignment in the model lets the shape in
            return _Round((), False, 0.0 if not cuts else None)
        shape = candidates[SHAPE][solved.chosen[SHAPE]].placement
        targets = {vm: candidates[vm][r].placement for vm, r in solved.chosen.items() if r and vm != SHAPE}
        moves, failed = replay(search, order, targets, lambda old, new: room_reason(want, old, new),
                               lambda p: move_request(p, search.iso(str(p.tenant))))
        made = not failed and confined(search, None, shape, want) is not None
        undo(search, moves, original)
        if made or round_ == ROUNDS - 1:
            return _Round(tuple(moves), made, solved.gap if made else None)
        if failed:
            cuts += [cut_for(p, solved.chosen, candidates) for p in failed]
        else:
            cuts.append(_cut_shape(solved.chosen, candidates, shape.host))
    return None


def _cut_shape(chosen: dict[str, int], candidates: dict[str, list[Candidate]], host: str) -> list[Choice]:
    """The shape's choice with the fate of every modelled VM that is on ``host`` or lands there."""
    on_host = [(vm, r) for vm, r in chosen.items() if vm != SHAPE and (
        candidates[vm][0].placement.host == host or candidates[vm][r].placement.host == host)]
    return [(SHAPE, chosen[SHAPE]), *on_host]


def _shape_after(search: Search, want: VmRequest, moves: tuple[Move, ...]) -> Placement | None:
    """Where the engine puts the shape once the search's ``moves`` are made (None: no moves)."""
    if not moves:
        return None
    olds = [search.fleet.placement(m.vm) for m in moves]
    for old, m in zip(olds, moves, strict=True):
        assert old is not None
        search.apply(old, m.placement)
    try:
        return place(replace(want, host=moves[0].from_host), search.fleet, Strategy.PACK, explain=False).chosen
    finally:
        for old, m in zip(reversed(olds), reversed(moves), strict=True):
            assert old is not None
            search.apply(m.placement, old)


def _targets(search: Search, want: VmRequest, max_moves: int, moves: tuple[Move, ...]) -> list[str]:
    """The target hosts (see the module doc, step 2)."""
    fewest = fewest_departures(search, want, max_moves)
    own = [moves[0].from_host] if moves else []
    return list(dict.fromkeys([*own, *sorted(fewest, key=lambda h: (fewest[h], h))]))[:TARGETS]


def _modelled(search: Search, targets: list[str]) -> list[Placement]:
    """The movable VMs of the target hosts, in their order, smallest first within a host; at most MODELLED."""
    out: list[Placement] = []
    for host in targets:
        there = sorted((p for p in search.placements_on(host) if is_movable(p)),
                       key=lambda p: (p.vcpus, p.memory_kib, p.vm))
        out += there[: MODELLED - len(out)]
    return out


def _shape_candidates(
    search: Search, want: VmRequest, targets: list[str], hint: Placement | None
) -> list[Candidate]:
    """The shape's candidates (see the module doc, step 3), ranks from 0."""
    found: list[Candidate] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()

    def add(p: Placement | None) -> None:
        if p is not None and (p.host, p.host_cells) not in seen:
            seen.add((p.host, p.host_cells))
            found.append(Candidate(SHAPE, len(found), p, 0, usage(search, p)))

    add(hint)
    for host in targets:
        removed = [search.fleet.remove(p.vm) for p in search.placements_on(host) if is_movable(p)]
        try:
            req = replace(want, host=host)
            for cell in (None, *(c.id for c in search.fleet.state(host).cells)):
                search.tick()
                avoid = req.avoid_cells | ({(host, cell)} if cell is not None else set())
                add(place(replace(req, avoid_cells=avoid), search.fleet, Strategy.PACK, explain=False).chosen)
        finally:
            for p in removed:
                search.fleet.record(p)
    return found


def _vm_candidates(search: Search, p: Placement, shapes: list[Candidate], last: Placement | None) -> list[Candidate]:
    """Stay, the search's answer, re-pins off the shape's cell sets on its host, the best other hosts."""
    found, add = collector(search, p)
    add(last)
    cell_sets = sorted({s.placement.host_cells for s in shapes if s.placement.host == p.host})
    req = move_request(p, search.iso(str(p.tenant)))
    for cells in cell_sets:
        if set(cells) & set(p.host_cells):
            add(search.replace_vm(p, replace(req, host=p.host), frozenset(cells)))
    add_other_hosts(search, p, req, OTHER_HOSTS, add)
    return found
