"""What one round of `vnuma watch` costs over a large fleet, and how many rows its history takes.

A SQLite inventory of --hosts hosts (2 cells x 16 cores x 2 threads, 2 MiB and 1 GiB pools) with --vms VMs each
(half per cell, 4 pCPUs and 4 GiB each), and per host and round a recorded `virsh domstats --memory --cpu-total`
text (one MBM and one CMT monitor per VM, the format of tests/data/watch) and `virsh freepages --all` text,
parsed as a replay parses them. Round 0 is the baseline (no rates); rounds 1.. are measured: CPU (process
time) of the pure part alone (figures, rules, hysteresis: vnuma.watch) and of a whole round (the pure part
and its one transaction: samples, last readings, retention), and the rows written; and once, the CPU of
reading the inventory's view again (placements and free pages per cell), which a live round does first.
The target: a whole round over 1,000 hosts x 8 VMs in at most 0.5 s of CPU.

--reaction measures instead how fast the loop acts, on the recorded fleet (tests/data/watch/fleet, its
inventory as tests/watch/conftest.make_fleet builds it): replayed with --act propose, then into a fresh
inventory with --act apply (each also with --allow-migrate, and from sample 15 on, once b1's noise is over,
so that b2's turn to memory-bound is alone), per event of a VM the samples from its rule's first true sample (the first
anomalous one) to the event, to its proposal and to its move carried out, and the CPU of the replays.

    .venv/bin/python bench/bench_watch.py [--hosts 1000] [--vms 8] [--rounds 3]
    .venv/bin/python bench/bench_watch.py --reaction
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
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
        peaks = {(after.host, d.domain): watch.peaks.peak((after.host, d.domain)) for d in fig.domains}
        for s in signals(fig, watch.placements, t, peaks_with(peaks, (fig,))):
            step(watch.tracks.get(s.key, Track()), s.true, t)
    return time.process_time() - t0


def count(url: str) -> int:
    with open_access(url) as access, access.begin(False) as x:
        return int(x.one("SELECT COUNT(*) FROM watch_samples")[0])  # type: ignore[index]


def _first_true(db: Path, host: str, vm: str, rule: str, opened_ms: int) -> int:
    """The first sample (ms) of the run of samples, up to the event's opening, in which ``rule`` was true for
    ``vm``: the first anomalous sample (the rule needs k of n, so a quiet sample may lie between)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT at_ms, flags FROM watch_samples WHERE kind = 'vm' AND host = ? AND subject = ? "
                            "AND minute = 0 AND at_ms <= ? ORDER BY at_ms DESC", (host, vm, opened_ms)).fetchall()
    first, quiet = opened_ms, 0
    for at_ms, flags in rows:
        if rule in flags.split(","):
            first, quiet = at_ms, 0
        else:
            quiet += 1
            if quiet >= Thresholds().m:
                break
    return first


def reaction() -> None:
    """How many samples from the first anomalous one to an event, a proposal and a move carried out."""
    from tests.cli.conftest import Cli
    from tests.watch.conftest import FLEET, copy_rounds, make_fleet

    with tempfile.TemporaryDirectory() as tmp:
        base = make_fleet(Cli(Path(tmp) / "base.db")).db
        print(f"{'mode':>19} {'event':>18} {'first anomalous':>16} {'event':>6} {'proposal':>9} {'applied':>8} "
              f"{'replay CPU s':>13}")
        late = copy_rounds(Path(tmp) / "late", lambda sample: sample >= 15)  # b1's noise over: b2 alone
        # off: the replay's own CPU, and the warm-up
        for n, (mode, *more) in enumerate((("off",), ("propose",), ("propose", "--allow-migrate"), ("apply",),
                                           ("apply", "--allow-migrate"), ("propose", "--allow-migrate", "late"),
                                           ("apply", "--allow-migrate", "late"))):
            db = Path(tmp) / f"{n}.db"
            shutil.copy(base, db)
            cli = Cli(db)
            c0 = time.process_time()
            cli.ok("watch", "--domstats-dir", str(late if "late" in more else FLEET), "--act", mode,
                   *(m for m in more if m != "late"))
            mode = "+".join([mode, *(["migrate"] if more else []), *(["15-"] if "late" in more else [])])
            cpu = time.process_time() - c0
            if mode == "off":
                print(f"{mode:>19} {'(measure only)':>18} {'':>16} {'':>6} {'':>9} {'':>8} {cpu:>13.2f}")
            for e in cli.ok("events", "--json").json() if mode != "off" else []:
                if not e["vm"]:
                    continue
                opened = round(datetime.fromisoformat(e["opened_at"]).timestamp() * 1000)
                first = _first_true(db, e["host"], e["vm"], e["rule"], opened)

                def samples(*statuses: str, first: int = first, e: dict = e) -> str:
                    at = [a["at"] for a in e["actions"] if a["status"] in statuses]
                    if not at:
                        return "-"
                    return f"{(datetime.fromisoformat(at[0]).timestamp() * 1000 - first) / 1000 / INTERVAL_S:g}"

                proposed = samples("proposed", "applied", "unfinished", "aborted")
                print(f"{mode:>19} {e['rule'] + ' ' + e['vm']:>18} {_iso(first):>16} "
                      f"{(opened - first) / 1000 / INTERVAL_S:>6g} {proposed:>9} {samples('applied'):>8} {cpu:>13.2f}")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--vms", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reaction", action="store_true", help="measure how fast the loop acts instead")
    args = parser.parse_args()
    if args.reaction:
        reaction()
        return
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
