"""NICs beside GPUs: decision time of ``--gpus 2 --nics per-gpu`` against ``--gpus 2`` on a DGX-like fleet.

The fleet: ``--hosts`` copies of the DGX-like host of the tests (two sockets,
eight PCIe switches each with 2 GPUs and 2 NICs with 8 VFs each, one switch
behind a second level; ``tests/data/nodedev/dgx-like.xml`` on a two-cell
16-CPU capabilities file). Requests of 1 vCPU, 1 GiB in 4 KiB pages and 2
GPUs are placed one after another on a fresh fleet (the engine's fast path,
as ``vnuma place`` and ``simulate`` use it) until ``--requests`` are decided;
once with ``--nics per-gpu`` (``pxb``), once without. Prints p50/p99 per
decision and requests/s of each, and the ratio the issue bounds (2x).

    .venv/bin/python bench/bench_nics.py [--hosts 1000] [--requests 4000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.topology import PAGE_4K, Host

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def fleet_hosts(n: int) -> list[Host]:
    base = parse_capabilities((DATA / "capabilities" / "x86-2cell-smt-resctrl.xml").read_bytes(), name="dgx")
    devices = with_parent_bridges(parse_nodedev_file_content((DATA / "nodedev" / "dgx-like.xml").read_bytes(), "d"))
    host = replace(base, devices=devices)
    return [replace(host, name=f"dgx-{i:05d}") for i in range(n)]


def run(hosts: list[Host], requests: int, per_gpu: bool) -> tuple[list[float], int]:
    fleet = Fleet(hosts)
    times: list[float] = []
    placed = 0
    for i in range(requests):
        req = VmRequest(f"vm-{i}", "t", 1, 1024 * 1024, gpus=2, page_size_kib=PAGE_4K, nics_per_gpu=per_gpu)
        t0 = time.perf_counter()
        chosen = place(req, fleet, explain=False).chosen
        times.append((time.perf_counter() - t0) * 1e3)
        if chosen is None:
            break
        fleet.add(chosen)
        placed += 1
    return times, placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=4000)
    args = parser.parse_args()
    hosts = fleet_hosts(args.hosts)
    print(f"fleet: {args.hosts} DGX-like hosts (16 GPUs, 17 NICs each); {args.requests} requests of 2 GPUs\n")
    print("| request | placed | p50 ms | p99 ms | requests/s |")
    print("|---|---|---|---|---|")
    medians = {}
    for per_gpu in (False, True):
        times, placed = run(hosts, args.requests, per_gpu)
        ordered = sorted(times)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        label = "--gpus 2 --nics per-gpu" if per_gpu else "--gpus 2"
        medians[per_gpu] = statistics.median(times)
        print(f"| `{label}` | {placed} | {medians[per_gpu]:.2f} | {p99:.2f} | {len(times) / (sum(times) / 1e3):,.0f} |")
    print(f"\nper-gpu / without NICs (p50): {medians[True] / medians[False]:.2f}x (target: at most 2x)")


if __name__ == "__main__":
    main()
