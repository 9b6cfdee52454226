"""The ``drain`` objective as an assignment problem for OR-Tools CP-SAT.

Pure: no I/O (the solver runs in this process, bounded by the planner's
time limit). The hand-written drain (:mod:`.drain`) moves the host's VMs one
by one, largest first, each where the engine puts it; a VM it can no longer
fit stays. Here every VM's destination is chosen together:

* Candidates: for each movable VM, the engine's placement of it with the
  drained host avoided, then with that host avoided too, and so on: the
  ``CANDIDATE_HOSTS`` hosts it ranks best, each with the cells the engine
  picks there on the fleet as it is (the VM left out); and where the
  hand-written drain puts it, which is also the solver's first answer (a
  hint), so the model always holds an assignment as good as that one.
* Variables: ``x[v, k]``, VM ``v`` takes its candidate ``k``; none taken: it
  stays. At most ``max_moves`` are taken.
* Capacities, per destination cell: the candidates taken hold at most its
  free threads (held pCPUs), free pages of each size (interleaved cells
  counted as the claims take them) and free GPUs.
* Objective: the most VMs moved (each worth more than any cost), then the
  least cost: the guest cells a candidate uses beyond the fewest the engine
  gives the VM on an empty host of its shape, and the host's rank among the
  VM's candidates (the engine's own preference).

The counts are necessary, not sufficient (which threads, core isolation
between tenants): the chosen assignment is replayed VM by VM, largest
first, through the engine confined to the chosen host and cells, and each
replayed placement is admitted like any other. A VM the replay cannot place
adds a cut forbidding that set of choices on its host, and the model is
solved again, at most ``ROUNDS`` times; then the VMs not placed stay. The
plan reports the solver's status: proven optimal (for the model), or the
gap between the moves found and the best bound. Should the replayed plan
still move fewer VMs than the hand-written drain, that one is returned
(``Plan.solver`` says ``search``): a solver plan is never the worse one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vnuma.placement.engine import place
from vnuma.placement.ledger.admit import page_needs
from vnuma.placement.model import Objective, Placement, Strategy
from vnuma.placement.rebalance.base import Move, Plan, make_move, request_of
from vnuma.placement.rebalance.drain import largest_first, plan_drain, why_not
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.topology import DeviceKind

CANDIDATE_HOSTS = 6
ROUNDS = 4
MOVE_WEIGHT = 1_000_000


@dataclass(frozen=True, slots=True)
class _Candidate:
    vm: str
    rank: int
    placement: Placement
    cost: int
    use: dict[tuple[str, int, str], int]
    """(host, cell, resource) -> amount: ``threads``, ``pages:<size>``, ``gpus``."""


def plan_drain_cpsat(search: Search, host: str, max_moves: int | None, time_limit_s: float) -> Plan:
    """The drain of ``host`` chosen by CP-SAT (see the module doc); ``Plan.gap`` is 0.0 when proven."""
    on_host = sorted(search.placements_on(host), key=largest_first)
    others = [name for name in search.fleet.host_names() if name != host]
    left: list[tuple[str, str]] = []
    movable: list[Placement] = []
    for p in on_host:
        why = why_not(p, host, others, search.fleet.groups)
        if why is None:
            movable.append(p)
        else:
            left.append((p.vm, why))
    original = {p.vm: p for p in movable}
    greedy = plan_drain(search, host, max_moves)
    for move in reversed(greedy.moves):  # back to the state it started from
        search.apply(move.placement, original[move.vm])
    hint = {m.vm: m.placement for m in greedy.moves}
    try:
        candidates = {p.vm: _candidates(search, p, host, hint.get(p.vm)) for p in movable}
    except Deadline:
        return Plan(Objective.DRAIN, len(on_host), len(on_host), False, (),
                    tuple(left + [(p.vm, "not tried within the time limit") for p in movable]), "cp-sat", None)
    cuts: list[list[tuple[str, int]]] = []
    timed_out = False
    for round_ in range(ROUNDS):
        solved = _solve(search, movable, candidates, max_moves, cuts, _remaining(search, time_limit_s), hint)
        if solved is None:  # no assignment within the time limit: nothing moves (unless the search's does)
            chosen, gap, moves = {}, None, []
            timed_out = True
            break
        chosen, gap = solved
        moves, failed = _replay(search, movable, candidates, chosen, host)
        if not failed or round_ == ROUNDS - 1:
            break
        cuts += failed
        for move in reversed(moves):  # undo the replay before solving again
            search.apply(move.placement, original[move.vm])
    moved = {m.vm for m in moves}
    if len(moved) < len(greedy.moves):
        for move in reversed(moves):
            search.apply(move.placement, original[move.vm])
        return replace(greedy, solver="search")
    left += [
        (p.vm, "CP-SAT found no plan within the time limit" if timed_out and candidates[p.vm]
         else _why_left(p.vm, candidates[p.vm], chosen, max_moves))
        for p in movable if p.vm not in moved
    ]
    return Plan(Objective.DRAIN, len(on_host), len(left), not left, tuple(moves), tuple(left), "cp-sat", gap)


def _remaining(search: Search, time_limit_s: float) -> float:
    return search.deadline - search.clock() if search.clock is not None else time_limit_s


def _candidates(search: Search, p: Placement, host: str, hint: Placement | None) -> list[_Candidate]:
    base = request_of(p, search.iso(str(p.tenant)))
    fewest = search.fewest_cells(p)
    avoid = frozenset({host})
    found: list[_Candidate] = []
    if hint is not None:
        found.append(_Candidate(p.vm, 0, hint, 10 * max(0, len(hint.cells) - fewest), _use(search, hint)))
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
            found.append(_Candidate(p.vm, len(found), chosen, cost, _use(search, chosen)))
    finally:
        search.fleet.record(p)
    return found


def _use(search: Search, p: Placement) -> dict[tuple[str, int, str], int]:
    hs = search.fleet.state(p.host)
    use: dict[tuple[str, int, str], int] = {}
    for cpu in hs.held_pcpus(p):
        cell = hs.cell_of(cpu)
        if cell is not None:
            key = (p.host, cell.id, "threads")
            use[key] = use.get(key, 0) + 1
    for (cell_id, size), n in page_needs(p).items():
        use[(p.host, cell_id, f"pages:{size}")] = n
    for d in p.devices:
        if d.kind is DeviceKind.GPU and d.host_cell is not None:
            key = (p.host, d.host_cell, "gpus")
            use[key] = use.get(key, 0) + 1
    return use


def _capacity(search: Search, key: tuple[str, int, str]) -> int:
    host, cell_id, resource = key
    hs = search.fleet.state(host)
    cell = hs.cell_by_id.get(cell_id)
    if cell is None:  # a memory-only cell: the pages a cold tier may still take there
        return hs.cold_free.get((cell_id, int(resource.split(":")[1])), 0)
    if resource == "threads":
        return cell.threads_free
    if resource == "gpus":
        return len(cell.gpus_free)
    return cell.pages_free.get(int(resource.split(":")[1]), 0)


def _solve(
    search: Search, movable: list[Placement], candidates: dict[str, list[_Candidate]], max_moves: int | None,
    cuts: list[list[tuple[str, int]]], time_limit_s: float, hint: dict[str, Placement],
) -> tuple[dict[str, int], float | None] | None:
    """VM -> the candidate rank the solver takes (absent: it stays), and the gap (0.0: proven optimal);
    None when it found no assignment within ``time_limit_s``."""
    from ortools.sat.python import cp_model  # imported here: only a solver plan pays for it

    model = cp_model.CpModel()
    x = {(c.vm, c.rank): model.NewBoolVar(f"x{i}_{c.rank}")
         for i, p in enumerate(movable) for c in candidates[p.vm]}
    for p in movable:
        model.AddAtMostOne(x[(p.vm, c.rank)] for c in candidates[p.vm])
    usage: dict[tuple[str, int, str], list[tuple[int, object]]] = {}
    for p in movable:
        for c in candidates[p.vm]:
            for key, amount in c.use.items():
                usage.setdefault(key, []).append((amount, x[(p.vm, c.rank)]))
    for key, terms in usage.items():
        model.Add(sum(a * var for a, var in terms) <= _capacity(search, key))
    if max_moves is not None:
        model.Add(sum(x.values()) <= max_moves)
    for cut in cuts:
        model.Add(sum(x[choice] for choice in cut) <= len(cut) - 1)
    model.Maximize(sum(
        (MOVE_WEIGHT - c.cost) * x[(p.vm, c.rank)] for p in movable for c in candidates[p.vm]
    ))
    for p in movable:  # the hand-written drain's answer: candidate 0 of each VM it moved
        for c in candidates[p.vm]:
            model.AddHint(x[(p.vm, c.rank)], 1 if p.vm in hint and c.rank == 0 else 0)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = 2
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    chosen = {vm: rank for (vm, rank), var in x.items() if solver.Value(var)}
    if status == cp_model.OPTIMAL:
        return chosen, 0.0
    found, bound = solver.ObjectiveValue(), solver.BestObjectiveBound()
    return chosen, (bound - found) / bound if bound > 0 else None


def _replay(
    search: Search, movable: list[Placement], candidates: dict[str, list[_Candidate]], chosen: dict[str, int],
    host: str,
) -> tuple[list[Move], list[list[tuple[str, int]]]]:
    """Carry the assignment out through the engine, largest VM first, each confined to its chosen host and
    cells; the moves made, and a cut per host where a VM could not be placed."""
    moves: list[Move] = []
    failed: list[list[tuple[str, int]]] = []
    for p in movable:
        if p.vm not in chosen:
            continue
        target = candidates[p.vm][chosen[p.vm]].placement
        cells = {c.id for c in search.fleet.state(target.host).cells} - set(target.host_cells)
        req = replace(
            request_of(p, search.iso(str(p.tenant))), host=target.host,
            avoid_cells=frozenset((target.host, c) for c in cells),
        )
        search.fleet.remove(p.vm)
        try:
            new = place(req, search.fleet, Strategy.PACK, explain=False).chosen
        finally:
            search.fleet.record(p)
        if new is None:
            same_host = [(vm, rank) for vm, rank in chosen.items()
                         if candidates[vm][rank].placement.host == target.host]
            failed.append(same_host)
            continue
        search.apply(p, new)
        moves.append(make_move(p, new, f"drain host {host}"))
    return moves, failed


def _why_left(vm: str, found: list[_Candidate], chosen: dict[str, int], max_moves: int | None) -> str:
    if not found:
        return "fits on no other host"
    if vm in chosen:
        return "the engine could not place it where the solver put it (threads or core isolation there)"
    if max_moves is not None and len(chosen) >= max_moves:
        return f"over --max-moves {max_moves}"
    return "no room left for it once the other VMs move (the solver keeps it here)"

