"""The ``locality`` objective: bring split VMs onto the fewest cells and their GPUs onto their cells.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement
from vnuma.placement.nics import nic_pairs
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.search import Search, greedy
from vnuma.topology import DeviceKind


def locality_cost(search: Search, p: Placement) -> int:
    """Cells beyond the engine's fewest on an empty host, plus GPUs off the VM's cells, plus GPU–NIC pairs
    worse than the level its NICs were asked within (:func:`~vnuma.placement.nics.nic_pairs`)."""
    home = search.fleet.state(p.host).gpu_home
    cells = set(p.host_cells)
    off = sum(1 for d in p.devices if d.kind is DeviceKind.GPU and home.get(d.address) not in cells)
    far = sum(1 for pair in nic_pairs(p, search.fleet.host(p.host)) if pair.worse) if p.nic_affinity else 0
    return max(0, len(p.cells) - search.fewest_cells(p)) + off + far


def plan_locality(search: Search, max_moves: int) -> Plan:
    """Greedy: each step makes the move that lowers the total cost most."""
    before = sum(locality_cost(search, p) for p in search.fleet.placements())
    return greedy(search, Objective.LOCALITY, before, _best_move, max_moves)


def _best_move(search: Search) -> tuple[int, Move] | None:
    costly = [(c, p) for p in search.fleet.placements() if is_movable(p) and (c := locality_cost(search, p)) > 0]
    costly.sort(key=lambda cp: (-cp[0], cp[1].vm))
    best: tuple[tuple[int, int, str], int, Move] | None = None
    for cost, p in costly:
        if best is not None and cost < best[1]:
            break  # a move gains at most the VM's own cost: nothing further down can win
        for new in _targets(search, p):
            gain = cost - locality_cost(search, new)
            if gain <= 0:
                continue
            to = f"cells {list(new.host_cells)}" if new.host == p.host else f"{new.host} cells {list(new.host_cells)}"
            move = make_move(p, new, f"locality cost {cost} -> {cost - gain} (cells {list(p.host_cells)} -> {to})")
            key = (-gain, move.cost_kib, p.vm)
            if best is None or key < best[0]:
                best = (key, gain, move)
    return None if best is None else (best[1], best[2])


def _targets(search: Search, p: Placement) -> list[Placement]:
    """A re-pin on the VM's host and, on a multi-host fleet, the engine's free choice (the VM's own request:
    GPUs where its ``--gpu-affinity`` lets them go)."""
    found: list[Placement] = []
    for host in (p.host, None) if len(search.on_host) > 1 else (p.host,):
        new = search.replace_vm(p, replace(move_request(p, search.iso(p.tenant)), host=host), frozenset())
        if new is not None:
            found.append(new)
    return found
