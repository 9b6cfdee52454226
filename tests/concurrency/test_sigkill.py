"""``vnuma place`` / ``vnuma vm release`` killed by SIGKILL at random points leave the inventory consistent.

Most trials run the real command in a child forked from a server that has
imported vnuma already (``forkserver.py``), so the seeded kill delays fall
on the command's database work rather than on Python's imports; a few run
``python -m vnuma.cli`` from scratch and are killed anywhere in their whole
life. After every trial: ``PRAGMA integrity_check`` is ``ok``, the
inventory opens, every VM holds exactly the claims its placement implies
(no orphan claim, no pCPU/device twice, no page pool over capacity), and a
command that was not killed either did its whole change or refused it with
an exit code from the documented set.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import TENANTS, make_fleet
from vnuma.inventory import open_inventory

FORKED_TRIALS = 100
EXEC_TRIALS = 8
SEED = 20261202
CLEAN_EXITS = {0, 5, 9}  # placed/released, no fit, inventory busy


class ForkServer:
    """A running ``tests.concurrency.forkserver`` process."""

    def __init__(self) -> None:
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.concurrency.forkserver"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root,
        )
        assert self._read() == "ready"

    def _read(self) -> Any:
        out: IO[str] | None = self.proc.stdout
        assert out is not None
        return json.loads(out.readline())

    def run(self, argv: list[str], stderr: Path, kill_after_s: float | None) -> dict[str, int]:
        """Run one command; SIGKILL it after ``kill_after_s`` (None: let it finish). Its exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "stderr": str(stderr)}) + "\n")
        self.proc.stdin.flush()
        pid = self._read()
        if kill_after_s is not None:
            time.sleep(kill_after_s)
            # The server reaps only after "reap", so this pid is still our child (maybe a zombie).
            os.kill(pid, signal.SIGKILL)
        self.proc.stdin.write("reap\n")
        self.proc.stdin.flush()
        result: dict[str, int] = self._read()
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _vm_names(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return sorted(name for (name,) in conn.execute("SELECT name FROM vms"))
    finally:
        conn.close()


def _command(rng: random.Random, db: Path, trial: int) -> tuple[list[str], str]:
    """A random place or release; returns the argv and the VM it concerns."""
    names = _vm_names(db)
    if names and rng.random() < 0.4:
        vm = rng.choice(names)
        return ["--db", str(db), "vm", "release", vm], vm
    vm = f"k{trial:04d}"
    argv = ["--db", str(db), "place", rng.choice(TENANTS).name, "--name", vm,
            "--vcpus", str(rng.choice((1, 2, 4, 6))), "--memory", f"{rng.choice((1, 2, 4))}GiB",
            "--page-size", rng.choice(("1G", "2M")), "--gpus", str(rng.choice((0, 0, 1)))]
    return argv, vm


def _check(db: Path, argv: list[str], vm: str, status: dict[str, int], stderr: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    with open_inventory(f"sqlite:///{db}") as inv:
        inv.list_vms()
    assert inconsistencies(f"sqlite:///{db}") == [], argv
    if "exit" in status:
        assert status["exit"] in CLEAN_EXITS, f"{argv}: exit {status['exit']}: {stderr.read_text()}"
        assert "Traceback" not in stderr.read_text()
        if status["exit"] == 0:
            assert (vm in _vm_names(db)) == ("place" in argv), argv


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.db"
    make_fleet(f"sqlite:///{path}", hosts=2)
    return path


@pytest.mark.slow
def test_forked_commands_killed_at_random_points(db: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    server = ForkServer()
    try:
        # Calibrate on unkilled runs: kill delays then span a whole command, however fast the machine.
        durations = []
        for trial in range(3):
            argv, vm = _command(rng, db, trial)
            start = time.perf_counter()
            status = server.run(argv, tmp_path / "err", None)
            durations.append(time.perf_counter() - start)
            _check(db, argv, vm, status, tmp_path / "err")
        longest = 1.25 * statistics.median(durations)
        killed = 0
        for trial in range(3, 3 + FORKED_TRIALS):
            argv, vm = _command(rng, db, trial)
            status = server.run(argv, tmp_path / "err", rng.uniform(0, longest))
            killed += status.get("signal") == signal.SIGKILL
            _check(db, argv, vm, status, tmp_path / "err")
    finally:
        server.close()
    assert killed >= FORKED_TRIALS // 4, f"only {killed} of {FORKED_TRIALS} commands were killed mid-way"


@pytest.mark.slow
def test_whole_processes_killed_at_random_points(db: Path, tmp_path: Path) -> None:
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
