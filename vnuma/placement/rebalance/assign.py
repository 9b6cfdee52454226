"""The CP-SAT core the solver plans share: candidates, capacities, the model, the replay.

Pure: no I/O (OR-Tools CP-SAT runs in this process, bounded by the
planner's time limit). A solver plan (``host drain --solver cp-sat``, and
``rebalance --solver cp-sat`` for ``locality``, ``fragmentation`` and
``spread-tenants``) is one
assignment problem over a few VMs, the *modelled* VMs:

* Candidates: per modelled VM, rank 0 is *staying* (its placement now);
  the others are engine placements computed by the planner that uses this
  core (:mod:`.solver`, :mod:`.joint`), each on the fleet as it is with the
  VM itself removed, so each alone is admissible.
* Variables: ``x[v, k]``, VM ``v`` ends on its candidate ``k``; exactly one
  per VM. At most ``max_moves`` take a rank other than 0.
* Capacities, per (host, cell, resource) any candidate uses: what is free
  with every modelled VM removed; the candidates taken hold at most that
  many threads (held pCPUs), pages of each size (interleaved cells counted
  as the claims take them; a memory-only cell's cold tier too) and GPUs.
* Objective (minimised): the sum of the candidates' ``cost`` (the planner
  puts its goal and its price for a move there) plus whatever terms the
  planner adds (:data:`Extra`, :mod:`.terms`: partly used cells, crowding).

The counts are necessary, not sufficient (which threads, SMT pairing, core
isolation between tenants): the chosen assignment is replayed through the
engine (:func:`replay`), each move confined to its chosen host and cells
and admitted on the state the earlier moves left. Replay order: the
planner's order first; a move whose room another modelled VM still holds
(it leaves later in that order) fails and is tried again in the next pass;
passes repeat (at most ``PASSES``) while one of them places a move. A move
that still fails gives a cut (:func:`cut_for`): that combination of choices on its host is
forbidden and the model solved again (the planner bounds the rounds).

CP-SAT runs with one worker, which is deterministic: the same fleet gives
the same plan whenever the solver finishes within the time limit (a plan
cut short by the limit depends on the machine's speed, as the search's does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from vnuma.placement.engine import place
from vnuma.placement.ledger.claim import page_needs
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.rebalance.base import Move, make_move, move_cost_kib
from vnuma.placement.rebalance.search import Search
from vnuma.topology import DeviceKind

Key = tuple[str, int, str]
"""(host, cell, resource): ``threads``, ``pages:<size KiB>`` or ``gpus`` (cell :data:`LOOSE`: the host's GPUs
of no placeable cell)."""
LOOSE = -1
"""The cell of a :data:`Key` counting the host's loose GPUs (no cell id is negative)."""
Choice = tuple[str, int]
"""(VM, candidate rank)."""
PASSES = 4
"""Replay passes at most: a pass that places no move ends the replay sooner."""
MOVE_UNIT = 1000
"""A move's price: this, plus up to as much again for the memory it migrates (ties: less to migrate)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One place a modelled VM may end on; rank 0: where it is (it stays)."""

    vm: str
    rank: int
    placement: Placement
    cost: int
    use: dict[Key, int]
    others: tuple[Placement, ...] = ()
    """The placements of the VMs that move with ``vm`` (an affine group's other VMs, a drain's unit);
    ``use`` counts them too."""

    @property
    def moves(self) -> bool:
        """Taking it moves the VM."""
        return self.rank != 0


@dataclass(frozen=True, slots=True)
class Room:
    """What the modelled VMs may share: ``cap`` per key, with all of them removed; ``occupied``: the CPU
    cells (host, cell) some VM outside the model still uses."""

    cap: dict[Key, int]
    occupied: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class Solved:
    """VM -> the rank taken (every modelled VM), and the gap (0.0 proven optimal for the model, None: no
    bound)."""

    chosen: dict[str, int]
    gap: float | None


Extra = Callable[[Any, dict[Choice, Any], dict[str, list[Candidate]], Room], list[tuple[int, Any]]]
"""A planner's own objective terms: (model, x, candidates, room) -> [(coefficient, variable)]."""


