"""Benchmark ``host drain``: the hand-written search against OR-Tools CP-SAT, on fragmented fleets.

Usage (from the repository root):
    .venv/bin/python bench/bench_drain.py [--seed N] [--time-limit S] [--sizes 10,100,1000]

Fleets as in ``bench_rebalance.py`` (hosts of 4 cells x 16 cores x 2
threads, 256 GiB and 2 GPUs per cell; 20 requests per host, more than fit,
placed with ``pack``), then a seeded share of the VMs released: a third
(``loose``) or a twentieth (``tight``, where a drain has to pack). Each
fleet's three fullest hosts are drained in turn (each from the same
state), once per solver, with the CLI's time limit. One row per fleet and
solver: VMs on the drained hosts, VMs moved and left, the locality cost of
the moved VMs (guest cells beyond one, off-cell GPUs), the seconds per
plan (mean) and, for CP-SAT, the largest gap to its bound.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from bench_rebalance import synthetic

from vnuma.placement.model import Placement
from vnuma.placement.rebalance import FleetState, Objective, Plan, plan_moves

SOLVERS = ("search", "cp-sat")


def _cost(p: Placement) -> int:
    off = sum(1 for d in p.devices if d.host_cell not in p.host_cells)
    return len(p.cells) - 1 + off


def _fullest(state: FleetState, n: int) -> list[str]:
    count = Counter(p.host for p in state.placements)
    return [h for h, _ in sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    print(f"time limit {args.time_limit:g} s, seed {args.seed}\n")
    print("| fleet | hosts | VMs | on drained hosts | solver | moved | left | locality cost | s/plan | gap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for hosts in (int(x) for x in args.sizes.split(",")):
        for label, share in (("loose", 1 / 3), ("tight", 1 / 20)):
            state = synthetic(hosts, 20 * hosts, args.seed, share)
            targets = _fullest(state, 3)
            on = sum(1 for p in state.placements if p.host in targets)
            for solver in SOLVERS:
                moved = left = cost = 0
                took, gaps = 0.0, []
                for host in targets:
                    most = sum(1 for p in state.placements if p.host == host)
                    start = time.perf_counter()
                    plan: Plan = plan_moves(
                        state, Objective.DRAIN, most, None, args.time_limit, clock=time.monotonic, drain=host,
                        solver=solver,
                    )
                    took += time.perf_counter() - start
                    moved, left = moved + len(plan.moves), left + len(plan.left)
                    cost += sum(_cost(m.placement) for m in plan.moves)
                    if plan.solver == "cp-sat":
                        gaps.append(plan.gap)
                gap = "-" if solver == "search" else (
                    "n/a" if not gaps or None in gaps else f"{max(g for g in gaps if g is not None):.1%}"
                )
                print(
                    f"| {label} | {hosts} | {len(state.placements)} | {on} | {solver} | {moved} | {left} | {cost} | "
                    f"{took / len(targets):.2f} | {gap} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
