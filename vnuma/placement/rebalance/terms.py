"""Goals that are not a sum over VMs, as CP-SAT terms for the joint plan (:mod:`.joint`).

Pure: no I/O. ``locality`` is a sum of per-VM costs, so each candidate
carries its own (:func:`.locality.locality_cost`). ``fragmentation`` and
``spread-tenants`` depend on which VMs end up together on a cell; here they
are written over the variables ``x[v, k]`` of :mod:`.assign` (an
:data:`.assign.Extra`), for the cells and (tenant, host) pairs a candidate
touches. Everything else is constant under the model's choices. The
counts follow the objectives' own definitions (:func:`.fragmentation.partly_used`,
:func:`.spread.crowding`); the plan's values are then taken by those
functions on the replayed moves, not from the model.
"""

from __future__ import annotations

from typing import Any

from vnuma.placement.model import Placement
from vnuma.placement.rebalance.assign import Candidate, Choice, Extra, Room
from vnuma.placement.rebalance.search import Search

Terms = list[tuple[int, Any]]


def partly_used_terms(search: Search, scale: int) -> Extra:
    """``scale`` per CPU cell a candidate touches that ends partly used: some VM uses it (a taken candidate,
    or a VM outside the model) and the taken candidates' threads do not fill what is free there."""

    def terms(model: Any, x: dict[Choice, Any], candidates: dict[str, list[Candidate]], room: Room) -> Terms:
        touching: dict[tuple[str, int], dict[Choice, int]] = {}
        for cs in candidates.values():
            for c in cs:
                for (host, cell, resource), n in c.use.items():
                    if cell in search.fleet.state(host).cell_by_id:  # CPU cells only: partly_used's cells
                        held = touching.setdefault((host, cell), {})
                        held[(c.vm, c.rank)] = held.get((c.vm, c.rank), 0) + (n if resource == "threads" else 0)
        out: Terms = []
        for (host, cell), held in sorted(touching.items()):
            partly = model.NewBoolVar(f"partly_{host}_{cell}")
            full = model.NewBoolVar(f"full_{host}_{cell}")
            threads = sum(n * x[choice] for choice, n in held.items() if n)
            # Linear (threads <= cap holds already): a tighter relaxation than full => threads == cap.
            model.Add(threads >= room.cap.get((host, cell, "threads"), 0) * full)
            if (host, cell) in room.occupied:
                model.Add(partly >= 1 - full)
            else:
                used = model.NewBoolVar(f"used_{host}_{cell}")
                for choice in held:
                    model.AddImplication(x[choice], used)
                model.Add(partly >= used - full)
            out.append((scale, partly))
        return out

    return terms


def crowding_terms(search: Search, scale: int) -> Extra:
    """``scale`` per VM crowded with another of its tenant on a cell, less the unavoidable (more VMs than
    the host has CPU cells), for each (tenant, host) a candidate lands on."""

    def terms(model: Any, x: dict[Choice, Any], candidates: dict[str, list[Candidate]], room: Room) -> Terms:
        modelled: dict[tuple[str | None, str], list[tuple[Choice, Placement]]] = {}
        for cs in candidates.values():
            for c in cs:
                modelled.setdefault((c.placement.tenant, c.placement.host), []).append(((c.vm, c.rank), c.placement))
        fixed: dict[tuple[str | None, str], list[Placement]] = {}
        for host in sorted({h for _, h in modelled}):
            for p in search.placements_on(host):
                if p.vm not in candidates:
                    fixed.setdefault((p.tenant, host), []).append(p)
        out: Terms = []
        for (tenant, host), mine in sorted(modelled.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            out += _group(model, x, fixed.get((tenant, host), []), mine, search.cpu_cells(host), scale,
                          f"{tenant}_{host}")
        return out

    return terms


def _group(
    model: Any, x: dict[Choice, Any], fixed: list[Placement], mine: list[tuple[Choice, Placement]], cells: int,
    scale: int, tag: str,
) -> Terms:
    """One (tenant, host): crowded VMs (fixed ones and taken candidates) less the unavoidable."""
    const: dict[int, int] = {}
    chosen: dict[int, list[Any]] = {}
    for p in fixed:
        for cell in set(p.host_cells):
            const[cell] = const.get(cell, 0) + 1
    for choice, p in mine:
        for cell in set(p.host_cells):
            chosen.setdefault(cell, []).append(x[choice])
    shared: dict[int, Any] = {}  # cell -> True (shared whatever the model chooses) or a variable
    for cell in sorted(set(const) | set(chosen)):
        k, vs = const.get(cell, 0), chosen.get(cell, [])
        if k >= 2:
            shared[cell] = True
        elif k + len(vs) >= 2:
            s = shared[cell] = model.NewBoolVar(f"shared_{tag}_{cell}")
            model.Add(k + sum(vs) <= 1 + (k + len(vs)) * s)
    out: Terms = []
    for p, choice in [(p, None) for p in fixed] + [(p, c) for c, p in mine]:
        on = [shared[c] for c in sorted(set(p.host_cells)) if c in shared]
        if not on or (choice is None and any(s is True for s in on)):
            continue  # never crowded, or crowded whatever the model chooses
        crowded = model.NewBoolVar(f"crowded_{tag}_{p.vm}_{choice[1] if choice else 'f'}")
        for s in on:
            if choice is None:
                model.Add(crowded >= s)
            elif s is True:
                model.AddImplication(x[choice], crowded)
            else:
                model.Add(crowded >= x[choice] + s - 1)
        out.append((scale, crowded))
    most = len(fixed) + len({vm for (vm, _), _ in mine})
    if most > cells:  # the pigeonhole credit: max(0, n - C + 1) once n > C
        top = most - cells + 1
        over = model.NewBoolVar(f"over_{tag}")
        unavoidable = model.NewIntVar(0, top, f"unavoidable_{tag}")
        n = len(fixed) + sum(x[c] for c, _ in mine)
        model.Add(n >= cells + 1).OnlyEnforceIf(over)
        model.Add(unavoidable <= top * over)
        model.Add(unavoidable <= n - cells + 1 + cells * (1 - over))
        # As top - credit, a term >= 0: the objective stays >= 0, so the gap is a share of it.
        short = model.NewIntVar(0, top, f"short_{tag}")
        model.Add(short == top - unavoidable)
        out.append((scale, short))
    return out
