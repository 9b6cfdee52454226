"""Fleet scale: `vnuma place` as a whole process on SQLite inventories of 1,000 to 100,000 hosts.

Every host has 4 cells x 16 cores x 2 threads (128 pCPUs), 2 GPUs per cell (8)
and the builders' page pools; all hosts share one shape (the stored topology
text is identical, as for one hardware model). One host is added through the
inventory, the others are copies of its row inserted in one transaction, and
a VM is claimed on every 10th host so the engine sees a partly used fleet.
Each timed run is a fresh ``python -m vnuma.cli --db FILE place ...`` process
that claims a VM (8 vCPUs, 32 GiB in 1 GiB pages, 1 GPU), then ``host list
--json`` is timed the same way on the same file. Prints a table:
median and best wall time of --runs, and the median CPU time (user +
system) of the process next to issue 37's targets (CPU time: other work on
a shared machine disturbs it far less than wall time); plus the same
process running only ``--help`` (interpreter + CLI import) for scale.

    .venv/bin/python bench/bench_fleet.py [--hosts 1000 10000 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.builders import kept, make_host
from vnuma.inventory import open_inventory
from vnuma.placement.model import CellAssignment, Isolation, Placement, Tenant
from vnuma.topology import PAGE_1G, Host

TARGETS_S = {10000: 0.4, 100000: 1.0}
"""Issue 37's targets: CPU seconds (user + system) of one claiming ``place``."""
LIST_TARGETS_S = {100000: 1.0}
"""Issue 37's target: CPU seconds of one ``host list --json``."""
VNUMA = [sys.executable, "-m", "vnuma.cli"]


def fleet_host() -> Host:
    """The one hardware model of the benchmark fleets (``host-00000``)."""
    return make_host("host-00000", cells=4, cores_per_cell=16, smt=2, gpus_per_cell=2,
                     memory_gib=256, hugepages_1g_gib=192, hugepages_2m_gib=16)


def copy_hosts(path: Path, hosts: int) -> None:
    """Add :func:`fleet_host` and tenant ``acme`` through the inventory, then ``hosts - 1`` copies of its row
    (``host-00001``...) in one transaction."""
    with open_inventory(f"sqlite:///{path}") as inv:
        inv.add_host(fleet_host())
        inv.add_tenant(Tenant("acme", Isolation.CORE))
    conn = sqlite3.connect(path)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(hosts)") if r[1] not in ("id", "name")]
        row = conn.execute(f"SELECT {', '.join(cols)} FROM hosts WHERE name = 'host-00000'").fetchone()
        with conn:
            conn.executemany(
                f"INSERT INTO hosts (name, {', '.join(cols)}) VALUES (?{', ?' * len(cols)})",
                ((f"host-{i:05d}", *row) for i in range(1, hosts)),
            )
    finally:
        conn.close()


def build(path: Path, hosts: int) -> float:
    """A fleet of ``hosts`` identical hosts with a VM on every 10th; seconds taken."""
    start = time.perf_counter()
    copy_hosts(path, hosts)
    with open_inventory(f"sqlite:///{path}") as inv:
        for i in range(0, hosts, 10):
            cell = CellAssignment(0, 0, (0, 1, 2, 3), (0, 1, 2, 3), 4 * PAGE_1G, PAGE_1G)
            inv.claim(kept(Placement(f"base-{i:05d}", "acme", f"host-{i:05d}", (cell,))))
    return time.perf_counter() - start


def timed(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of ``runs`` runs of a process (each must exit 0)."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    walls, cpus = timed([*VNUMA, "--help"], args.runs)
    rows = [["vnuma --help", "-", "-", *(f"{x:.3f}" for x in _stats(walls)), f"{statistics.median(cpus):.3f}", "-"]]
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.hosts:
            path = Path(tmp) / f"fleet-{n}.db"
            built = build(path, n)
            counter = iter(range(10**6))
            runs = [
                timed([*VNUMA, "--db", str(path), "place", "acme", "--name", f"bench-{next(counter)}",
                       "--vcpus", "8", "--memory", "32GiB", "--page-size", "1G", "--gpus", "1"], 1)
                for _ in range(args.runs)
            ]
            target = TARGETS_S.get(n)
            rows.append([f"place, {n:,} hosts", f"{built:.1f}", f"{path.stat().st_size / 2**20:.1f}",
                         *(f"{x:.3f}" for x in _stats([w[0] for w, _ in runs])),
                         f"{statistics.median(c[0] for _, c in runs):.3f}", f"{target}" if target else "-"])
            walls, cpus = timed([*VNUMA, "--db", str(path), "host", "list", "--json"], args.runs)
            target = LIST_TARGETS_S.get(n)
            rows.append([f"host list --json, {n:,} hosts", "-", "-", *(f"{x:.3f}" for x in _stats(walls)),
                         f"{statistics.median(cpus):.3f}", f"{target}" if target else "-"])
    head = ["command", "build s", "db MiB", "median s", "best s", "cpu s", "target cpu s"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    for row in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))


def _stats(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), min(times)


if __name__ == "__main__":
    main()
