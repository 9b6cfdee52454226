"""`vnuma watch` against the real libvirtd of the test suite: a running TCG guest read live, round after round.

What this machine's libvirt reports is read and kept: the guest's CPU time (its CPU use from the second round on),
its resident memory and balloon size (``balloon.rss``, ``balloon.current``: QEMU reports both for any running
domain, balloon device or not; rss from the QEMU process's /proc/PID/stat), and each host cell's free pages
(``getFreePages``), set against what the inventory holds free. What it cannot report (no resctrl monitors: no memory
bandwidth or LLC occupancy here) is one warning, not an error.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.integration.conftest import remove_domain

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_a_live_watch_reads_a_running_guest_and_the_hosts_free_pages(libvirtd: str, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "local", "--uri", libvirtd)
    cli.ok("tenant", "create", "e2e")
    name = f"vnuma-watch-{os.getpid()}"
    cli.ok("place", "e2e", "--vcpus", "1", "--memory", "128MiB", "--page-size", "4K", "--name", name)
    try:
        cli.ok("apply", name, "--domain-type", "qemu", "--start")
        first = cli.ok("watch", "--once", "--act", "off")
        assert first.stdout.startswith("watch: 1 rounds written over 1 hosts"), first.stdout
        assert "stale" not in first.stderr and "Traceback" not in first.stderr
        time.sleep(1.5)  # the guest (spinning in its firmware: no disk) burns CPU time meanwhile
        second = cli.ok("watch", "--once", "--act", "off")
        assert "warning: host local: no memory-bandwidth or cache monitors reported" in second.stderr, second
        rounds = _rows(cli.db, "SELECT at_ms FROM watch_samples WHERE kind = 'round' AND host = 'local'")
        assert len(rounds) == 2
        # The first round has no rate (nothing before it); the second has the guest's CPU use, over the real
        # time between the two readings.
        cpu = _rows(cli.db, f"SELECT cpu, rss_kib, balloon_kib FROM watch_samples WHERE kind = 'vm' AND "
                            f"subject = '{name}' ORDER BY at_ms")
        assert cpu and cpu[-1][0] is not None and cpu[-1][0] > 0, cpu
        # The same call's balloon stats: the QEMU process's resident memory on the host, and the balloon's size
        # (the guest's memory: no balloon driver runs in a guest spinning in its firmware to change it).
        assert cpu[-1][1] is not None and cpu[-1][1] > 0, cpu
        assert cpu[-1][2] == 128 * 1024, cpu
        # Every cell of the inventory's host was read from the daemon: free memory as the host reports it.
        cells = {c["id"] for c in cli.ok("host", "show", "local", "--json").json()["cells"]}
        read = _rows(cli.db, "SELECT item, free_kib FROM watch_samples WHERE kind = 'cell' AND host = 'local'")
        assert {item for item, _ in read} == cells
        assert all(free is not None and free > 0 for _, free in read), read
    finally:
        remove_domain(libvirtd, name)
    cli.ok("vm", "release", name)
