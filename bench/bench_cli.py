"""CLI speed as whole processes: `vnuma --help`, import + `host show --json`
of a 64-cell, 1,024-CPU host, and the read commands (`host list/show`,
`vm list/show`, `stats`, `rebalance`, `reconcile`) on a 100-host inventory
with 10 VMs, next to the interpreter + CLI import alone; `stats` also on a
busy 100-host inventory where every host holds different VMs. Prints a
table (best and median of N runs).

    .venv/bin/python bench/bench_cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _proc import timed
from bench_fleet import build

VNUMA = [sys.executable, "-m", "vnuma.cli"]


def big_capabilities(cells: int = 64, cores_per_cell: int = 8, smt: int = 2) -> str:
    """A capabilities document: `cells` cells, cores_per_cell x smt CPUs each, 2 cells per socket."""
    total_cores = cells * cores_per_cell
    out = ["<capabilities><host><uuid>00000000-0000-0000-0000-000000000064</uuid>",
           "<cpu><arch>x86_64</arch></cpu><topology>", f"<cells num='{cells}'>"]
    for c in range(cells):
        out.append(f"<cell id='{c}'><memory unit='KiB'>67108864</memory>")
        out.append("<pages unit='KiB' size='4'>8388608</pages><pages unit='KiB' size='2048'>8192</pages>"
                   "<pages unit='KiB' size='1048576'>16</pages><distances>")
        for o in range(cells):
            d = 10 if o == c else (12 if o // 2 == c // 2 else 21)
            out.append(f"<sibling id='{o}' value='{d}'/>")
        out.append(f"</distances><cpus num='{cores_per_cell * smt}'>")
        for k in range(cores_per_cell):
            core = c * cores_per_cell + k
            ids = [core + t * total_cores for t in range(smt)]
            for i in ids:
                out.append(f"<cpu id='{i}' socket_id='{c // 2}' die_id='0' core_id='{core}' "
                           f"siblings='{','.join(map(str, ids))}'/>")
        out.append("</cpus></cell>")
    out.append("</cells></topology></host></capabilities>")
    return "\n".join(out)


def _fill_differently(db: Path) -> None:
    """Two more VMs on every host, sized by the host's number: no two hosts in the same state."""
    from vnuma.inventory import open_inventory
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import Isolation, VmRequest
    from vnuma.topology import PAGE_1G

    with open_inventory(f"sqlite:///{db}") as inv:
        snap = inv.snapshot()
        fleet = Fleet(snap.hosts, snap.placements, snap.tenants.values())
        for i, host in enumerate(h.name for h in snap.hosts):
            for name, vcpus, gib in ((f"busy-{i}-a", 2 * (1 + i % 10), 2), (f"busy-{i}-b", 2, 1 + i // 10)):
                req = VmRequest(name, "acme", vcpus, gib * PAGE_1G, host=host, isolation=Isolation.CORE)
                chosen = place(req, fleet).chosen
                assert chosen is not None, name
                fleet.add(chosen)
                inv.claim(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        caps = Path(tmp) / "caps64.xml"
        caps.write_text(big_capabilities())
        db = str(Path(tmp) / "inv.db")
        subprocess.run([*VNUMA, "--db", db, "db", "upgrade"], check=True, capture_output=True)
        rows.append(("vnuma --help", timed([*VNUMA, "--help"], runs), 0.3))
        imports = []
        for i in range(runs):
            imports += timed([*VNUMA, "--db", db, "host", "import", f"big-{i}", "--capabilities", str(caps)], 1)
        rows.append(("host import (64 cells, 1024 CPUs)", imports, 0.5))
        show = [*VNUMA, "--db", db, "host", "show", "big-0", "--json"]
        rows.append(("host show --json (64 cells)", timed(show, runs), 0.5))
        fleet = Path(tmp) / "fleet100.db"
        build(fleet, 100)
        cli_import = timed([sys.executable, "-c", "import vnuma.cli"], runs)
        rows.append(("import vnuma.cli (interpreter + CLI)", cli_import, 0.0))
        reads = (
            ["host", "list"], ["host", "list", "--json"], ["host", "show", "host-00001"], ["vm", "list"],
            ["vm", "list", "--json"], ["vm", "show", "base-00010"], ["stats"], ["stats", "--json"],
            ["rebalance"], ["reconcile"],
        )
        for args in reads:
            rows.append((f"{' '.join(args)} (100 hosts)", timed([*VNUMA, "--db", str(fleet), *args], runs), 0.3))
        busy = Path(tmp) / "busy100.db"
        build(busy, 100)
        _fill_differently(busy)
        rows.append(("stats (100 hosts, all different)", timed([*VNUMA, "--db", str(busy), "stats"], runs), 0.3))
    print(f"{'command':40} {'best s':>8} {'median s':>9} {'target s':>9}")
    for name, times, target in rows:
        goal = f"{target:9.1f}" if target else f"{'-':>9}"
        print(f"{name:40} {min(times):8.3f} {statistics.median(times):9.3f} {goal}")


if __name__ == "__main__":
    main()
