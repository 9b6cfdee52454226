"""What cache slices and bandwidth caps cost the engine: decisions on the example traces with resctrl added.

Each example trace's hosts get an L3 with CAT and MBA per CPU cell (64 ways of 2 MiB, one way kept for the
host, 128 classes; caps in steps of 10 up to 10,000 per domain: room enough that the same VMs fit either
way), and the trace's requests are decided and recorded one after another as `vnuma simulate` does, twice:
asking no slice, then every request asking one way and a 10 % cap. Prints the mean and p50 decision time of
each and the ratio (the issue's bound: at most 1.2). Timings are the best of --repeat runs.

    .venv/bin/python bench/bench_resctrl.py [--traces examples/traces] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace
from vnuma.topology import Host
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl, ResctrlPolicy

BOUND = 1.2


def with_resctrl(host: Host) -> Host:
    control = (CacheControl(2048, 2048, CacheType.BOTH, 128),)
    cells = [c for c in host.cells if c.cpus]
    banks = tuple(CacheBank(c.id, 3, CacheType.BOTH, 64 * 2048, c.cpu_ids, control) for c in cells)
    nodes = tuple(BandwidthNode(c.id, c.cpu_ids, 10, 10, 128) for c in cells)
    return replace(host, resctrl=Resctrl(banks, nodes), resctrl_policy=ResctrlPolicy(1, 10_000))


def decide(hosts: list[Host], requests: list[VmRequest]) -> tuple[list[float], int]:
    """Decision times (µs) and VMs placed."""
    fleet = Fleet(hosts, (), {r.tenant: Isolation.CORE for r in requests})
    times, placed = [], 0
    for req in requests:
        start = time.perf_counter()
        chosen = place(req, fleet, Strategy.PACK, explain=False).chosen
        if chosen is not None:
            fleet.add(chosen, req.isolation)
            placed += 1
        times.append((time.perf_counter() - start) * 1e6)
    return times, placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=Path(__file__).resolve().parent.parent / "examples" / "traces")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| trace | requests | placed without / with slices | mean µs without | mean µs with | p50 µs without "
          "| p50 µs with | mean ratio | bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(args.traces.glob("*.json")):
        trace = load_trace(path.read_bytes(), str(path))
        hosts = [with_resctrl(h) for h in trace.hosts]
        plain = [r for r in trace.requests]
        sliced = [replace(r, llc_ways=1, mem_bw=10) for r in plain]
        best: dict[str, tuple[float, float, int]] = {}
        for _ in range(args.repeat):
            for label, requests in (("without", plain), ("with", sliced)):
                times, placed = decide(hosts, requests)
                mean, p50 = statistics.fmean(times), statistics.median(times)
                if label not in best or mean < best[label][0]:
                    best[label] = (mean, p50, placed)
        (m0, p0, n0), (m1, p1, n1) = best["without"], best["with"]
        print(f"| {path.stem} | {len(plain)} | {n0} / {n1} | {m0:.0f} | {m1:.0f} | {p0:.0f} | {p1:.0f} "
              f"| {m1 / m0:.2f} | {BOUND} |", flush=True)


if __name__ == "__main__":
    main()
