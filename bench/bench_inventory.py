"""Inventory speed on a SQLite file: add N hosts, then load them the ways placement and `host list` do.

Hosts are shaped like the dual-socket trace hosts (2 cells x 16 cores x 2 threads,
4 GPUs, 3 page pools per cell) plus one placed VM per 10 hosts; once with every host of one shape, once with
every host's topology text distinct (the decoder's worst case). Prints a
table (best of --runs for each read).

    .venv/bin/python bench/bench_inventory.py [--hosts 100 1000 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.builders import kept, make_host
from vnuma.inventory import Inventory, open_inventory
from vnuma.placement.model import CellAssignment, Isolation, Placement
from vnuma.topology import PAGE_1G


def fill(inv: Inventory, n: int, distinct: bool) -> float:
    """Add n hosts (one transaction each, as `vnuma host add` does) and a VM per 10 hosts; seconds.

    ``distinct``: every host has its own memory size, so no two store the same topology text.
    """
    t0 = time.perf_counter()
    for i in range(n):
        name = f"host-{i:05d}"
        memory_gib = 256 + i if distinct else 256
        inv.add_host(
            make_host(name, cells=2, cores_per_cell=16, smt=2, memory_gib=memory_gib, gpus_per_cell=2)
        )
        if i % 10 == 0:
            cell = CellAssignment(0, 0, (0, 1, 2, 3), (0, 1, 2, 3), 4 * PAGE_1G, PAGE_1G)
            inv.claim(kept(Placement(f"vm-{i:05d}", "acme", name, (cell,))), Isolation.CORE)
    return time.perf_counter() - t0


def best(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'hosts':>6} {'shapes':>8} {'add+claim/host':>15} {'list_hosts':>11} {'per host':>9} "
        f"{'summaries':>10} {'placements_on':>14} {'db size':>9}"
    )
    for n, distinct in ((n, d) for n in args.hosts for d in (False, True)):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "inventory.db"
            with open_inventory(f"sqlite:///{db}") as inv:
                added = fill(inv, n, distinct)
                listing = best(inv.list_hosts, args.runs)
                summaries = best(inv.host_summaries, args.runs)
                placements = best(inv.placements_on, args.runs)
            size = db.stat().st_size + sum(p.stat().st_size for p in db.parent.glob("inventory.db-*"))
            shapes = "distinct" if distinct else "one"
            print(
                f"{n:>6} {shapes:>8} {added / n * 1e3:>12.2f} ms {listing:>9.3f} s "
                f"{listing / n * 1e6:>6.0f} us "
                f"{summaries * 1e3:>7.1f} ms {placements * 1e3:>11.1f} ms {size / 2**20:>6.1f} MiB"
            )


if __name__ == "__main__":
    main()
