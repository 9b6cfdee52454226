"""`vnuma host show --svg` of a 64-cell host, and `vnuma stats --svg` of a 1,000-host fleet, as whole processes.

The host is the synthetic 64-cell server of the placement benchmark (8
sockets x 8 cells, 8 cores x 2 threads per cell, 1,024 pCPUs, a GPU and a NIC
per cell) with a VM of 8 vCPUs and a GPU on every other cell (32 VMs).
The fleet is `bench_fleet.py`'s (1,000 hosts of 4 cells, a VM on every 10th),
drawn grouped (more than 200 hosts). Each timed run is a fresh ``python -m
vnuma.cli --db FILE ...`` process; also with ``--png`` (cairo renders the
SVG). Prints median and best wall time of --runs beside the issue's target
for the host picture (1 s).

    .venv/bin/python bench/bench_pictures.py [--runs 5] [--hosts 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench_fleet import build as build_fleet
from bench_fleet import timed

from tests.builders import make_host
from vnuma.inventory import open_inventory
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.topology import PAGE_1G

VNUMA = [sys.executable, "-m", "vnuma.cli"]
TARGET_S = 1.0


def build_big(path: Path) -> None:
    """The 64-cell host with 32 VMs placed by the engine, one on every other cell."""
    host = make_host("big-64", cells=64, cells_per_socket=8, cores_per_cell=8, smt=2, gpus_per_cell=1,
                     nics_per_cell=1, memory_gib=64, hugepages_1g_gib=32, hugepages_2m_gib=8)
    fleet = Fleet([host])
    with open_inventory(f"sqlite:///{path}") as inv:
        inv.add_host(host)
        inv.add_tenant(Tenant("acme", Isolation.CORE))
        for cell in range(0, 64, 2):
            avoid = frozenset((host.name, c) for c in range(64) if c != cell)
            req = VmRequest(f"vm-{cell:02d}", "acme", 8, 8 * PAGE_1G, gpus=1, numa_nodes=1,
                            page_size_kib=PAGE_1G, avoid_cells=avoid)
            chosen = place(req, fleet).chosen
            assert chosen is not None
            fleet.add(chosen)
            inv.claim(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big, fleet = Path(tmp) / "big.db", Path(tmp) / "fleet.db"
        build_big(big)
        build_fleet(fleet, args.hosts)
        out = Path(tmp) / "out"
        print("| command | median s | best s | target s |")
        print("|---|---|---|---|")
        runs = [
            (big, ["host", "show", "big-64", "--svg", f"{out}.svg"], f"{TARGET_S:.1f}"),
            (big, ["host", "show", "big-64", "--png", f"{out}.png"], "-"),
            (fleet, ["stats", "--svg", f"{out}.svg"], "-"),
        ]
        for db, argv, target in runs:
            walls, _cpus = timed([*VNUMA, "--db", str(db), *argv], args.runs)
            label = " ".join(argv).replace(str(out), "FILE")
            note = f" ({args.hosts} hosts)" if db == fleet else " (64 cells)"
            print(f"| `{label}`{note} | {statistics.median(walls):.2f} | {min(walls):.2f} | {target} |", flush=True)


if __name__ == "__main__":
    main()
