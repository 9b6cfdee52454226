"""Rebalance planner: an ordered list of VM moves that improves an objective.

Pure: no I/O, deterministic for a given state (the only outside input is the
optional ``clock`` used for the time limit). A move re-places one VM: new
cells and pCPUs on its host, or another host. Each move is a real
:func:`~vnuma.placement.engine.place` on the state the earlier moves left,
with the VM itself removed first, so every intermediate state is valid by
construction: replaying the moves in order (remove the VM, add its new
placement) never needs capacity that is not free at that step.

Objectives (lower is better):

* ``locality``: per VM, the cells it uses beyond the fewest the engine gives
  it on an empty copy of its host, plus its GPUs off its own cells. Greedy:
  each step tries to re-place every VM with a positive cost (GPUs
  ``required``, then ``preferred``) and keeps the move that lowers the total
  most (ties: less memory to migrate, then VM name). Work: at most
  ``max_moves`` x V engine calls for V VMs. ``optimal`` is true when the
  total reaches 0, the lower bound.
* ``room``: 0 when ``make_room_for`` fits, else 1. Iterative deepening
  depth-first search over move sequences of length 0..``max_moves``; the
  candidate moves of a state are, for each VM (smallest memory first), the
  engine's choice with the VM's own cells blocked and, on a multi-host
  fleet, with its whole host blocked. Work: at most sum over d of (2V)^d
  engine calls, cut by the time limit; states already seen at a depth are
  skipped. The first plan found has the fewest moves; ``optimal`` is true
  when every shallower depth was searched completely (or when the search
  proved that no plan within ``max_moves`` exists).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

from vnuma.placement.engine import place
from vnuma.placement.fleet import Fleet
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    Isolation,
    Objective,
    Placement,
    Strategy,
    ThreadPolicy,
    VmRequest,
)
from vnuma.topology import PAGE_4K, DeviceKind, Host

BLOCKER = "\x00rebalance-block"


@dataclass(frozen=True, slots=True)
class FleetState:
    """Hosts, their placements and tenants' isolation: what the planner starts from."""

    hosts: tuple[Host, ...]
    placements: tuple[Placement, ...]
    isolation: Mapping[str, Isolation]


@dataclass(frozen=True, slots=True)
class Move:
    """One VM re-placed: from where, to where (``placement``), why, and the memory to migrate."""

    vm: str
    from_host: str
    from_cells: tuple[int, ...]
    to_host: str
    to_cells: tuple[int, ...]
    reason: str
    cost_kib: int
    placement: Placement


@dataclass(frozen=True, slots=True)
class Plan:
    """Ordered moves, the objective before and after them, and whether the search finished."""

    objective: Objective
    before: int
    after: int
    optimal: bool
    moves: tuple[Move, ...]


class _Deadline(Exception):
    """The time limit passed (internal)."""


def request_of(p: Placement, isolation: Isolation, affinity: GpuAffinity = GpuAffinity.REQUIRED) -> VmRequest:
    """The request that re-places a VM with its size, policies and page size (cells left to the engine)."""
    pins = {x for c in p.cells for x in c.pcpus}
    return VmRequest(
        name=p.vm,
        tenant=p.tenant,
        vcpus=p.vcpus,
        memory_kib=p.memory_kib,
        gpus=sum(1 for d in p.devices if d.kind is DeviceKind.GPU),
        cpu_policy=p.cpu_policy,
        thread_policy=p.thread_policy,
        page_size_kib=p.cells[0].page_size_kib,
        gpu_affinity=affinity,
        emulator_threads=EmulatorThreads.ISOLATE if set(p.emulator_pcpus) - pins else EmulatorThreads.SHARE,
        isolation=isolation,
    )


def is_movable(p: Placement) -> bool:
    """VMs holding devices other than GPUs are left where they are (the engine places GPUs only)."""
    return bool(p.cells) and all(d.kind is DeviceKind.GPU for d in p.devices)


def move_cost_kib(old: Placement, new: Placement) -> int:
    """Memory to migrate: all of it to another host, else what sits on cells the VM leaves."""
    if old.host != new.host:
        return old.memory_kib
    kept = set(new.host_cells)
    return sum(c.memory_kib for c in old.cells if c.host_cell not in kept)


