"""The ``room`` objective: the fewest moves after which a VM shape fits.

Pure: no I/O. Definition, narrowing and work bound: see
:mod:`vnuma.placement.rebalance`. The capacity bound here is a necessary
condition only (it ignores isolation, SMT pairing and page sizes), so it
never rules out a host or a move that could succeed; the engine decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vnuma.placement.kept import move_request
from vnuma.placement.model import CpuPolicy, GpuAffinity, Placement, VmRequest
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.search import Deadline, Search
from vnuma.topology import DeviceKind, shape_text

Seen = set[frozenset[tuple[str, str, tuple[int, ...], tuple[int, ...]]]]


@dataclass(frozen=True, slots=True)
class _Foot:
    """What one VM holds on its host (and frees when it leaves): pCPUs, memory and GPUs per cell."""

    threads: dict[int, int]
    memory: dict[int, int]
    gpus: dict[int | None, int]


def _foot(search: Search, p: Placement) -> _Foot:
    hs = search.fleet.state(p.host)
    threads: dict[int, int] = {}
    for cpu in hs.held_pcpus(p) | p.shared_pcpus:
        cell = hs.cell_of(cpu)
        if cell is not None:
            threads[cell.id] = threads.get(cell.id, 0) + 1
    memory = {c.host_cell: c.memory_kib for c in p.cells}
    gpus: dict[int | None, int] = {}
    for d in p.devices:
        if d.kind is DeviceKind.GPU:
            home = hs.gpu_home.get(d.address)
            gpus[home] = gpus.get(home, 0) + 1
    return _Foot(threads, memory, gpus)


def could_fit(
    search: Search, want: VmRequest, host: str, moves: int, moved: set[str], freed: Placement | None = None
) -> bool:
    """Capacity bound: could ``want`` fit on ``host`` once ``freed`` and at most ``moves`` more of its
    movable VMs (not in ``moved``) left? False means no such plan exists."""
    if want.vcpus is None or want.memory_kib is None:
        return True  # sized from its GPUs by the engine: no bound to check
    hs = search.fleet.state(host)
    feet = [
        _foot(search, p)
        for p in search.placements_on(host)
        if is_movable(p) and p.vm not in moved and p is not freed
    ]
    extra = _foot(search, freed) if freed is not None else _Foot({}, {}, {})
    cells = hs.cells
    threads = _room(sum(c.threads_free for c in cells) + sum(extra.threads.values()),
                    [sum(f.threads.values()) for f in feet], moves)
    memory = _room(sum(c.free_kib for c in cells) + sum(extra.memory.values()),
                   [sum(f.memory.values()) for f in feet], moves)
    gpus = _room(hs.gpus_free + sum(extra.gpus.values()), [sum(f.gpus.values()) for f in feet], moves)
    # A shared VM may float over the shared pool, which the free-thread counts leave out; a mixed VM's
    # cells need free threads for all their vCPUs (CellState.capacity), as a dedicated VM's.
    dedicated = want.cpu_policy is not CpuPolicy.SHARED
    if (dedicated and threads < want.vcpus) or memory < want.memory_kib or gpus < want.gpus:
        return False
    n = want.numa_nodes
    if not n:
        return True
    ok = [
        c
        for c in cells
        if _room(c.free_kib + extra.memory.get(c.id, 0), [f.memory.get(c.id, 0) for f in feet], moves)
        >= want.memory_kib // n
        and (
            not dedicated
            or _room(c.threads_free + extra.threads.get(c.id, 0), [f.threads.get(c.id, 0) for f in feet], moves)
            >= want.vcpus // n
        )
    ]
    if len(ok) < n:
        return False
    if want.gpus and want.gpu_affinity is GpuAffinity.REQUIRED and not hs.shape.loose_gpus:
        on_cells = sum(
            _room(len(c.gpus_free) + extra.gpus.get(c.id, 0), [f.gpus.get(c.id, 0) for f in feet], moves)
            for c in ok
        )
        return on_cells >= want.gpus
    return True


def fewest_departures(search: Search, want: VmRequest, max_moves: int) -> dict[str, int]:
    """Per host (``want.host`` only, when given) where :func:`could_fit` lets the shape in after at most
    ``max_moves`` departures: the fewest such departures. The hosts a room plan may target."""
    hosts = [want.host] if want.host is not None else list(search.fleet.host_names())
    fewest: dict[str, int] = {}
    for host in hosts:  # arithmetic only (no engine call): not counted against the time limit
        k = next((k for k in range(1, max_moves + 1) if could_fit(search, want, host, k, set())), None)
        if k is not None:
            fewest[host] = k
    return fewest


def _room(free: int, theirs: list[int], moves: int) -> int:
    """``free`` plus the ``moves`` largest of ``theirs``: the most that many departures can free."""
    return free + sum(sorted(theirs, reverse=True)[:moves])


def plan_room(search: Search, want: VmRequest, max_moves: int) -> Plan:
    """Iterative deepening over move sequences, one target host at a time (fewest moves first)."""
    if search.fits(want):
        return Plan(Objective.ROOM, 0, 0, True, ())
    fewest = fewest_departures(search, want, max_moves)
    complete = True
    try:
        for depth in range(1, max_moves + 1):
            seen: Seen = set()
            for host in sorted((h for h in fewest if fewest[h] <= depth), key=lambda h: (fewest[h], h)):
                found = _dfs(search, replace(want, host=host), depth, [], seen)
                if found is not None:
                    return Plan(Objective.ROOM, 1, 0, complete, tuple(found))
    except Deadline:
        complete = False
    return Plan(Objective.ROOM, 1, 1, complete, ())


def _dfs(search: Search, want: VmRequest, depth: int, path: list[Move], seen: Seen) -> list[Move] | None:
    assert want.host is not None
    left = depth - len(path)
    if left == 0:
        return list(path) if search.fits(want) else None
    moved = {m.vm for m in path}
    for old, new in _candidates(search, want, left, moved):
        search.apply(old, new)
        sig = frozenset(_where(m.placement) for m in path) | {_where(new)}
        found = None
        if sig not in seen and could_fit(search, want, want.host, left - 1, moved | {old.vm}):
            seen.add(sig)
            path.append(make_move(old, new, room_reason(want, old, new)))
            found = _dfs(search, want, depth, path, seen)
            path.pop()
        search.apply(new, old)
        if found is not None:
            return found
    return None


def _where(p: Placement) -> tuple[str, str, tuple[int, ...], tuple[int, ...]]:
    return (p.vm, p.host, p.host_cells, tuple(x for c in p.cells for x in c.pcpus))


def _candidates(search: Search, want: VmRequest, left: int, moved: set[str]) -> list[tuple[Placement, Placement]]:
    """Moves of the target host's VMs whose leaving could still let the shape in: a re-pin onto other
    cells of the host, and the engine's choice on another host; smallest memory first."""
    assert want.host is not None
    host = want.host
    out: list[tuple[Placement, Placement]] = []
    movable = [p for p in search.placements_on(host) if is_movable(p) and p.vm not in moved]
    for p in sorted(movable, key=lambda q: (q.memory_kib, q.vcpus, q.vm)):
        if not could_fit(search, want, host, left - 1, moved | {p.vm}, freed=p):
            continue
        req = move_request(p, search.iso(p.tenant))
        repin = search.replace_vm(p, replace(req, host=host), frozenset(p.host_cells))
        away = search.replace_vm(p, req, None) if len(search.on_host) > 1 else None
        if repin is not None:
            out.append((p, repin))
        if away is not None and (repin is None or (away.host, away.host_cells) != (repin.host, repin.host_cells)):
            out.append((p, away))
    return out


def room_reason(want: VmRequest, old: Placement, new: Placement) -> str:
    """Why a move was made: the cells it frees, where the VM goes, the shape it makes room for."""
    shape = shape_text(want.vcpus, want.memory_kib, want.gpus)
    to = f"cells {list(new.host_cells)}" if new.host == old.host else f"host {new.host} cells {list(new.host_cells)}"
    return f"frees cells {list(old.host_cells)} of {old.host} (to {to}) to make room for {shape}"
