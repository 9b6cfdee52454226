"""A fork server for the SIGKILL trials: imports vnuma once, then runs each command in a forked child.

Protocol on stdin/stdout, one JSON line each way: the server prints
``"ready"``; for each request ``{"argv": [...], "stderr": PATH}`` it forks a
child that runs ``vnuma.cli.main()`` with that argv (stdout to /dev/null,
stderr to PATH) and prints the child's pid; after the next input line
(``reap``; until then the pid cannot be reused, so the caller may kill it
safely) it waits for the child and prints ``{"exit": N}`` or ``{"signal": N}``.
:class:`ForkServer` is the caller's side (started with ``python -m
tests.concurrency.forkserver``).
The child is a real process running the real command; forking skips the
~1 s of imports per trial, so a hundred kills fit in a few seconds. No
engine exists in the server before a fork.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any


def _child(argv: list[str], stderr: str) -> None:
    code = 70
    try:
        out = os.open(os.devnull, os.O_WRONLY)
        err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        import vnuma.cli

        sys.argv = ["vnuma", *argv]
        try:
            vnuma.cli.main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os._exit(code)


def main() -> None:
    """Serve fork requests until stdin closes."""
    import vnuma.cli
    import vnuma.inventory.db
    import vnuma.services.applying
    import vnuma.services.placing  # noqa: F401 - imported once here, inherited by every child

    print(json.dumps("ready"), flush=True)
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request["argv"], request["stderr"])
        print(json.dumps(pid), flush=True)
        sys.stdin.readline()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            print(json.dumps({"signal": os.WTERMSIG(status)}), flush=True)
        else:
            print(json.dumps({"exit": os.WEXITSTATUS(status)}), flush=True)


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

    def start(self, argv: list[str], stderr: Path) -> int:
        """Fork a child running ``vnuma ARGV`` (stderr to ``stderr``); its pid, ours to kill until :meth:`reap`."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "stderr": str(stderr)}) + "\n")
        self.proc.stdin.flush()
        pid: int = self._read()
        return pid

    @staticmethod
    def finished(pid: int) -> bool:
        """True once the child has exited (a zombie until reaped)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat[stat.rindex(")") + 2] == "Z"

    def reap(self) -> dict[str, int]:
        """Wait for the child started last: ``{"exit": N}`` or ``{"signal": N}``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("reap\n")
        self.proc.stdin.flush()
        result: dict[str, int] = self._read()
        return result

    def run(self, argv: list[str], stderr: Path, kill_after_s: float | None) -> dict[str, int]:
        """Run one command; SIGKILL it after ``kill_after_s`` (None: let it finish). Its exit status."""
        pid = self.start(argv, stderr)
        if kill_after_s is not None:
            time.sleep(kill_after_s)
            # The server reaps only after "reap", so this pid is still our child (maybe a zombie).
            os.kill(pid, signal.SIGKILL)
        return self.reap()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


if __name__ == "__main__":
    main()
