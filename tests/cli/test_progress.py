"""Progress bars: drawn on a terminal for the long commands, never into pipes or --json.

Each command runs as a real process whose stdout and stderr are a
pseudo-terminal (as when an operator types it), and again with stdout a
pipe or with --json: then the output carries no bar.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli

pytestmark = pytest.mark.libvirt

TRACE = REPO / "examples" / "traces" / "dual-socket-2cell.json"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _drain(fd: int) -> str:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def on_terminal(cli: Cli, *args: str, stdout_tty: bool = True) -> tuple[int, str, str]:
    """Run ``vnuma ARGS`` with stderr (and stdout, unless ``stdout_tty`` is False) on a pseudo-terminal:
    (exit code, what the terminal showed without escape sequences, stdout when it was a pipe)."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vnuma.cli", *cli.options, *args],
            stdout=secondary if stdout_tty else subprocess.PIPE, stderr=secondary, stdin=subprocess.DEVNULL,
            text=True, cwd=REPO, timeout=300, env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
        )
        os.close(secondary)
        shown = _drain(primary)
    finally:
        os.close(primary)
    return proc.returncode, _ESCAPES.sub("", shown), proc.stdout or ""


@pytest.fixture
def pair(demo_pair: Cli) -> Cli:
    return demo_pair


def test_capacity_draws_a_bar_on_a_terminal_only(pair: Cli) -> None:
    shape = "vcpus=4,memory=4GiB"
    code, shown, _ = on_terminal(pair, "capacity", shape, "--count", "5")
    assert code == 0 and "placing copies" in shown and "5/5" in shown and "5 fit" in shown
    code, shown, piped = on_terminal(pair, "capacity", shape, "--count", "5", stdout_tty=False)
    assert code == 0 and shown == "" and "5 fit" in piped
    code, shown, _ = on_terminal(pair, "capacity", shape, "--count", "5", "--json")
    assert code == 0 and "placing copies" not in shown
    assert json.loads(shown)["fits"] == 5


def test_simulate_counts_the_trace_requests(cli: Cli) -> None:
    requests = len(json.loads(TRACE.read_text())["requests"])
    code, shown, _ = on_terminal(cli, "simulate", str(TRACE))
    assert code == 0 and "placing requests" in shown and f"{requests}/{requests}" in shown
    code, shown, _ = on_terminal(cli, "simulate", str(TRACE), "--json")
    assert code == 0 and "placing requests" not in shown and json.loads(shown)["requests"] == requests


def test_host_add_from_file_counts_hosts(cli: Cli, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("alpha test:///default\nbravo test:///default\n")
    code, shown, _ = on_terminal(cli, "host", "add", "--from-file", str(hosts))
    assert code == 0 and "adding" in shown and "2/2" in shown and "2 added" in shown


def test_a_drain_apply_shows_its_steps_and_a_bar(pair: Cli) -> None:
    for name in ("v1", "v2"):
        pair.ok("place", "x", "--vcpus", "4", "--memory", "4GiB", "--host", "a", "--name", name)
    code, shown, _ = on_terminal(pair, "host", "drain", "a", "--apply", "--yes")
    assert code == 0, shown
    assert "applying" in shown and "2/2" in shown
    assert re.search(r"step 1 v\d \(claims\): done", shown) and "run 1: done" in shown


def test_without_a_terminal_the_step_lines_stay_and_no_bar_is_drawn(pair: Cli) -> None:
    pair.ok("place", "x", "--vcpus", "4", "--memory", "4GiB", "--host", "a", "--name", "v1")
    res = pair.process("host", "drain", "a", "--apply", "--yes")
    assert res.exit_code == 0
    assert res.stderr.splitlines() == ["step 1 v1 (claims): started", "step 1 v1 (claims): done"]