class _Search:
    """A working fleet with apply/undo, the clock and the engine-call counter."""

    def __init__(self, state: FleetState, time_limit_s: float, clock: Callable[[], float] | None) -> None:
        self.fleet = Fleet(state.hosts, state.placements, state.isolation)
        self.isolation = dict(state.isolation)
        self.hosts = {h.name: h for h in state.hosts}
        self.clock = clock
        self.deadline = clock() + time_limit_s if clock is not None else 0.0
        self._best_cells: dict[tuple[str, VmRequest], int] = {}

    def tick(self) -> None:
        if self.clock is not None and self.clock() > self.deadline:
            raise _Deadline

    def iso(self, tenant: str) -> Isolation:
        return self.isolation.get(tenant, Isolation.CORE)

    def apply(self, old: Placement, new: Placement) -> None:
        self.fleet.remove(old.vm)
        self.fleet.add(new, self.iso(new.tenant))

    def locality_cost(self, p: Placement) -> int:
        """Cells beyond the engine's fewest on an empty host, plus GPUs off the VM's cells."""
        host = self.hosts[p.host]
        home = {d.address: d.numa_node for d in host.devices}
        off = sum(
            1 for d in p.devices if d.kind is DeviceKind.GPU and home.get(d.address) not in p.host_cells
        )
        req = replace(request_of(p, self.iso(p.tenant)), gpus=0, host=p.host)
        key = (p.host, req)
        if key not in self._best_cells:
            alone = place(req, Fleet([host]), Strategy.PACK).chosen
            self._best_cells[key] = len(alone.cells) if alone is not None else len(p.cells)
        return max(0, len(p.cells) - self._best_cells[key]) + off

    def replace_vm(self, old: Placement, req: VmRequest, blocked: frozenset[int] | None) -> Placement | None:
        """The engine's new placement of ``old`` with it removed (and ``blocked`` cells of its host
        made unusable; None means its whole host); the fleet is left as it was."""
        self.tick()
        self.fleet.remove(old.vm)
        try:
            with self._blocking(old.host, blocked):
                chosen = place(req, self.fleet, Strategy.PACK).chosen
        finally:
            self.fleet.add(old, self.iso(old.tenant))
        if chosen is None or (chosen.host, chosen.host_cells) == (old.host, old.host_cells):
            return None
        return chosen

    @contextmanager
    def _blocking(self, host: str, cells: frozenset[int] | None) -> Iterator[None]:
        hs = self.fleet.state(host)
        free = self.fleet.free_pcpus(host)
        assignments: list[CellAssignment] = []
        for cs in hs.cells:
            pcpus = tuple(sorted(free & frozenset(cs.core_of))) if cells is None or cs.id in cells else ()
            if pcpus:
                g = len(assignments)
                assignments.append(CellAssignment(g, cs.id, tuple(range(len(pcpus))), pcpus, 0, PAGE_4K))
        if not assignments:
            yield
            return
        blocker = Placement(
            BLOCKER, BLOCKER, host, tuple(assignments), (), (), CpuPolicy.DEDICATED, ThreadPolicy.PREFER
        )
        self.fleet.add(blocker, Isolation.NONE)
        try:
            yield
        finally:
            self.fleet.remove(BLOCKER)


def _move(old: Placement, new: Placement, reason: str) -> Move:
    return Move(
        old.vm, old.host, old.host_cells, new.host, new.host_cells, reason, move_cost_kib(old, new), new
    )


def plan_moves(
    fleet_state: FleetState,
    objective: Objective,
    max_moves: int,
    make_room_for: VmRequest | None = None,
    time_limit_s: float = 10.0,
    *,
    clock: Callable[[], float] | None = None,
) -> Plan:
    """Plan at most ``max_moves`` moves improving ``objective``; the best found within the time limit.

    ``clock`` (seconds, e.g. ``time.monotonic``) enforces ``time_limit_s``;
    without it the search runs to its work bound (see the module docstring).

    Raises:
        InvalidInputError: ``room`` without ``make_room_for``, or a negative ``max_moves``.
    """
    from vnuma.errors import InvalidInputError

    if max_moves < 0:
        raise InvalidInputError(f"--max-moves must be 0 or more, got {max_moves}")
    search = _Search(fleet_state, time_limit_s, clock)
    if objective is Objective.LOCALITY:
        return _plan_locality(search, max_moves)
    if make_room_for is None:
        raise InvalidInputError(
            "objective room needs a VM shape", hint='--make-room-for "vcpus=32,memory=256GiB"'
        )
    return _plan_room(search, make_room_for, max_moves)


