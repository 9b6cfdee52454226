"""Measurements that run inside one checkout of vnuma, for ``bench_compare.py``.

Run as ``python bench/_probes.py PROBE ARGS`` with the checkout to measure
first on ``PYTHONPATH`` and as the working directory; prints one JSON
document. Uses only interfaces every checkout since the first fleet-scale
work offers (``vnuma.simulate``, ``vnuma.inventory.open_inventory``,
``tests.builders``, the CLI), so two checkouts are measured the same way.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any


def simulate(rounds: int, *paths: str) -> dict[str, Any]:
    """Per trace and strategy: placed count, best requests/s of ``rounds`` runs, the placements."""
    from vnuma.placement.model import Isolation
    from vnuma.placement.objectives import Strategy
    from vnuma.simulate import load_trace, placements_to_list, report_to_dict, run

    out: dict[str, Any] = {}
    for path in paths:
        trace = load_trace(Path(path).read_bytes(), path)
        for strategy in Strategy:
            best: dict[str, Any] | None = None
            for _ in range(int(rounds)):
                report = run(trace, strategy, Isolation.CORE)
                d = report_to_dict(report)
                if best is None or d["requests_per_s"] > best["requests_per_s"]:
                    best = {**d, "placements": placements_to_list(report)}
            assert best is not None
            out[f"{trace.scenario} {strategy.value}"] = {
                "placed": best["placed"],
                "requests_per_s": best["requests_per_s"],
                "multi_node": best["multi_node"],
                "multi_node_non_adjacent": best["multi_node_non_adjacent"],
                "placements": best["placements"],
            }
    return out


def without_isolate(*paths: str) -> dict[str, Any]:
    """``pack`` on each trace with its ``isolate`` requests removed (Nova refuses those)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        kept = []
        for path in paths:
            doc = json.loads(Path(path).read_text())
            doc["requests"] = [r for r in doc["requests"] if r["thread_policy"] != "isolate"]
            target = Path(tmp) / Path(path).name
            target.write_text(json.dumps(doc))
            kept.append(str(target))
        for key, row in simulate(1, *kept).items():
            if key.endswith(" pack"):
                out[key.removesuffix(" pack")] = {k: v for k, v in row.items() if k != "placements"}
    return out


def _small_fleet(url: str) -> None:
    """Three GPU hosts, a tenant and a VM on each host (as the issue's count was taken)."""
    from tests.builders import kept, make_host
    from vnuma.inventory import open_inventory
    from vnuma.placement.model import CellAssignment, Isolation, Placement, Tenant
    from vnuma.topology import PAGE_1G

    with open_inventory(url) as inv:
        for name in ("host-a", "host-b", "host-c"):
            inv.add_host(make_host(name, gpus_per_cell=2))
        inv.add_tenant(Tenant("tenant-a", Isolation.CORE))
        for i, name in enumerate(("host-a", "host-b", "host-c")):
            cell = CellAssignment(0, 0, (0, 1), (2 + i, 18 + i), 2 * PAGE_1G, PAGE_1G)
            inv.claim(kept(Placement(f"base-{i}", "tenant-a", name, (cell,))))


def statements() -> dict[str, Any]:
    """Transactions and statements of one ``vnuma place tenant-a --gpus 2`` on SQLite, from its trace."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/inventory.db"
        _small_fleet(url)
        traced: list[str] = []
        connect = sqlite3.connect

        def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(traced.append)
            return conn

        sqlite3.connect = tracing  # type: ignore[assignment]
        from vnuma.cli import app

        try:
            app(["--db", url, "place", "tenant-a", "--gpus", "2"], standalone_mode=False)
        finally:
            sqlite3.connect = connect  # type: ignore[assignment]
    begins = [s for s in traced if s.startswith("BEGIN")]
    work = [s for s in traced if not s.startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE"))]
    calls = [s for i, s in enumerate(work) if i == 0 or s.split(" VALUES")[0] != work[i - 1].split(" VALUES")[0]]
    return {"transactions": len(begins), "traced": len(traced), "statements": len(work), "statement_calls": len(calls)}


def lines() -> dict[str, int]:
    """Lines of Python per package of ``vnuma`` (top-level modules under their own names)."""
    out: dict[str, int] = {}
    for path in sorted(Path("vnuma").rglob("*.py")):
        parts = path.relative_to("vnuma").parts
        key = parts[0].removesuffix(".py")
        out[key] = out.get(key, 0) + len(path.read_text().splitlines())
    return out


def build_fleet(path: str, hosts: str) -> dict[str, Any]:
    """The checkout's own ``bench/bench_fleet.build``: an inventory of ``hosts`` hosts at ``path``."""
    sys.path.insert(0, "bench")
    from bench_fleet import build

    return {"seconds": build(Path(path), int(hosts))}


if __name__ == "__main__":
    probe, *args = sys.argv[1:]
    print(json.dumps(globals()[probe](*args)))
