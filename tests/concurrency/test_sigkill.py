"""``vnuma place`` / ``vnuma vm release`` killed by SIGKILL at random points leave the inventory consistent.

On SQLite and on PostgreSQL (the ``url`` fixture). Most trials run the real
command in a child forked from a server that has imported vnuma already
(``forkserver.py``), so the seeded kill delays fall on the command's
database work rather than on Python's imports; a few run ``python -m
vnuma.cli`` from scratch and are killed anywhere in their whole life. After
every trial: on SQLite ``PRAGMA integrity_check`` is ``ok`` (PostgreSQL has
no such check: a killed client's transaction is rolled back by the server
when its connection drops, which the next checks see), the inventory opens,
every VM holds exactly the claims its placement implies (no orphan claim,
no pCPU/device twice, no page pool over capacity), and a command that was
not killed either did its whole change or refused it with an exit code from
the documented set. Both backends run the same seeded trials.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.forkserver import ForkServer
from tests.concurrency.racing import TENANTS, make_fleet, recorded_vms
from vnuma.inventory import open_inventory

FORKED_TRIALS = 100
EXEC_TRIALS = 8
SEED = 20261202
CLEAN_EXITS = {0, 5, 9}  # placed/released, no fit, inventory busy


def _vm_names(url: str) -> list[str]:
    return sorted(recorded_vms(url))


def _command(rng: random.Random, url: str, trial: int) -> tuple[list[str], str]:
    """A random place or release; returns the argv and the VM it concerns."""
    names = _vm_names(url)
    if names and rng.random() < 0.4:
        vm = rng.choice(names)
        return ["--db", url, "vm", "release", vm], vm
    vm = f"k{trial:04d}"
    argv = ["--db", url, "place", rng.choice(TENANTS).name, "--name", vm,
            "--vcpus", str(rng.choice((1, 2, 4, 6))), "--memory", f"{rng.choice((1, 2, 4))}GiB",
            "--page-size", rng.choice(("1G", "2M")), "--gpus", str(rng.choice((0, 0, 1)))]
    return argv, vm


def _check(url: str, argv: list[str], vm: str, status: dict[str, int], stderr: Path) -> None:
    db = make_url(url)
    if db.get_backend_name() == "sqlite":
        assert db.database
        conn = sqlite3.connect(db.database)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()
    with open_inventory(url) as inv:
        inv.list_vms()
    assert inconsistencies(url) == [], argv
    if "exit" in status:
        assert status["exit"] in CLEAN_EXITS, f"{argv}: exit {status['exit']}: {stderr.read_text()}"
        assert "Traceback" not in stderr.read_text()
        if status["exit"] == 0:
            assert (vm in _vm_names(url)) == ("place" in argv), argv


@pytest.fixture
def db(url: str) -> str:
    """A small fleet on a fresh inventory: an SQLite file, then a PostgreSQL database."""
    make_fleet(url, hosts=2)
    return url


@pytest.mark.slow
def test_forked_commands_killed_at_random_points(db: str, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    server = ForkServer()
    try:
        # Calibrate on unkilled runs, and keep calibrating: the window follows the last few whole
        # commands, so kill delays span a command however fast the machine is or becomes (another
        # test's load ending mid-run once left most delays past the command's end).
        durations: deque[float] = deque(maxlen=5)
        killed = 0
        for trial in range(3 + FORKED_TRIALS):
            argv, vm = _command(rng, db, trial)
            delay = None if trial < 3 else rng.uniform(0, 1.25 * statistics.median(durations))
            start = time.perf_counter()
            status = server.run(argv, tmp_path / "err", delay)
            if status.get("signal") == signal.SIGKILL:
                killed += 1
            else:
                durations.append(time.perf_counter() - start)
            _check(db, argv, vm, status, tmp_path / "err")
    finally:
        server.close()
    print(f"\n{make_url(db).get_backend_name()}: {killed} of {FORKED_TRIALS} forked commands killed mid-way")
    assert killed >= FORKED_TRIALS // 4, f"only {killed} of {FORKED_TRIALS} commands were killed mid-way"


@pytest.mark.slow
def test_whole_processes_killed_at_random_points(db: str, tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    for trial in range(EXEC_TRIALS):
        argv, vm = _command(rng, db, trial)
        err = tmp_path / "err"
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "vnuma.cli", *argv], stdout=subprocess.DEVNULL, stderr=stderr
            )
            try:
                proc.wait(timeout=rng.uniform(0.2, 2.0))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
            code = proc.wait(timeout=60)
        status = {"signal": -code} if code < 0 else {"exit": code}
        _check(db, argv, vm, status, err)