def _plan_locality(search: _Search, max_moves: int) -> Plan:
    fleet = search.fleet
    before = sum(search.locality_cost(p) for p in fleet.placements())
    total, moves = before, []
    try:
        for _ in range(max_moves):
            best = _best_locality_move(search)
            if best is None:
                break
            gain, move = best
            old = fleet.placement(move.vm)
            assert old is not None
            search.apply(old, move.placement)
            moves.append(move)
            total -= gain
    except _Deadline:
        pass
    return Plan(Objective.LOCALITY, before, total, total == 0, tuple(moves))


def _best_locality_move(search: _Search) -> tuple[int, Move] | None:
    best: tuple[tuple[int, int, str], int, Move] | None = None
    for p in search.fleet.placements():
        cost = search.locality_cost(p) if is_movable(p) else 0
        if cost == 0:
            continue
        for affinity in (GpuAffinity.REQUIRED, GpuAffinity.PREFERRED):
            new = search.replace_vm(p, request_of(p, search.iso(p.tenant), affinity), frozenset())
            if new is None:
                continue
            gain = cost - search.locality_cost(new)
            if gain <= 0:
                continue
            cells = f"cells {list(p.host_cells)} -> {list(new.host_cells)}"
            reason = f"locality cost {cost} -> {cost - gain} ({cells})"
            move = _move(p, new, reason)
            key = (-gain, move.cost_kib, p.vm)
            if best is None or key < best[0]:
                best = (key, gain, move)
            break
    return None if best is None else (best[1], best[2])


def _fits(search: _Search, request: VmRequest) -> bool:
    search.tick()
    return place(request, search.fleet, Strategy.PACK).chosen is not None


def _plan_room(search: _Search, request: VmRequest, max_moves: int) -> Plan:
    if _fits(search, request):
        return Plan(Objective.ROOM, 0, 0, True, ())
    complete = True
    try:
        for depth in range(1, max_moves + 1):
            seen: set[frozenset[tuple[str, str, tuple[int, ...], tuple[int, ...]]]] = set()
            found = _dfs(search, request, depth, [], seen)
            if found is not None:
                return Plan(Objective.ROOM, 1, 0, complete, tuple(found))
    except _Deadline:
        complete = False
    return Plan(Objective.ROOM, 1, 1, complete, ())


def _signature(fleet: Fleet) -> frozenset[tuple[str, str, tuple[int, ...], tuple[int, ...]]]:
    return frozenset(
        (p.vm, p.host, p.host_cells, tuple(x for c in p.cells for x in c.pcpus)) for p in fleet.placements()
    )


def _room_candidates(search: _Search, moved: set[str]) -> Iterator[tuple[Placement, Placement]]:
    movable = [p for p in search.fleet.placements() if is_movable(p) and p.vm not in moved]
    for p in sorted(movable, key=lambda q: (q.memory_kib, q.vcpus, q.vm)):
        req = request_of(p, search.iso(p.tenant), GpuAffinity.REQUIRED)
        targets: list[Placement] = []
        for blocked in (
            (frozenset(p.host_cells), None) if len(search.hosts) > 1 else (frozenset(p.host_cells),)
        ):
            new = search.replace_vm(p, req, blocked)
            if new is not None and all((t.host, t.host_cells) != (new.host, new.host_cells) for t in targets):
                targets.append(new)
        for new in targets:
            yield p, new


def _dfs(
    search: _Search,
    request: VmRequest,
    depth: int,
    path: list[Move],
    seen: set[frozenset[tuple[str, str, tuple[int, ...], tuple[int, ...]]]],
) -> list[Move] | None:
    for old, new in list(_room_candidates(search, {m.vm for m in path})):
        search.apply(old, new)
        sig = _signature(search.fleet)
        found = None
        if sig not in seen:
            seen.add(sig)
            step = f"move {len(path) + 1} of making room for {request.vcpus} vCPUs, {request.gpus} GPUs"
            path.append(_move(old, new, step))
            found = _finish(search, request, depth, path, seen)
            path.pop()
        search.apply(new, old)
        if found is not None:
            return found
    return None


def _finish(
    search: _Search,
    request: VmRequest,
    depth: int,
    path: list[Move],
    seen: set[frozenset[tuple[str, str, tuple[int, ...], tuple[int, ...]]]],
) -> list[Move] | None:
    if len(path) == depth:
        return list(path) if _fits(search, request) else None
    return _dfs(search, request, depth, path, seen)