def usage(search: Search, p: Placement) -> dict[Key, int]:
    """What ``p`` takes per (host, cell, resource) on its host."""
    hs = search.fleet.state(p.host)
    use: dict[Key, int] = {}
    for cpu in hs.held_pcpus(p):
        cell = hs.cell_of(cpu)
        if cell is not None:
            key = (p.host, cell.id, "threads")
            use[key] = use.get(key, 0) + 1
    for (cell_id, size), n in page_needs(p).items():
        use[(p.host, cell_id, f"pages:{size}")] = n
    for d in p.devices:
        if d.kind is DeviceKind.GPU and d.address in hs.gpu_home:
            cell = hs.gpu_cell(d.address)
            key = (p.host, LOOSE if cell is None else cell.id, "gpus")
            use[key] = use.get(key, 0) + 1
    return use


def stay(search: Search, p: Placement, cost: int) -> Candidate:
    """Rank 0: ``p`` where it is."""
    return Candidate(p.vm, 0, p, cost, usage(search, p))


def move_price(biggest: int, old: Placement, new: Placement) -> int:
    """The price of moving ``old`` to ``new``: :data:`MOVE_UNIT`, plus up to as much again in proportion to
    the memory it migrates (``biggest``: the most any modelled VM could), so fewer moves always cost less."""
    return MOVE_UNIT + (MOVE_UNIT - 1) * min(biggest, move_cost_kib(old, new)) // max(1, biggest)


def rank_of(found: list[Candidate], p: Placement) -> int:
    """The rank of the candidate with ``p``'s host, cells and devices (0 when none has them)."""
    where = (p.host, p.host_cells, p.devices)
    return next((c.rank for c in found if (c.placement.host, c.placement.host_cells, c.placement.devices) == where), 0)


def room_for(search: Search, modelled: Iterable[str], keys: Iterable[Key]) -> Room:
    """Capacities of ``keys`` and the occupied cells of their hosts, with the ``modelled`` VMs removed
    (the fleet is left as it was)."""
    removed = [search.fleet.remove(vm) for vm in modelled]
    try:
        cap = {key: _capacity(search, key) for key in keys}
        hosts = {host for host, _, _ in cap}
        occupied = frozenset(
            (host, c.id) for host in hosts for c in search.fleet.state(host).cells if c.tenants
        )
    finally:
        for p in removed:
            search.fleet.record(p)
    return Room(cap, occupied)


def _capacity(search: Search, key: Key) -> int:
    host, cell_id, resource = key
    hs = search.fleet.state(host)
    if cell_id == LOOSE:
        return len(hs.loose_gpus_free)
    cell = hs.cell_by_id.get(cell_id)
    if cell is None:  # a memory-only cell: the pages a cold tier may still take there
        return hs.cold_free.get((cell_id, int(resource.split(":")[1])), 0)
    if resource == "threads":
        return cell.threads_free
    if resource == "gpus":
        return len(cell.gpus_free)
    return cell.pages_free.get(int(resource.split(":")[1]), 0)


