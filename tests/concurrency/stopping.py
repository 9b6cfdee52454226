"""Real ``vnuma`` processes halted at a failpoint (``VNUMA_FAILPOINT=NAME:stop``, :mod:`vnuma.services.failpoints`).

A test starts a command that stops itself with SIGSTOP at a named point,
waits until it is stopped there, acts (lets a racer finish first, sends the
SIGINT a Ctrl-C would), then lets it continue with SIGCONT and reads how it
ended: exit code, stdout and stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ended:
    """How a command ended."""

    code: int
    stdout: str
    stderr: str


def start(url: str, argv: list[str], failpoint: str | None = None) -> subprocess.Popen[str]:
    """``vnuma --db URL ARGV`` as a real process (stopping itself at ``failpoint`` when given)."""
    env = {k: v for k, v in os.environ.items() if k != "VNUMA_FAILPOINT"}
    if failpoint is not None:
        env["VNUMA_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-m", "vnuma.cli", "--db", url, *argv], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def run(url: str, *argv: str) -> Ended:
    """Run ``vnuma --db URL ARGV`` to its end."""
    return finish(start(url, list(argv)))


def wait_stopped(proc: subprocess.Popen[str]) -> None:
    """Wait until ``proc`` has stopped itself at its failpoint (it must not end first)."""
    while True:
        assert proc.poll() is None, f"the command ended (exit {proc.returncode}) before its failpoint"
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        if stat[stat.rindex(")") + 2] == "T":
            return
        time.sleep(0.02)


def resume(proc: subprocess.Popen[str], *, interrupt: bool = False) -> Ended:
    """Let a stopped ``proc`` go on (after a SIGINT, as Ctrl-C sends, when ``interrupt``), to its end."""
    if interrupt:
        proc.send_signal(signal.SIGINT)  # pending while stopped: delivered as it continues
    proc.send_signal(signal.SIGCONT)
    return finish(proc)


def finish(proc: subprocess.Popen[str]) -> Ended:
    """Wait for ``proc`` to end; how it did."""
    out, err = proc.communicate()
    return Ended(proc.returncode, out, err)
