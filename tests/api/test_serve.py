"""`vnuma serve` says on stderr, once its address is bound, where it listens, on which inventory and with how
many workers; an address it cannot bind is one error line and exit 9."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.conftest import start
from tests.cli.conftest import REPO, Cli


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_says_where_it_listens_the_inventory_and_its_workers(tmp_path: Path, workers: int) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("db", "upgrade")
    log = tmp_path / "serve.log"
    base, proc = start(str(cli.db), log, "--workers", str(workers))
    try:
        first = log.read_text().splitlines()[0]
    finally:
        proc.terminate()
        proc.wait(30)
    word = "worker" if workers == 1 else "workers"
    assert re.fullmatch(rf"vnuma serve: listening on {re.escape(base)}, inventory sqlite:///\S+inventory\.db, "
                        rf"{workers} {word}", first), first


def test_an_address_in_use_is_refused_with_one_line(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("db", "upgrade")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run(
            [sys.executable, "-m", "vnuma.cli", "--db", str(cli.db), "serve", "--listen", f"127.0.0.1:{port}"],
            capture_output=True, text=True, cwd=REPO, timeout=120,
        )
    assert res.returncode == 9, res.stderr
    assert res.stderr.splitlines()[0] == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert "listening" not in res.stderr and "Traceback" not in res.stderr
