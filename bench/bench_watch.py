"""What one round of `vnuma watch` costs over a large fleet, and how many rows its history takes.

A SQLite inventory of --hosts hosts (2 cells x 16 cores x 2 threads, 2 MiB and 1 GiB pools) with --vms VMs each
(half per cell, 4 pCPUs and 4 GiB each), and per host and round a recorded `virsh domstats --memory --cpu-total`
text (one MBM and one CMT monitor per VM, the format of tests/data/watch) and `virsh freepages --all` text,
parsed as a replay parses them. Round 0 is the baseline (no rates); rounds 1.. are measured: CPU (process
time) of the pure part alone (figures, rules, hysteresis: vnuma.watch) and of a whole round (the pure part
and its one transaction: samples, last readings, retention), and the rows written; and once, the CPU of
reading the inventory's view again (placements and free pages per cell), which a live round does first.
The target: a whole round over 1,000 hosts x 8 VMs in at most 0.5 s of CPU.

    .venv/bin/python bench/bench_watch.py [--hosts 1000] [--vms 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.builders import kept, make_host
from vnuma.inventory import open_inventory
from vnuma.inventory.access import open_access
from vnuma.placement.model import CellAssignment, Isolation, Placement, Tenant
from vnuma.services import Settings
from vnuma.services.watch import Watch
from vnuma.sources.domstats import parse_domstats
from vnuma.sources.freepages import parse_freepages
from vnuma.watch.figures import Reading, figures
from vnuma.watch.hysteresis import Track, step
from vnuma.watch.rules import Thresholds, peaks_with, signals

INTERVAL_S = 10
PAGE_1G = 1_048_576


def build(url: str, hosts: int, vms: int) -> None:
    with open_inventory(url) as inv:
        inv.add_tenant(Tenant("acme", Isolation.CORE))
        for h in range(hosts):
            name = f"host-{h:05d}"
            host = make_host(name, cells=2, cores_per_cell=16, smt=2, memory_gib=256)
            inv.add_host(host)
            for v in range(vms):
                cell, slot = v % 2, v // 2
                core = cell * 16 + slot * 2  # two whole cores: each thread and its sibling
                pcpus = (core, core + 32, core + 1, core + 33)
                assignment = CellAssignment(0, cell, (0, 1, 2, 3), pcpus, 4 * PAGE_1G, PAGE_1G)
                inv.claim(kept(Placement(f"{name}-vm{v}", "acme", name, (assignment,))), Isolation.CORE)


def domstats(host: str, vms: int, i: int) -> str:
    out = []
    for v in range(vms):
        # VM 0 streams 4000 MB/s more in every fourth interval: its counter is the sum of the rates so far
        total = sum(500 + 100 * v + (4000 if v == 0 and k % 4 == 3 else 0) for k in range(1, i + 1)) * 10**7
        out.append("\n".join([
            f"Domain: '{host}-vm{v}'", f"  cpu.time={15 * 10**8 * INTERVAL_S * i}", "  cpu.cache.monitor.count=1",
            "  cpu.cache.monitor.0.name=vcpus_0-3", "  cpu.cache.monitor.0.vcpus=0-3",
            "  cpu.cache.monitor.0.bank.count=1", f"  cpu.cache.monitor.0.bank.0.id={v % 2}",
            "  cpu.cache.monitor.0.bank.0.bytes=4194304", "  memory.bandwidth.monitor.count=1",
            "  memory.bandwidth.monitor.0.name=vcpus_0-3", "  memory.bandwidth.monitor.0.vcpus=0-3",
            "  memory.bandwidth.monitor.0.node.count=1", f"  memory.bandwidth.monitor.0.node.0.id={v % 2}",
            f"  memory.bandwidth.monitor.0.node.0.bytes.local={total * 9 // 10}",
            f"  memory.bandwidth.monitor.0.node.0.bytes.total={total}",
        ]))
    return "\n\n".join(out) + "\n"


def freepages(vms: int) -> str:
    used = vms // 2 * 4
    return "\n".join(f"Node {c}:\n4KiB: 54000000\n2048KiB: 8192\n1048576KiB: {32 - used}\n" for c in (0, 1))


def readings(hosts: int, vms: int, i: int) -> tuple[list[Reading], float]:
    """Round ``i``'s readings and the seconds spent parsing them."""
    texts = [(f"host-{h:05d}", domstats(f"host-{h:05d}", vms, i), freepages(vms)) for h in range(hosts)]
    t0 = time.process_time()
    out = [Reading(name, 1_796_601_600.0 + INTERVAL_S * i, parse_domstats(text, name), parse_freepages(pages, name))
           for name, text, pages in texts]
    return out, time.process_time() - t0


def pure_part(watch: Watch, previous: list[Reading], current: list[Reading]) -> float:
    """CPU seconds of figures, rules and hysteresis over one round, without writing."""
    t = Thresholds()
    t0 = time.process_time()
    for before, after in zip(previous, current, strict=True):
        fig = figures(before, after, watch.on_host.get(after.host, {}), watch.free.get(after.host, {}))
        peaks = {(after.host, d): v for d, v in watch.peaks.get(after.host, {}).items()}
        for s in signals(fig, watch.placements, t, peaks_with(peaks, (fig,))):
            step(watch.tracks.get(s.key, Track()), s.true, t)
    return time.process_time() - t0


def count(url: str) -> int:
    with open_access(url) as access, access.begin(False) as x:
        return int(x.one("SELECT COUNT(*) FROM watch_samples")[0])  # type: ignore[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--vms", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'inventory.db'}"
        t0 = time.perf_counter()
        build(url, args.hosts, args.vms)
        print(f"inventory: {args.hosts} hosts x {args.vms} VMs built in {time.perf_counter() - t0:.1f} s")
        watch = Watch(Settings(url), Thresholds())
        try:
            previous, _ = readings(args.hosts, args.vms, 0)
            watch.run_round(previous)
            c0 = time.process_time()
            watch.refresh(force=True)
            print(f"reading the inventory's view again (a live round does it first when the inventory changed): "
                  f"{time.process_time() - c0:.3f} s CPU")
            print(f"{'round':>5} {'parse s':>8} {'pure CPU s':>11} {'round CPU s':>12} {'round wall s':>13} "
                  f"{'rows':>6} {'rows/VM':>8}")
            per_vm = []
            for i in range(1, args.rounds + 1):
                current, parse_s = readings(args.hosts, args.vms, i)
                pure = pure_part(watch, previous, current)
                rows0 = count(url)
                c0, w0 = time.process_time(), time.perf_counter()
                results = watch.run_round(current)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                assert all(r.written for r in results)
                rows = count(url) - rows0
                per_vm.append(rows / (args.hosts * args.vms))
                print(f"{i:>5} {parse_s:>8.3f} {pure:>11.3f} {cpu:>12.3f} {wall:>13.3f} {rows:>6} {per_vm[-1]:>8.3f}")
                previous = current
        finally:
            watch.close()
    t = Thresholds()
    rounds_a_day = 86_400 // INTERVAL_S
    rows_round = max(per_vm)
    means_minute = rows_round - 1 / args.vms  # the round mark is not averaged
    print(f"rows written per VM per day at {INTERVAL_S}s: {rows_round * rounds_a_day:,.0f} raw "
          f"+ {means_minute * 1440:,.0f} one-minute means")
    print(f"rows kept per VM (steady state): {rows_round * t.history_s / INTERVAL_S:,.0f} raw ({t.history_s}s) "
          f"+ {means_minute * 1440 * t.minutes_days:,.0f} means ({t.minutes_days} days)")


if __name__ == "__main__":
    main()
