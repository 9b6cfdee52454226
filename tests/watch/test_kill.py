"""A watch killed with SIGKILL at any moment leaves no half-written round, and a watch started again on the
rest of the recordings ends where an uninterrupted one does (a real process, a real kill)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.cli.conftest import REPO, Cli
from tests.watch.conftest import FLEET, copy_rounds, make_fleet
from tests.watch.test_replay import EXPECTED


def _groups(db: Path) -> dict[tuple[str, int], set[tuple[Any, ...]]]:
    out: dict[tuple[str, int], set[tuple[Any, ...]]] = defaultdict(set)
    with sqlite3.connect(db) as conn:
        for row in conn.execute("SELECT host, at_ms, kind, subject, item, local_bps, total_bps, flags "
                                "FROM watch_samples WHERE minute = 0"):
            out[(row[0], row[1])].add(row[2:])
    return out


def _read(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def _kill_after(db: Path, rounds: int) -> bool:
    """Start a replay, SIGKILL it once ``rounds`` rounds are in; whether it was killed (not already done)."""
    proc = subprocess.Popen([sys.executable, "-m", "vnuma.cli", "--db", str(db), "watch", "--domstats-dir",
                             str(FLEET)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        while proc.poll() is None:
            if db.exists() and _read(db, "SELECT COUNT(*) FROM watch_samples WHERE kind = 'round'")[0][0] >= rounds:
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    return proc.returncode == -signal.SIGKILL


def test_kill_9_at_any_round_leaves_whole_rounds_and_the_watch_continues(tmp_path: Path) -> None:
    base = make_fleet(Cli(tmp_path / "base.db")).db
    whole = tmp_path / "whole.db"
    shutil.copy(base, whole)
    Cli(whole).ok("watch", "--domstats-dir", str(FLEET))
    reference = _groups(whole)
    killed = 0
    for n, rounds in enumerate((1, 9, 17, 26, 35, 44)):
        db = tmp_path / f"killed-{n}.db"
        shutil.copy(base, db)
        killed += _kill_after(db, rounds)
        kept = _groups(db)
        assert kept.keys() <= reference.keys()
        for key, rows in kept.items():
            assert rows == reference[key], f"round {key} half-written after the kill"
        for host, at_ms in _read(db, "SELECT host, at_ms FROM watch_readings"):
            assert at_ms == max(at for h, at in kept if h == host)  # the reading went with its round
        last = {h: max(at for hh, at in kept if hh == h) // 1000 for h, _ in kept}
        rest = copy_rounds(tmp_path / f"rest-{n}", lambda s: True)
        for path in rest.glob("*.txt"):
            host, at = path.name.split(".")[0].split("@")
            if int(at) <= last.get(host, 0):
                path.unlink()
        if any(rest.glob("*.txt")):
            Cli(db).ok("watch", "--domstats-dir", str(rest))
        assert _groups(db) == reference
        events = [(e["rule"], e["vm"], e["cell"], e["opened_at"], e["closed_at"]) for e in
                  Cli(db).ok("events", "--json").json()]
        assert events == EXPECTED
    assert killed >= 5  # the kills did land while the watch was writing
