"""A fork server for the SIGKILL trials: imports vnuma once, then runs each command in a forked child.

Protocol on stdin/stdout, one JSON line each way: the server prints
``"ready"``; for each request ``{"argv": [...], "stderr": PATH}`` it forks a
child that runs ``vnuma.cli.main()`` with that argv (stdout to /dev/null,
stderr to PATH) and prints the child's pid; after the next input line
(``reap``; until then the pid cannot be reused, so the caller may kill it
safely) it waits for the child and prints ``{"exit": N}`` or ``{"signal": N}``.
The child is a real process running the real command; forking skips the
~1 s of imports per trial, so a hundred kills fit in a few seconds. No
engine exists in the server before a fork.
"""

from __future__ import annotations

import json
import os
import sys


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


if __name__ == "__main__":
    main()
