"""Before and after, side by side in one run: this checkout against an earlier one.

    .venv/bin/python bench/bench_compare.py --baseline-ref REF [--runs 7] [--rounds 5]
        [--only lines,statements,place,simulate,nova,races]

``--baseline-ref`` checks the earlier commit out into a temporary git
worktree (``--baseline DIR`` takes an existing checkout instead). Both
checkouts' modules are compiled to bytecode first, as an installed package
has them. Every measurement runs in a child process with the checkout on
``PYTHONPATH`` (``bench/_probes.py``), and the timed ones alternate between
the two checkouts, so a busy machine disturbs both alike. Prints tables:

* ``lines``: lines of Python per package;
* ``statements``: transactions and statements of one ``vnuma place tenant-a
  --gpus 2`` on a 3-host SQLite inventory (read from SQLite's trace);
* ``place``: ``vnuma place`` as a whole process on inventories of 1,000 and
  10,000 hosts (each checkout builds its own with its ``bench_fleet.build``),
  median and best wall time of ``--runs``;
* ``simulate``: every example trace and ``fleet-1000`` (made by the project's
  generator) with each strategy: placed, requests/s (best of ``--rounds``),
  and how many requests were placed differently;
* ``nova``: ``pack`` on the example traces without their ``isolate`` requests,
  next to OpenStack Nova's placed counts;
* ``races``: each checkout's ``bench/bench_races.py`` (PostgreSQL too when
  ``VNUMA_TEST_PG`` is set); a checkout from before 2026-12-08 prints no
  ``race s`` and gives its rates over its wall time, the racers' start-up
  included.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBES = REPO / "bench" / "_probes.py"
TRACES = sorted((REPO / "examples" / "traces").glob("*.json"))
NOVA = {"dual-socket-2cell": 74, "epyc-nps4-8cell": 210, "big-16cell": 167}
SECTIONS = ("lines", "statements", "place", "simulate", "nova", "races")
PLACE = ["place", "acme", "--vcpus", "8", "--memory", "32GiB", "--page-size", "1G", "--gpus", "1"]


def run_in(tree: Path, args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A child process in ``tree`` with ``tree`` first on the module path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=check, timeout=3600
    )


def probe(tree: Path, name: str, *args: str) -> Any:
    """One probe of ``bench/_probes.py`` run in ``tree``; its JSON answer."""
    done = run_in(tree, [str(PROBES), name, *args])
    return json.loads(done.stdout.splitlines()[-1])


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A markdown table on stdout."""
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    print()


def lines(before: Path, after: Path) -> None:
    b, a = probe(before, "lines"), probe(after, "lines")
    keys = sorted(set(b) | set(a), key=lambda k: (-max(b.get(k, 0), a.get(k, 0)), k))
    rows = [[k, b.get(k, "-"), a.get(k, "-")] for k in keys]
    rows.append(["total", sum(b.values()), sum(a.values())])
    table(["package", "before", "after"], rows)


def statements(before: Path, after: Path) -> None:
    b, a = probe(before, "statements"), probe(after, "statements")
    table(
        ["one `place` (3 hosts, SQLite)", "before", "after"],
        [
            ["transactions", b["transactions"], a["transactions"]],
            ["everything SQLite ran (BEGIN, COMMIT, PRAGMA and schema check included)", b["traced"], a["traced"]],
            ["statements (each row of a multi-row insert counted)", b["statements"], a["statements"]],
            ["statement calls (a multi-row insert counted once)", b["statement_calls"], a["statement_calls"]],
        ],
    )


def _timed(tree: Path, args: Sequence[str]) -> float:
    start = time.perf_counter()
    run_in(tree, ["-m", "vnuma.cli", *args])
    return time.perf_counter() - start


def place(before: Path, after: Path, runs: int, tmp: Path) -> None:
    rows = []
    for hosts in (1000, 10000):
        dbs = {}
        for label, tree in (("before", before), ("after", after)):
            dbs[label] = tmp / f"{label}-{hosts}.db"
            probe(tree, "build_fleet", str(dbs[label]), str(hosts))
        times: dict[str, list[float]] = {"before": [], "after": []}
        for i in range(runs):
            for label, tree in (("before", before), ("after", after)):
                times[label].append(_timed(tree, ["--db", str(dbs[label]), *PLACE, "--name", f"bench-{i}"]))
        rows.append(
            [
                f"{hosts:,} hosts",
                *(f"{statistics.median(times[k]):.3f} / {min(times[k]):.3f}" for k in ("before", "after")),
            ]
        )
    table(["`vnuma place` whole process", "before median / best s", "after median / best s"], rows)


