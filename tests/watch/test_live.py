"""`vnuma watch` against libvirt's test driver: one round per host through the hypervisor adapter, the notes
for what the driver does not report, and a host that does not answer (stale, delaying no other)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, Cli

NODE = REPO / "vnuma" / "data" / "demo-node.xml"
CAPS = REPO / "vnuma" / "data" / "demo-capabilities.xml"

pytestmark = pytest.mark.libvirt


def _rounds(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT host, kind FROM watch_samples ORDER BY id").fetchall()


def test_one_live_round_reads_each_host_once_and_says_what_the_driver_does_not_report(running: Cli) -> None:
    res = running.ok("watch", "--once")
    assert res.stdout.splitlines() == ["watch: 1 rounds written over 1 hosts, 0 events opened, 0 closed; "
                                       "0 moves proposed, 0 applied, 0 withheld"]  # --act propose: the default
    assert "warning: host h: no memory-bandwidth or cache monitors reported" in res.stderr
    assert "warning: host h: no free pages reported: cell-drift is not checked there" in res.stderr
    assert "domain 'test' is no VM of the inventory" in res.stderr  # the driver's own domain
    assert _rounds(running.db) == [("h", "round")]
    with sqlite3.connect(running.db) as conn:
        (kept,) = conn.execute("SELECT domains FROM watch_readings WHERE host = 'h'").fetchone()
    assert kept == '{"v":{}}'  # v was read (the test driver has no memory or CPU stats for it)


def test_a_host_that_does_not_answer_is_stale_and_delays_no_other(running: Cli, tmp_path: Path) -> None:
    node = tmp_path / "slow-node.xml"
    shutil.copy(NODE, node)
    running.ok("host", "add", "slow", "--uri", f"test://{node}", "--capabilities", str(CAPS))
    node.unlink()
    os.mkfifo(node)  # opening it blocks until a writer comes: a host that accepts and never answers
    res = running.process("watch", "--once", "--interval", "1s")
    assert res.exit_code == 0, res.stderr
    assert "warning: host slow is stale: no answer within 1s" in res.stderr
    assert "watch: 1 rounds written over 1 hosts" in res.stdout
    assert ("h", "round") in _rounds(running.db) and all(h != "slow" for h, _ in _rounds(running.db))


def test_a_host_whose_libvirt_fails_is_stale_with_the_reason(running: Cli, tmp_path: Path) -> None:
    node = tmp_path / "gone-node.xml"
    shutil.copy(NODE, node)
    running.ok("host", "add", "gone", "--uri", f"test://{node}", "--capabilities", str(CAPS))
    node.unlink()
    res = running.ok("watch", "--once", "--hosts", "gone,h")
    assert "warning: host gone is stale: cannot connect to test://" in res.stderr
    assert "watch: 1 rounds written over 1 hosts" in res.stdout
