"""The ``fragmentation`` objective: fewer partly used cells, so whole cells stay free for large VMs.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from vnuma.placement.kept import move_request
from vnuma.placement.ledger.cell import CellState
from vnuma.placement.model import Placement
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.search import Search, greedy

CANDIDATES = 32
"""VMs tried per step (the smallest on partly used cells): bounds a step to 2 x 32 engine calls."""


def partly_used(cell: CellState) -> bool:
    """Some VM uses the cell (pCPUs, pages or devices) and some of its placeable threads are still free."""
    return bool(cell.tenants) and any(core.free for core in cell.cores)


def host_value(search: Search, host: str) -> int:
    """The partly used CPU cells of ``host`` on the working fleet."""
    return sum(1 for cell in search.fleet.state(host).cells if partly_used(cell))


def plan_fragmentation(search: Search, max_moves: int) -> Plan:
    """Greedy: each step makes the move that empties or fills the most partly used cells."""
    before = sum(host_value(search, h) for h in search.on_host)
    return greedy(search, Objective.FRAGMENTATION, before, _best_move, max_moves)


def _size(p: Placement) -> tuple[int, int, str]:
    return (p.vcpus, p.memory_kib, p.vm)


def _best_move(search: Search) -> tuple[int, Move] | None:
    movable = []
    for host in sorted(search.on_host):
        partial = {c.id for c in search.fleet.state(host).cells if partly_used(c)}
        movable += [p for p in search.placements_on(host) if is_movable(p) and set(p.host_cells) & partial]
    best: tuple[tuple[int, int, str], int, Move] | None = None
    for p in sorted(movable, key=_size)[:CANDIDATES]:
        for new in _targets(search, p):
            hosts = {p.host, new.host}
            old_value = sum(host_value(search, h) for h in hosts)
            search.apply(p, new)
            new_value = sum(host_value(search, h) for h in hosts)
            search.apply(new, p)
            gain = old_value - new_value
            if gain <= 0:
                continue
            to = f"cells {list(new.host_cells)}" if new.host == p.host else f"{new.host} cells {list(new.host_cells)}"
            reason = f"partly used cells {old_value} -> {new_value} (cells {list(p.host_cells)} -> {to})"
            move = make_move(p, new, reason)
            key = (-gain, move.cost_kib, p.vm)
            if best is None or key < best[0]:
                best = (key, gain, move)
    return None if best is None else (best[1], best[2])


def _targets(search: Search, p: Placement) -> list[Placement]:
    """The engine's placement with the VM's own cells blocked (a re-pin elsewhere on its host) and, on a
    multi-host fleet, with its host blocked; ``pack`` prefers partly used cells, which is what fills them."""
    found: list[Placement] = []
    for blocked in (frozenset(p.host_cells), None) if len(search.on_host) > 1 else (frozenset(p.host_cells),):
        new = search.replace_vm(p, move_request(p, search.iso(p.tenant)), blocked)
        if new is not None:
            found.append(new)
    return found