def _traces(tmp: Path) -> list[str]:
    fleet = tmp / "fleet-1000.json"
    done = subprocess.run(
        [sys.executable, "-m", "vnuma.cli", "trace", "generate", "--scenario", "fleet-1000", "--out", str(fleet)],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    del done
    return [*(str(p) for p in TRACES), str(fleet)]


def simulate(before: Path, after: Path, rounds: int, tmp: Path) -> None:
    paths = _traces(tmp)
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(rounds):  # alternating rounds: both see the same load
        for label, tree in (("before", before), ("after", after)):
            results[label].append(probe(tree, "simulate", "1", *paths))
    rows = []
    for key in results["after"][0]:
        b, a = results["before"][0][key], results["after"][0][key]
        differ = sum(1 for x, y in zip(b["placements"], a["placements"], strict=True) if x != y)
        best = {k: max(r[key]["requests_per_s"] for r in results[k]) for k in results}
        rows.append(
            [key, b["placed"], a["placed"], f"{best['before']:,.0f}", f"{best['after']:,.0f}", differ,
             f"{a['multi_node']} / {a['multi_node_non_adjacent']}"]
        )
    table(
        ["trace strategy", "placed before", "placed after", "req/s before", "req/s after",
         "placed differently", "multi-node / non-adjacent after"],
        rows,
    )


def nova(before: Path, after: Path) -> None:
    paths = [str(p) for p in TRACES]
    b, a = probe(before, "without_isolate", *paths), probe(after, "without_isolate", *paths)
    rows = [
        [k, NOVA.get(k, "-"), b[k]["placed"], a[k]["placed"], _multi(a[k])] for k in sorted(a)
    ]
    table(["trace (no isolate requests), pack", "Nova", "before", "after", "multi-node / non-adjacent after"], rows)


def _multi(row: dict[str, Any]) -> str:
    return f"{row['multi_node']} / {row['multi_node_non_adjacent']}"


def races(before: Path, after: Path) -> None:
    """Each checkout's race table by its own header (an older bench_races has no ``race s`` column)."""
    head = ["backend", "workers x ops", "placed", "no-fit", "busy", "released", "failures", "inconsistencies",
            "wall s", "race s", "placed/s", "ops/s"]
    rows = []
    for label, tree in (("before", before), ("after", after)):
        out = run_in(tree, ["bench/bench_races.py"]).stdout
        lines = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]
        names = next((cells for cells in lines if cells[0] == "backend"), [])
        for cells in lines:
            if cells[0] in ("sqlite", "postgresql"):
                got = dict(zip(names, cells, strict=False))
                rows.append([label, *(got.get(name, "-") for name in head)])
    table(["checkout", *head], rows)


@contextmanager
def baseline(ref: str | None, directory: str | None) -> Iterator[Path]:
    """The earlier checkout: ``directory``, or ``ref`` checked out in a temporary worktree."""
    if directory:
        yield Path(directory).resolve()
        return
    assert ref is not None
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), ref], cwd=REPO, check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--baseline-ref", help="an earlier commit to compare with")
    where.add_argument("--baseline", help="an earlier checkout to compare with")
    parser.add_argument("--runs", type=int, default=7, help="runs of each `vnuma place` (default 7)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each simulation (default 5)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with baseline(args.baseline_ref, args.baseline) as before, tempfile.TemporaryDirectory() as tmp:
        for tree in (before, REPO):
            subprocess.run([sys.executable, "-m", "compileall", "-q", "vnuma"], cwd=tree, check=True)
        print(f"before: {before}  after: {REPO}\n")
        for name in SECTIONS:
            if name not in only:
                continue
            print(f"## {name}\n")
            if name in ("place", "simulate"):
                count = args.runs if name == "place" else args.rounds
                globals()[name](before, REPO, count, Path(tmp))
            else:
                globals()[name](before, REPO)


if __name__ == "__main__":
    main()
