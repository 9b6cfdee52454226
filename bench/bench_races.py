"""Racing placements: N spawned processes x M operations on one inventory, SQLite and PostgreSQL.

Each worker places VMs of random shapes under ``pack`` (so racers often want
the very same pCPUs) and releases a quarter of the time one of its own VMs;
afterwards the inventory is audited (claims table and every host's use
recomputed from the placements). Prints a table: outcomes, wall time (the
racers' start-up included), the race's own time (from the racers' common
start to the last one's end), placements/s and operations/s over the race's
time, and the number of inconsistencies (must be 0).

    .venv/bin/python bench/bench_races.py [--workers 8] [--ops 250] [--hosts 4] [--pg URL]

``--pg`` defaults to ``$VNUMA_TEST_PG`` (a server URL; a scratch database is
created and dropped); without one only SQLite runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections import Counter

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import make_fleet, recorded_vms, run_race


def race(url: str, workers: int, ops: int, hosts: int) -> list[str]:
    """One race on a fresh inventory at ``url``; a table row."""
    make_fleet(url, hosts)
    start = time.perf_counter()
    reports = run_race(url, workers, ops)
    wall = time.perf_counter() - start
    total: Counter[str] = Counter()
    for r in reports:
        total.update(r.outcomes)
    failures = sum(len(r.failures) for r in reports)
    held = {name: doc for r in reports for name, doc in r.held.items()}
    problems = len(inconsistencies(url)) + int(recorded_vms(url) != held)
    backend = make_url(url).get_backend_name()
    racing = max(r.seconds for r in reports)  # from the barrier to the last racer's end: no process start-up
    row: list[object] = [
        backend, f"{workers} x {ops}", total["placed"], total["no-fit"], total["busy"], total["released"],
        failures, problems, f"{wall:.1f}", f"{racing:.1f}", f"{total['placed'] / racing:.0f}",
        f"{sum(total.values()) / racing:.0f}",
    ]
    return [str(x) for x in row]


def with_pg_database(server: str, workers: int, ops: int, hosts: int) -> list[str]:
    """Run the race in a scratch database on ``server``, dropped afterwards."""
    name = f"vnuma_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            url = make_url(server).set(database=name).render_as_string(hide_password=False)
            return race(url, workers, ops, hosts)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


def main() -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ops", type=int, default=250)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pg", default=os.environ.get("VNUMA_TEST_PG"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(race(f"sqlite:///{tmp}/inventory.db", args.workers, args.ops, args.hosts))
    if args.pg:
        rows.append(with_pg_database(args.pg, args.workers, args.ops, args.hosts))
    head = ["backend", "workers x ops", "placed", "no-fit", "busy", "released", "failures",
            "inconsistencies", "wall s", "race s", "placed/s", "ops/s"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    for row in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
