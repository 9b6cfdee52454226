"""Placement quality on many traces: `pack` and `gpu-first` against `first-fit` and OpenStack Nova.

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

Beside each strategy: the seeds where it placed at least as many VMs as
``first-fit`` (``>=ff``), the GPUs stranded at the end (:func:`stranded_gpus`:
free GPUs on hosts where no GPU request of the trace fits any more for want
of pCPUs or memory; min/med/max) and the seeds where that is no more than
``first-fit``'s (``<=ff``). A second table sets ``first-fit`` and ``pack``
against OpenStack Nova 34's own NUMA fit (``bench_nova.py``: the requests
Nova can express, the same for both; fleet-1000 is left out, Nova takes
minutes per trace there): per scenario the seeds where vnuma placed at
least as many VMs, vCPUs and GPUs, the worst VM difference and the spread.
Nova's outcomes are cached under ``bench/.nova-cache`` (deterministic).

    .venv/bin/python bench/bench_quality.py [--seeds 20] [--scenarios a,b] [--nova-limit 400]
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from bench_nova import expressible, nova_replay, vnuma_replay

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.simulate import SimulationReport, run
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


def stranded_gpus(trace: Trace, report: SimulationReport) -> int:
    """Free GPUs at the end on hosts where no GPU request of the trace fits any more for want of pCPUs or memory.

    Each GPU request of the trace (distinct shapes) is asked of the engine on each host with free GPUs, its GPU
    count cut to the host's free GPUs (a request asking more GPUs than are free would still use them, on a host
    with room): a host none of them fits strands its free GPUs.
    """
    fleet = Fleet(trace.hosts, [p for p in report.placements if p is not None],
                  {r.tenant: Isolation.CORE for r in trace.requests})
    shapes = {(r.vcpus, r.memory_kib, r.numa_nodes, r.page_size_kib, r.cpu_policy, r.thread_policy, r.gpus): r
              for r in trace.requests if r.gpus}
    asks = sorted(shapes.values(), key=lambda r: (r.vcpus or 0, r.memory_kib or 0))
    stranded = 0
    for hs in fleet.states:
        free = hs.gpus_free
        if not free:
            continue
        for r in asks:
            req = replace(r, name="stranded-probe", host=hs.name, gpus=min(r.gpus, free), nics=0, nics_per_gpu=False)
            if place(req, fleet, Strategy.FIRST_FIT).chosen is not None:
                break
        else:
            stranded += free
    return stranded


@dataclass
class Seeds:
    """One scenario's figures per strategy, one entry per seed."""

    placed: dict[str, list[int]] = field(default_factory=dict)
    share: dict[str, list[float]] = field(default_factory=dict)
    stranded: dict[str, list[int]] = field(default_factory=dict)
    non_adjacent: dict[str, int] = field(default_factory=dict)
    avoidable: dict[str, int] = field(default_factory=dict)
    versus_nova: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    """Per strategy and seed: (VMs, vCPUs, GPUs) placed minus Nova's, on the trace Nova can express."""
    exact: int = 0


def _versus_nova(name: str, seed: int, doc: dict[str, Any], seeds: Seeds, limit: float) -> None:
    nova_doc, _ = expressible(doc)
    nova = nova_replay(nova_doc, limit, cache=True)
    if nova is None:
        return
    for strategy in (Strategy.FIRST_FIT, Strategy.PACK):
        got = vnuma_replay(nova_doc, strategy.value)
        diff = (got["vms"] - nova["vms"], got["vcpus"] - nova["vcpus"], got["gpus"] - nova["gpus"])
        seeds.versus_nova.setdefault(strategy.value, []).append(diff)


def measure(name: str, seeds: range, nova_limit: float) -> Seeds:
    """Every strategy on every seed of scenario ``name`` (``isolate`` requests removed)."""
    out = Seeds()
    for seed in seeds:
        doc = make_trace(name, seed)
        doc["requests"] = [r for r in doc["requests"] if r["thread_policy"] != "isolate"]
        trace = load_trace(json.dumps(doc).encode(), f"{name}-{seed}")
        low, high = gpu_bounds(trace)
        out.exact += low == high
        for strategy in STRATEGIES:
            key = strategy.value
            report = run(trace, strategy)
            out.placed.setdefault(key, []).append(sum(1 for p in report.placements if p is not None))
            out.share.setdefault(key, []).append((report.gpus_used + report.gpus_partitioned) / (high or 1))
            out.stranded.setdefault(key, []).append(stranded_gpus(trace, report))
            out.non_adjacent[key] = out.non_adjacent.get(key, 0) + report.multi_node_non_adjacent
            if report.multi_node_non_adjacent:
                out.avoidable[key] = out.avoidable.get(key, 0) + non_adjacent_avoidable(trace, strategy)
        if nova_limit > 0:
            _versus_nova(name, seed, doc, out, nova_limit)
    return out


def _spread(xs: list[int] | list[float]) -> str:
    got = sorted(xs)
    return f"{got[0]:g}/{statistics.median(got):g}/{got[-1]:g}"


def _per_seed(name: str, s: Seeds) -> None:
    ff = Strategy.FIRST_FIT.value
    for strategy in STRATEGIES:
        key = strategy.value
        share = sorted(s.share[key])
        wins = sum(1 for p, f in zip(s.placed[key], s.placed[ff], strict=True) if p >= f)
        calm = sum(1 for p, f in zip(s.stranded[key], s.stranded[ff], strict=True) if p <= f)
        met = sum(1 for x in share if x >= 0.97)
        print(f"{name:17} {key:10} {_spread(s.placed[key]):>16} {wins:>3}/{len(share):<3} "
              f"{share[0]:>6.1%}/{statistics.median(share):>6.1%} {met:>3}/{len(share):<2} "
              f"{s.exact:>3}/{len(share):<2} {s.non_adjacent.get(key, 0):>7} {s.avoidable.get(key, 0):>5} "
              f"{_spread(s.stranded[key]):>11} {calm:>3}/{len(share):<2}")


def _nova_rows(name: str, s: Seeds) -> None:
    for key, diffs in s.versus_nova.items():
        n = len(diffs)
        vms, cpus, gpus = (sum(1 for d in diffs if d[i] >= 0) for i in range(3))
        worst = min(d[0] for d in diffs)
        print(f"{name:17} {key:10} {n:>5} {vms:>4}/{n:<3} {cpus:>4}/{n:<3} {gpus:>4}/{n:<3} {worst:>9} "
              f"{_spread([d[0] for d in diffs]):>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, default all")
    parser.add_argument("--nova-limit", type=float, default=400.0,
                        help="seconds Nova may take per trace (0: no Nova); fleet-1000 runs without Nova")
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    results = {}
    print(f"{'scenario':17} {'strategy':10} {'placed min/med/max':>16} {'>=ff':>7} {'GPU share min/med':>13} "
          f"{'>=97%':>6} {'exact':>6} {'non-adj':>7} {'avoid':>5} {'stranded':>11} {'<=ff':>6}")
    for name in args.scenarios.split(","):
        results[name] = measure(name, seeds, 0 if name == "fleet-1000" else args.nova_limit)
        _per_seed(name, results[name])
    print(f"\n{'scenario':17} {'vs Nova':10} {'seeds':>5} {'VMs>=':>8} {'vCPUs>=':>8} {'GPUs>=':>8} "
          f"{'worst VMs':>9} {'VMs - Nova':>14}")
    for name, s in results.items():
        _nova_rows(name, s)


if __name__ == "__main__":
    main()