def solve(
    candidates: dict[str, list[Candidate]], room: Room, *, max_moves: int | None, cuts: list[list[Choice]],
    time_limit_s: float, hint: dict[str, int], extra: Extra | None = None, placed: str | None = None,
    weights: dict[str, int] | None = None,
) -> Solved | None:
    """The assignment of least cost (see the module doc); None when CP-SAT found none within the time
    limit, an empty ``chosen`` when it proved there is none. ``hint``: a rank per VM (absent: 0), the
    solver's first answer. ``placed``: the key of an item that is placed, not moved (the ``room`` shape):
    its choice is never counted as a move. ``weights``: the moves an item's move counts (absent: 1; an
    affine group moved whole counts its VMs)."""
    from ortools.sat.python import cp_model  # imported here: only a solver plan pays for it

    model = cp_model.CpModel()
    order = sorted(candidates)
    x = {(c.vm, c.rank): model.NewBoolVar(f"x{i}_{c.rank}") for i, vm in enumerate(order) for c in candidates[vm]}
    for vm in order:
        model.AddExactlyOne(x[(vm, c.rank)] for c in candidates[vm])
    usage_of: dict[Key, list[tuple[int, Any]]] = {}
    for vm in order:
        for c in candidates[vm]:
            for key, amount in c.use.items():
                usage_of.setdefault(key, []).append((amount, x[(vm, c.rank)]))
    for key, terms in usage_of.items():
        model.Add(sum(a * var for a, var in terms) <= room.cap.get(key, 0))
    if max_moves is not None:
        counts = weights or {}
        model.Add(sum(counts.get(vm, 1) * var for (vm, rank), var in x.items() if rank and vm != placed) <= max_moves)
    for cut in cuts:
        model.Add(sum(x[choice] for choice in cut) <= len(cut) - 1)
    terms = [(c.cost, x[(vm, c.rank)]) for vm in order for c in candidates[vm] if c.cost]
    terms += extra(model, x, candidates, room) if extra is not None else []
    model.Minimize(sum(a * var for a, var in terms))
    for (vm, rank), var in x.items():
        model.AddHint(var, 1 if hint.get(vm, 0) == rank else 0)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = 1  # one worker is deterministic: same fleet, same plan (within the limit)
    # OR-Tools' own Ctrl-C handler leaves SIGINT at SIG_DFL after the solve: a later Ctrl-C would kill vnuma
    # with no word on what it had done (a drain's cordon, a run's steps). Python's stays: a Ctrl-C during the
    # solve is raised when it returns (within its time limit).
    solver.parameters.catch_sigint_signal = False
    status = solver.Solve(model)
    if status == cp_model.INFEASIBLE:
        return Solved({}, 0.0)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    chosen = {vm: rank for (vm, rank), var in x.items() if solver.Value(var)}
    found = solver.ObjectiveValue()
    if status == cp_model.OPTIMAL:
        return Solved(chosen, 0.0)
    bound = solver.BestObjectiveBound()
    return Solved(chosen, (found - bound) / found if found > 0 else None)


def replay(
    search: Search, order: list[Placement], targets: dict[str, Placement],
    reason: Callable[[Placement, Placement], str], request: Callable[[Placement], VmRequest],
) -> tuple[list[Move], list[Placement]]:
    """Carry the assignment out (``targets``: VM -> chosen placement, for the VMs that move) in passes
    over ``order`` (see the module doc), each move confined to its host and cells; the moves made, and
    the VMs that could not be placed."""
    moves: list[Move] = []
    pending = [p for p in order if p.vm in targets]
    for _ in range(PASSES):
        still = []
        for p in pending:
            new = confined(search, p, targets[p.vm], request(p))
            if new is None:
                still.append(p)
                continue
            if (new.host, new.host_cells, new.devices) == (p.host, p.host_cells, p.devices):
                continue  # the engine kept it where it is (a subset of the chosen cells): no move
            search.apply(p, new)
            moves.append(make_move(p, new, reason(p, new)))
        if len(still) == len(pending):
            break
        pending = still
        if not pending:
            break
    return moves, pending


def confined(search: Search, p: Placement | None, target: Placement, req: VmRequest) -> Placement | None:
    """The engine's placement of ``p`` (by ``req``; None: a new VM) on ``target``'s host, only on
    ``target``'s cells."""
    cells = {c.id for c in search.fleet.state(target.host).cells} - set(target.host_cells)
    req = replace(req, host=target.host, avoid_cells=req.avoid_cells | {(target.host, c) for c in cells})
    if p is None:
        return place(req, search.fleet, Strategy.PACK, explain=False).chosen
    search.fleet.remove(p.vm)
    try:
        return place(req, search.fleet, Strategy.PACK, explain=False).chosen
    finally:
        search.fleet.record(p)


def cut_for(failed: Placement, chosen: dict[str, int], candidates: dict[str, list[Candidate]]) -> list[Choice]:
    """The choices that moved VMs onto the host ``failed`` could not be placed on: not all of them again."""
    host = candidates[failed.vm][chosen[failed.vm]].placement.host
    return [(vm, rank) for vm, rank in chosen.items() if rank and candidates[vm][rank].placement.host == host]


def undo(search: Search, moves: list[Move], original: dict[str, Placement]) -> None:
    """Take back ``moves`` (each VM moved once, from ``original``)."""
    for move in reversed(moves):
        search.apply(move.placement, original[move.vm])
