"""`GET /metrics` of `vnuma serve` on SQLite inventories of 1,000 and 10,000 hosts.

Fleets: `bench_fleet.py`'s (hosts of 4 cells x 16 cores x 2 threads, 2 GPUs
per cell, a VM on every 10th host) at each ``--hosts``, and `bench_capacity.py`'s
1,000 hosts with five VMs on each (``--busy``). Every VM gets a bandwidth
sample, and the audit log ``--audit`` more rows (claims and refusals), so the
first scrape of a process reads a long log. The application runs in this
process (FastAPI's TestClient, a client on 127.0.0.1: no token), so the
figures are the service's own work: reading the inventory, computing the
figures, writing the text. Prints per fleet: the first scrape (the whole
audit log read), then the median and best of ``--runs`` later scrapes, their
CPU time, the answer's size and sample count, and what gzip (asked for by
Prometheus) adds: its CPU time and the compressed size.

    .venv/bin/python bench/bench_metrics.py [--hosts 1000 10000] [--busy] [--runs 5] [--audit 100000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bench_capacity
import bench_fleet
from fastapi.testclient import TestClient

from vnuma.api.app import create_app
from vnuma.inventory.access import open_access
from vnuma.inventory.samples import Sample, record_samples
from vnuma.services import make_settings


def decorate(path: Path, audit_rows: int) -> int:
    """A bandwidth sample for every VM, and ``audit_rows`` old claim and refusal rows; the VMs sampled."""
    with sqlite3.connect(path) as conn:
        vms = conn.execute("SELECT v.name, h.name FROM vms v JOIN hosts h ON h.id = v.host_id").fetchall()
        at = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="microseconds")
        claim = json.dumps({"changes": [{"op": "claim", "vm": "x"}]}, sort_keys=True)
        refused = json.dumps({"changes": [{"check": "cell-cpus", "op": "attempt"}], "error": "e"}, sort_keys=True)
        conn.executemany(
            "INSERT INTO audit_log (invocation, at, username, machine, command, outcome, changes, vms, hosts, "
            "tenants) VALUES ('bench', ?, 'u', 'm', 'c', ?, ?, '', '', '')",
            ((at, "refused" if i % 10 == 0 else "ok", refused if i % 10 == 0 else claim) for i in range(audit_rows)))
    taken = datetime.now(UTC).isoformat(timespec="seconds")
    samples = [Sample(vm, host, taken, 2000, ((0, 3_000_000_000, 3_500_000_000),), ((0, 8 << 20),))
               for vm, host in vms]
    with open_access(f"sqlite:///{path}") as access, access.begin(True) as x:
        record_samples(x, samples)
    return len(samples)


def scrapes(path: Path, runs: int) -> tuple[float, list[float], list[float], bytes, int]:
    """(first scrape s, later scrapes s, their CPU s, the answer, samples) of a fresh application, asked
    without gzip (the client's decompression would count as the service's CPU here)."""
    app = create_app(make_settings(str(path), {}))
    with TestClient(app, client=("127.0.0.1", 50000), headers={"Accept-Encoding": "identity"}) as client:
        start = time.perf_counter()
        first = client.get("/metrics")
        first_s = time.perf_counter() - start
        assert first.status_code == 200 and "vnuma_inventory_up 1.0" in first.text, first.text[-500:]
        walls, cpus = [], []
        for _ in range(runs):
            start, cpu = time.perf_counter(), time.process_time()
            got = client.get("/metrics")
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        lines = [line for line in got.text.splitlines() if line and not line.startswith("#")]
        return first_s, walls, cpus, got.content, len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--busy", action="store_true", help="also 1,000 hosts with five VMs on each")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--audit", type=int, default=100_000, help="old audit rows added")
    args = parser.parse_args()
    fleets = [(f"{n:,} hosts, a VM on every 10th", n, bench_fleet.build) for n in args.hosts]
    if args.busy:
        fleets.append(("1,000 hosts, 5 VMs on each", 1000, bench_capacity.build))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, n, build) in enumerate(fleets):
            path = Path(tmp) / f"fleet-{i}.db"
            build(path, n)
            vms = decorate(path, args.audit)
            first, walls, cpus, body, samples = scrapes(path, args.runs)
            start = time.process_time()
            zipped = gzip.compress(body, compresslevel=1)  # as the service answers Prometheus (Accept-Encoding)
            gzip_s = time.process_time() - start
            rows.append([label, f"{vms:,}", f"{args.audit:,}", f"{first:.3f}", f"{statistics.median(walls):.3f}",
                         f"{min(walls):.3f}", f"{statistics.median(cpus):.3f}", f"{len(body) / 2**20:.1f}",
                         f"{samples:,}", f"{gzip_s:.3f}", f"{len(zipped) / 2**20:.1f}"])
    head = ["fleet", "VMs", "audit rows", "first s", "median s", "best s", "cpu s", "MiB", "samples", "gzip s",
            "gzip MiB"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    for row in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
