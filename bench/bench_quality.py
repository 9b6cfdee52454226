"""Placement quality on many traces: `pack` and `gpu-first` against the `first-fit` baseline.

For each example scenario and seeds 1..N (default 20), the generated trace
without its `isolate` requests (a first-fit scheduler of the Nova kind
refuses them on SMT hosts) is simulated under each strategy. Prints per
scenario and strategy the VMs placed (min / median / max over the seeds),
on how many seeds `pack` placed at least as many VMs as `first-fit`, the
GPUs allocated as a share of what any placement could allocate (the fewer
of the fleet's GPUs and the GPUs requested), and the multi-cell VMs on
non-adjacent cells.

    .venv/bin/python bench/bench_quality.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics

from vnuma.placement.model import Strategy
from vnuma.simulate import run
from vnuma.sources.trace import load_trace
from vnuma.sources.tracegen import SCENARIOS, make_trace

STRATEGIES = (Strategy.FIRST_FIT, Strategy.PACK, Strategy.GPU_FIRST)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    seeds = range(1, parser.parse_args().seeds + 1)
    print(f"{'scenario':20} {'strategy':10} {'placed min/med/max':>20} {'pack>=ff':>9} "
          f"{'GPU share min/med':>18} {'non-adj':>8}")
    for name in SCENARIOS:
        placed: dict[Strategy, list[int]] = {s: [] for s in STRATEGIES}
        shares: dict[Strategy, list[float]] = {s: [] for s in STRATEGIES}
        non_adjacent: dict[Strategy, int] = {s: 0 for s in STRATEGIES}
        for seed in seeds:
            doc = make_trace(name, seed)
            doc["requests"] = [r for r in doc["requests"] if r["thread_policy"] != "isolate"]
            trace = load_trace(json.dumps(doc).encode(), f"{name}-{seed}")
            fleet_gpus = sum(1 for h in trace.hosts for d in h.devices if d.kind == "gpu")
            bound = min(fleet_gpus, sum(r.gpus for r in trace.requests)) or 1
            for strategy in STRATEGIES:
                report = run(trace, strategy)
                placed[strategy].append(sum(1 for p in report.placements if p is not None))
                shares[strategy].append(report.gpus_used / bound)
                non_adjacent[strategy] += report.multi_node_non_adjacent
        wins = sum(1 for p, f in zip(placed[Strategy.PACK], placed[Strategy.FIRST_FIT], strict=True) if p >= f)
        for strategy in STRATEGIES:
            got = sorted(placed[strategy])
            share = sorted(shares[strategy])
            spread = f"{got[0]}/{statistics.median(got):g}/{got[-1]}"
            versus = f"{wins}/{len(got)}" if strategy is Strategy.PACK else "-"
            print(f"{name:20} {strategy.value:10} {spread:>20} {versus:>9} "
                  f"{share[0]:>8.1%}/{statistics.median(share):>7.1%} {non_adjacent[strategy]:>8}")


if __name__ == "__main__":
    main()
