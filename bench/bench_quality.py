"""Placement quality on many traces: `pack` and `gpu-first` against the `first-fit` baseline.

For each example scenario and seeds 1..N (default 20), the generated trace
without its `isolate` requests (a first-fit scheduler of the Nova kind
refuses them on SMT hosts) is simulated under each strategy. Prints per
scenario and strategy the VMs placed (min / median / max over the seeds),
on how many seeds `pack` placed at least as many VMs as `first-fit`, the
GPUs allocated (passed through whole or holding partitions) as a share of
the most any valid placement of the trace could allocate, and the multi-cell VMs on
non-adjacent cells: all of them, and those for which an adjacent set of as
many cells fitted on some host when the VM was placed (the goal is 0: each
such VM is checked by asking the engine for every adjacent cell set of
every host, the others' cells avoided, on the ledger as it was then).

The most GPUs a valid placement could allocate (``OPT``) is bracketed, per
trace: ``low`` is a valid placement's (the trace's GPU requests alone,
most GPUs first, under ``gpu-first``); ``high`` a relaxation's (CP-SAT: the
GPU requests that fit alone on an empty host, each counted for its GPUs or
its partitions, at most the fleet's GPUs, their vCPUs within the fleet's
pCPUs and their memory within its memory; the solver's bound when it is
not proven within 10 s). The share printed is allocated / ``high``, a share
of ``OPT`` never overstated; ``exact`` counts the seeds where
``low == high`` (``OPT`` known).

    .venv/bin/python bench/bench_quality.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from itertools import combinations

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.simulate import run
from vnuma.sources.trace import Trace, load_trace
from vnuma.sources.tracegen import SCENARIOS, make_trace

STRATEGIES = (Strategy.FIRST_FIT, Strategy.PACK, Strategy.GPU_FIRST)


def _adjacent_fit(fleet: Fleet, req: VmRequest, n: int, strategy: Strategy) -> bool:
    """Whether some host could take ``req`` on an adjacent set of ``n`` CPU cells now."""
    for hs in fleet.states:
        cpu = [c.id for c in hs.cells if c.threads_total]
        for combo in combinations(cpu, n):
            if hs.is_adjacent(combo):
                avoid = frozenset((hs.name, c) for c in cpu if c not in combo)
                if place(replace(req, host=hs.name, numa_nodes=n, avoid_cells=avoid), fleet, strategy,
                         explain=False).chosen is not None:
                    return True
    return False


def non_adjacent_avoidable(trace: Trace, strategy: Strategy) -> int:
    """Replays ``trace`` as ``simulate`` does; counts the multi-cell VMs placed on non-adjacent cells while an
    adjacent fit of as many cells existed."""
    fleet = Fleet(trace.hosts, (), {r.tenant: Isolation.CORE for r in trace.requests})
    found = 0
    for r in trace.requests:
        req = r
        p = place(req, fleet, strategy, explain=False).chosen
        if p is None:
            continue
        if len(p.cells) > 1 and not fleet.state(p.host).is_adjacent(p.host_cells):
            found += _adjacent_fit(fleet, req, len(p.cells), strategy)
        fleet.record(p)
    return found


def gpu_bounds(trace: Trace) -> tuple[int, int]:
    """(low, high) around the most GPUs a valid placement of ``trace`` allocates (see the module doc)."""
    from ortools.sat.python import cp_model

    asks = [r for r in trace.requests if r.gpus or r.partition is not None]
    report = run(replace(trace, requests=tuple(sorted(asks, key=lambda r: -r.gpus))), Strategy.GPU_FIRST)
    low = report.gpus_used + report.gpus_partitioned
    fits = [r for r in asks if _fits_alone(trace, r)]
    fleet_gpus = sum(1 for h in trace.hosts for d in h.devices if d.kind == "gpu")
    model = cp_model.CpModel()
    take = [(r, r.gpus or (r.partition.count if r.partition else 0), model.NewBoolVar(r.name)) for r in fits]
    model.Add(sum(g * y for _, g, y in take) <= fleet_gpus)
    model.Add(sum(r.vcpus * y for r, _, y in take) <= sum(len(h.cpu_ids - h.reserved_cpus) for h in trace.hosts))
    mib = sum(c.memory_kib for h in trace.hosts for c in h.cells if c.cpus) // 1024
    model.Add(sum((r.memory_kib or 0) // 1024 * y for r, _, y in take) <= mib)
    model.Maximize(sum(g * y for _, g, y in take))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 10
    solver.parameters.num_workers = 1
    solver.Solve(model)
    return low, max(low, int(solver.BestObjectiveBound()))


def _fits_alone(trace: Trace, r: VmRequest) -> bool:
    """Does ``r`` fit on some empty host of the trace's fleet (one of each host shape)?"""
    req = replace(r, tenant=None)
    shapes = {(len(h.cells), len(h.devices), len(h.cpu_ids)): h for h in trace.hosts}
    return any(place(req, Fleet([h]), Strategy.GPU_FIRST, explain=False).chosen is not None for h in shapes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, default all")
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    print(f"{'scenario':20} {'strategy':10} {'placed min/med/max':>20} {'pack>=ff':>9} "
          f"{'GPU share min/med':>18} {'>=95%':>6} {'exact':>6} {'non-adj':>8} {'avoidable':>9}")
    for name in args.scenarios.split(","):
        placed: dict[Strategy, list[int]] = {s: [] for s in STRATEGIES}
        shares: dict[Strategy, list[float]] = {s: [] for s in STRATEGIES}
        non_adjacent: dict[Strategy, int] = {s: 0 for s in STRATEGIES}
        avoidable: dict[Strategy, int] = {s: 0 for s in STRATEGIES}
        exact = 0
        for seed in seeds:
            doc = make_trace(name, seed)
            doc["requests"] = [r for r in doc["requests"] if r["thread_policy"] != "isolate"]
            trace = load_trace(json.dumps(doc).encode(), f"{name}-{seed}")
            low, high = gpu_bounds(trace)
            exact += low == high
            for strategy in STRATEGIES:
                report = run(trace, strategy)
                placed[strategy].append(sum(1 for p in report.placements if p is not None))
                shares[strategy].append((report.gpus_used + report.gpus_partitioned) / (high or 1))
                non_adjacent[strategy] += report.multi_node_non_adjacent
                if report.multi_node_non_adjacent:
                    avoidable[strategy] += non_adjacent_avoidable(trace, strategy)
        wins = sum(1 for p, f in zip(placed[Strategy.PACK], placed[Strategy.FIRST_FIT], strict=True) if p >= f)
        for strategy in STRATEGIES:
            got = sorted(placed[strategy])
            share = sorted(shares[strategy])
            spread = f"{got[0]}/{statistics.median(got):g}/{got[-1]}"
            versus = f"{wins}/{len(got)}" if strategy is Strategy.PACK else "-"
            met = f"{sum(1 for x in share if x >= 0.95)}/{len(share)}"
            print(f"{name:20} {strategy.value:10} {spread:>20} {versus:>9} "
                  f"{share[0]:>8.1%}/{statistics.median(share):>7.1%} {met:>6} {exact:>3}/{len(share):<2} "
                  f"{non_adjacent[strategy]:>8} {avoidable[strategy]:>9}")


if __name__ == "__main__":
    main()
