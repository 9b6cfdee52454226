"""Benchmark ``rebalance --solver``: the greedy search against OR-Tools CP-SAT, per objective.

Usage (from the repository root):
    .venv/bin/python bench/bench_solver.py [--seed N] [--sizes 10,100,1000] [--max-moves N]
        [--time-limit S] [--time-limit-large S]

Two fragmented fleets per size, built with ``synthetic`` from
``bench_rebalance.py`` (hosts of 4 cells x 16 cores x 2 threads, 256 GiB and
2 GPUs per cell, 20 requests per host, more than fit, placed with ``pack``):

* ``loose``: then a seeded third of the VMs released (as ``bench_drain.py``).
  Pack leaves almost no VM split here, so ``locality`` has little to do.
* ``split``: ``loose``, then 4 more requests per host of 12-24 vCPUs (auto
  cells) placed on what is left, which splits many of them over cells, then
  a seeded twentieth of all VMs released: a tight fleet with split VMs.

``locality``, ``fragmentation``, ``spread-tenants`` and ``room`` (for the
shapes ``bench_rebalance.py`` asks: the issue's example, 32 vCPUs, 256 GiB,
2 GPUs, and the smallest N-cell shape that does not fit now; then 2, 3 and
4 whole cells, 32 vCPUs and 32 GiB each, which take several moves;
``1 -> 0``: room made) are planned on each fleet, once per solver, from the same state, with the process clock and the
time limit (``--time-limit-large`` for fleets of 1,000 hosts or more). One
row per fleet, objective and solver asked: the solver whose plan came back
(``search`` when the greedy's was better), the objective before -> after,
moves, memory to migrate, whole CPU cells free (no VM's guest cell on them:
room for a whole-cell VM) before -> after, seconds for the plan and, for
CP-SAT, its gap to the best bound (0.0 %: proven optimal for its model).
"""

from __future__ import annotations

import argparse
import random
import time

from bench_rebalance import TENANTS, _release, room_shapes, synthetic

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance import FleetState, Plan, plan_moves
from vnuma.topology import KIB_PER_GIB

OBJECTIVES = (Objective.LOCALITY, Objective.FRAGMENTATION, Objective.SPREAD_TENANTS)
SOLVERS = ("search", "cp-sat")


def split(hosts: int, seed: int) -> FleetState:
    """The ``split`` fleet (see the module doc)."""
    state = synthetic(hosts, 20 * hosts, seed)
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    rng = random.Random(seed + 1)
    for i in range(4 * hosts):
        vcpus = rng.choice((12, 16, 20, 24))
        req = VmRequest(f"late-{i:05d}", rng.choice(TENANTS), vcpus, vcpus * 2 * KIB_PER_GIB, 0, None)
        chosen = place(req, fleet, Strategy.PACK, explain=False).chosen
        if chosen is not None:
            fleet.add(chosen, Isolation.CORE)
    return _release(state.hosts, fleet.placements(), dict(state.isolation), rng, 1 / 20)


def free_cells(state: FleetState, plan: Plan | None = None) -> int:
    """CPU cells no VM has a guest cell on, before ``plan`` or (given) after its moves."""
    where = {p.vm: (p.host, p.host_cells) for p in state.placements}
    for m in plan.moves if plan is not None else ():
        where[m.vm] = (m.to_host, m.to_cells)
    used = {(host, c) for host, cells in where.values() for c in cells}
    return sum(1 for h in state.hosts for c in h.cells if c.cpus and (h.name, c.id) not in used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--max-moves", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--time-limit-large", type=float, default=5.0, help="for fleets of 1,000 hosts or more")
    args = parser.parse_args()
    print(f"max moves {args.max_moves}, time limit {args.time_limit:g} s ({args.time_limit_large:g} s from 1,000 "
          f"hosts), seed {args.seed}\n")
    print("| fleet | hosts | VMs | objective | asked | plan by | before -> after | moves | migrates | free cells | "
          "seconds | gap |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for hosts, kind in ((int(x), k) for x in args.sizes.split(",") for k in ("loose", "split")):
        state = synthetic(hosts, 20 * hosts, args.seed) if kind == "loose" else split(hosts, args.seed)
        limit = args.time_limit_large if hosts >= 1000 else args.time_limit
        free = free_cells(state)
        asks: list[tuple[str, Objective, VmRequest | None]] = [(str(o), o, None) for o in OBJECTIVES]
        asks += [(label, Objective.ROOM, shape) for label, shape in room_shapes(state)]
        asks += [(f"room {n} whole cells", Objective.ROOM,
                  VmRequest("room", None, 32 * n, 32 * n * KIB_PER_GIB, 0, n)) for n in (2, 3, 4)]
        for label, objective, shape in asks:
            for solver in SOLVERS:
                start = time.perf_counter()
                plan = plan_moves(state, objective, args.max_moves, shape, limit, clock=time.monotonic, solver=solver)
                took = time.perf_counter() - start
                gib = sum(m.cost_kib for m in plan.moves) / KIB_PER_GIB
                gap = "-" if plan.solver == "search" else ("n/a" if plan.gap is None else f"{plan.gap:.1%}")
                print(
                    f"| {kind} | {hosts} | {len(state.placements)} | {label} | {solver} | {plan.solver} | "
                    f"{plan.before} -> {plan.after} | {len(plan.moves)} | {gib:.0f} GiB | "
                    f"{free} -> {free_cells(state, plan)} | {took:.2f} | {gap} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
