"""Fleet-scale simulation, before and after in one run: 10,000 and 100,000 hosts, 20,000 requests.

    .venv/bin/python bench/bench_simulate.py --baseline-ref main [--hosts 10000 100000] [--runs 3]
        [--big-runs 1] [--strategy pack]

The trace is made once per fleet size by this checkout's generator
(``vnuma trace generate --scenario fleet --hosts N``: dual-socket-2cell
hosts, 20,000 requests, seed 42). ``--baseline-ref`` checks an earlier
commit out into a temporary git worktree (``--baseline DIR`` takes an
existing checkout); both checkouts run the same child process, alternating
run by run so a busy machine disturbs both alike: the trace read with
``vnuma.simulate.load_trace`` from the file's bytes and placed with
``vnuma.simulate.run`` (what ``vnuma simulate`` does, without its size cap,
which refuses a 100,000-host trace before this change). A last row runs
this checkout's ``vnuma simulate --json`` as a whole process. With
``--export``, each checkout also builds an inventory of that many hosts
(its own ``bench_fleet.copy_hosts``: copies of one 4-cell, 8-GPU host, no
VMs) and runs ``vnuma trace export`` on it as a whole process.

Per row: the medians over runs of the child's CPU time (user + system,
from ``wait4``) and wall time, its peak RSS (the largest), and of the
decisions (as ``simulate`` times them, each ``place`` call: wall clock) the
p50 and p99 and the requests per second of the placing loop, with how many
were placed (the same on both sides: the placements do not change). The
probe rows add, in parentheses, the p99 of each decision's CPU time (the
thread's, around each ``place`` call) and decisions per CPU second (their
number over the sum of those times): on a machine shared with other work
the wall figures mostly measure the wait for a core. Fleets of
``--big-hosts`` hosts or more (default 100,000) run ``--big-runs`` times
(default 1): on a 2-core machine shared with others, a 100,000-host run
costs a minute and more of CPU before this change.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_compare import REPO, baseline

PROBE = """
import json, sys, time
from pathlib import Path
import vnuma.simulate
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace, report_to_dict, run
cpu = []
def timed(*args, _place=vnuma.simulate.place, **kwargs):
    t0 = time.thread_time()
    try:
        return _place(*args, **kwargs)
    finally:
        cpu.append(time.thread_time() - t0)
vnuma.simulate.place = timed
trace = load_trace(Path(sys.argv[1]).read_bytes(), sys.argv[1])
d = report_to_dict(run(trace, Strategy(sys.argv[2])))
d["cpu_per_s"] = len(cpu) / sum(cpu)
cpu.sort()
d["cpu_p99_us"] = cpu[round(0.99 * (len(cpu) - 1))] * 1e6
print(json.dumps({k: d[k] for k in ("placed", "requests", "decision_us", "requests_per_s", "cpu_p99_us", "cpu_per_s")}))
"""


def measured(tree: Path, args: list[str], *, report: bool = True) -> dict[str, Any]:
    """One child process in ``tree`` (first on the module path): its JSON report (when ``report``), CPU and wall
    seconds, peak RSS MiB."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen([sys.executable, *args], cwd=tree, env=env, stdout=out, stderr=subprocess.PIPE)
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr = child.stderr.read().decode() if child.stderr else ""
        if child.returncode:
            raise SystemExit(f"{tree}: {' '.join(args)} exited {child.returncode}: {stderr.strip()}")
        out.seek(0)
        got = json.loads(out.read()) if report else {}
    return {**got, "cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss": usage.ru_maxrss / 1024}


COPY_HOSTS = """
import sys
from pathlib import Path
sys.path.insert(0, "bench")
from bench_fleet import copy_hosts
copy_hosts(Path(sys.argv[1]), int(sys.argv[2]))
"""


