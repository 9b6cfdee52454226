"""The ``spread-tenants`` objective: a tenant's VMs on one host over more memory controllers.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.search import Search, greedy

Group = tuple[str, str]  # (tenant, host)


def unavoidable(vms: int, cells: int) -> int:
    """Crowded VMs no placement avoids: with more VMs than cells, at least ``vms - cells + 1`` share."""
    return max(0, vms - cells + 1) if vms > cells else 0


def crowding(vms: list[Placement], cells: int) -> int:
    """One tenant's VMs on one host (of ``cells`` CPU cells) that share a cell with another of them,
    beyond :func:`unavoidable`."""
    if len(vms) < 2:
        return 0
    use = Counter(c for p in vms for c in set(p.host_cells))
    crowded = sum(1 for p in vms if any(use[c] > 1 for c in p.host_cells))
    return crowded - unavoidable(len(vms), cells)


def groups(search: Search) -> dict[Group, list[Placement]]:
    """Placements by (tenant, host), each list in VM name order."""
    out: dict[Group, list[Placement]] = {}
    for p in search.fleet.placements():
        out.setdefault((p.tenant, p.host), []).append(p)
    return out


def spread_cost(search: Search) -> int:
    """The objective: :func:`crowding` summed over every (tenant, host)."""
    return sum(crowding(vms, search.cpu_cells(host)) for (_, host), vms in groups(search).items())


def plan_spread(search: Search, max_moves: int) -> Plan:
    """Greedy: each step makes the move that lowers the total crowding most."""
    return greedy(search, Objective.SPREAD_TENANTS, spread_cost(search), _best_move, max_moves)


def _best_move(search: Search) -> tuple[int, Move] | None:
    by_group = groups(search)
    best: tuple[tuple[int, int, str], int, Move] | None = None
    for (_, host), vms in sorted(by_group.items()):
        if crowding(vms, search.cpu_cells(host)) <= 0:
            continue
        use = Counter(c for p in vms for c in set(p.host_cells))
        for p in vms:
            shared = [c for c in p.host_cells if use[c] > 1]
            if not shared or not is_movable(p):
                continue
            for new in _targets(search, p, vms):
                gain, after = _gain(search, by_group, p, new)
                if gain <= 0:
                    continue
                move = make_move(p, new, _reason(p, new, vms, shared, after))
                key = (-gain, move.cost_kib, p.vm)
                if best is None or key < best[0]:
                    best = (key, gain, move)
    return None if best is None else (best[1], best[2])


def _targets(search: Search, p: Placement, vms: list[Placement]) -> list[Placement]:
    """A re-pin onto cells none of the tenant's other VMs on the host use, and the engine's choice on
    another host."""
    theirs = frozenset(c for q in vms if q.vm != p.vm for c in q.host_cells)
    req = move_request(p, search.iso(p.tenant))
    found = [search.replace_vm(p, replace(req, host=p.host), theirs)]
    if len(search.on_host) > 1:
        found.append(search.replace_vm(p, req, None))
    return [new for new in found if new is not None]


def _gain(
    search: Search, by_group: dict[Group, list[Placement]], old: Placement, new: Placement
) -> tuple[int, tuple[tuple[str, int, int], ...]]:
    """How much the total drops, and (host, before, after) of each (tenant, host) the move touches."""
    touched = []
    for host in dict.fromkeys((old.host, new.host)):
        vms = by_group.get((old.tenant, host), [])
        moved = [q for q in vms if q.vm != old.vm] + ([new] if new.host == host else [])
        cells = search.cpu_cells(host)
        touched.append((host, crowding(vms, cells), crowding(moved, cells)))
    return sum(b - a for _, b, a in touched), tuple(touched)


def _reason(
    old: Placement, new: Placement, vms: list[Placement], shared: list[int], after: tuple[tuple[str, int, int], ...]
) -> str:
    with_ = sorted(q.vm for q in vms if q.vm != old.vm and set(q.host_cells) & set(shared))
    to = f"cells {list(new.host_cells)}" if new.host == old.host else f"host {new.host} cells {list(new.host_cells)}"
    counts = ", ".join(f"{host} {b} -> {a}" for host, b, a in after)
    return (
        f"tenant {old.tenant} crowds cells {shared} of {old.host} (with {', '.join(with_)}); to {to}; "
        f"its crowded VMs beyond the unavoidable: {counts}"
    )
