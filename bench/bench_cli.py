"""CLI speed as whole processes: `vnuma --help`, import + `host show --json`
of a 64-cell, 1,024-CPU host, and the read commands `host list` / `vm list`
on a 100-host inventory with 10 VMs (split into interpreter + CLI import and
the rest). Prints a table (best and median of N runs).

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
        for args in (["host", "list"], ["host", "list", "--json"], ["vm", "list"], ["vm", "list", "--json"]):
            rows.append((f"{' '.join(args)} (100 hosts)", timed([*VNUMA, "--db", str(fleet), *args], runs), 0.3))
    print(f"{'command':40} {'best s':>8} {'median s':>9} {'target s':>9}")
    for name, times, target in rows:
        goal = f"{target:9.1f}" if target else f"{'-':>9}"
        print(f"{name:40} {min(times):8.3f} {statistics.median(times):9.3f} {goal}")


if __name__ == "__main__":
    main()