def exported(tree: Path, hosts: int, tmp: Path) -> dict[str, Any]:
    """``vnuma trace export`` in ``tree`` of an inventory of ``hosts`` hosts it builds: CPU, wall, peak RSS."""
    db, out = tmp / f"export-{hosts}.db", tmp / f"export-{hosts}.json"
    measured(tree, ["-c", COPY_HOSTS, str(db), str(hosts)], report=False)
    got = measured(tree, ["-m", "vnuma.cli", "--db", str(db), "trace", "export", "--out", str(out)], report=False)
    db.unlink()
    out.unlink()
    return got


def row(label: str, runs: list[dict[str, Any]]) -> list[str]:
    """One table row: medians over ``runs`` (peak RSS: the largest); decisions only for simulations."""
    med = statistics.median
    head = [label, f"{med(r['cpu'] for r in runs):.1f}", f"{med(r['wall'] for r in runs):.1f}",
            f"{max(r['rss'] for r in runs):.0f}"]
    if "decision_us" not in runs[0]:
        return [*head, "-", "-", "-", "-", "-", "-"]
    cpu = "cpu_p99_us" in runs[0]
    return [
        *head,
        f"{med(r['decision_us']['p50'] for r in runs):.0f}",
        f"{med(r['decision_us']['p99'] for r in runs):.0f}" + (
            f" ({med(r['cpu_p99_us'] for r in runs):.0f})" if cpu else ""),
        f"{med(r['requests_per_s'] for r in runs):,.0f}",
        f"{med(r['cpu_per_s'] for r in runs):,.0f}" if cpu else "-",
        f"{runs[0]['placed']:,} / {runs[0]['requests']:,}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--baseline-ref", help="an earlier commit to compare with (e.g. main)")
    where.add_argument("--baseline", help="an earlier checkout to compare with")
    parser.add_argument("--hosts", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--runs", type=int, default=3, help="runs per checkout (default 3)")
    parser.add_argument("--big-hosts", type=int, default=100000, help="from this many hosts on, --big-runs")
    parser.add_argument("--big-runs", type=int, default=1, help="runs per checkout of big fleets (default 1)")
    parser.add_argument("--strategy", default="pack")
    parser.add_argument("--export", action="store_true", help="time `vnuma trace export` of each fleet size too")
    args = parser.parse_args()
    head = ["fleet", "cpu s", "wall s", "peak RSS MiB", "p50 us", "p99 us (CPU)", "decisions/s", "per CPU s",
            "placed"]
    rows = []
    with baseline(args.baseline_ref, args.baseline) as before, tempfile.TemporaryDirectory() as tmp:
        for hosts in args.hosts:
            trace = Path(tmp) / f"fleet-{hosts}.json"
            subprocess.run(
                [sys.executable, "-m", "vnuma.cli", "trace", "generate", "--scenario", "fleet", "--hosts", str(hosts),
                 "--out", str(trace)], cwd=REPO, check=True, capture_output=True,
            )
            runs = args.big_runs if hosts >= args.big_hosts else args.runs
            probe = ["-c", PROBE, str(trace), args.strategy]
            got: dict[str, list[dict[str, Any]]] = {"before": [], "after": [], "cli": []}
            for _ in range(runs):
                got["before"].append(measured(before, probe))
                got["after"].append(measured(REPO, probe))
            for _ in range(runs):
                got["cli"].append(measured(REPO, ["-m", "vnuma.cli", "simulate", str(trace), "--json",
                                                  "--strategy", args.strategy]))
            size = trace.stat().st_size / 2**20
            rows += [
                row(f"{hosts:,} hosts ({size:.0f} MiB), before", got["before"]),
                row(f"{hosts:,} hosts, after", got["after"]),
                row(f"{hosts:,} hosts, after, `vnuma simulate`", got["cli"]),
            ]
            trace.unlink()
            if args.export:
                runs_export: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
                for _ in range(runs):
                    runs_export["before"].append(exported(before, hosts, Path(tmp)))
                    runs_export["after"].append(exported(REPO, hosts, Path(tmp)))
                rows += [row(f"`trace export`, {hosts:,} hosts, {label}", got_)
                         for label, got_ in runs_export.items()]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
