"""CLI fixtures: a runner bound to a fresh inventory file, and a database dump."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.dbdump import dump
from vnuma.cli import app

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class Cli:
    """Runs ``vnuma --db FILE --create ...`` in-process (CliRunner) or as a real process (the file is a
    fresh inventory, created by the first command; ``create=False`` runs without ``--create``)."""

    def __init__(self, db: Path, *, create: bool = True) -> None:
        self.db = db
        self.runner = CliRunner()
        self.options = ["--db", str(db), *(["--create"] if create else [])]

    def __call__(self, *args: str) -> Result:
        res = self.runner.invoke(app, [*self.options, *args], catch_exceptions=False)
        return Result(res.exit_code, res.stdout, res.stderr)

    def ok(self, *args: str) -> Result:
        res = self(*args)
        assert res.exit_code == 0, f"vnuma {' '.join(args)} -> {res.exit_code}\n{res.stdout}\n{res.stderr}"
        return res

    def process(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """Run vnuma as a separate process: real exit codes, real stderr."""
        proc = subprocess.run(
            [sys.executable, "-m", "vnuma.cli", *self.options, *args],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=REPO,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "inventory.db")


@pytest.fixture
def demo_pair(cli: Cli) -> Cli:
    """Two hosts of the embedded hypervisor, a and b (the demo shape: 4 cells x 32 pCPUs, 2 GPUs per cell),
    and tenant x."""
    cli.ok("host", "add", "a", "--demo")
    cli.ok("host", "add", "b", "--demo")
    cli.ok("tenant", "create", "x")
    return cli


DGX_CAPS = REPO / "tests" / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"
DGX_NODEDEV = REPO / "tests" / "data" / "nodedev" / "dgx-like.xml"


@pytest.fixture
def dgx(cli: Cli) -> Cli:
    """Host dgx (a 2-cell SMT host with resctrl and the DGX-like node devices: 8 GPUs, 8 NICs behind PCIe
    switches) and tenant t."""
    cli.ok("host", "import", "dgx", "--capabilities", str(DGX_CAPS), "--nodedev", str(DGX_NODEDEV))
    cli.ok("tenant", "create", "t")
    return cli


@pytest.fixture
def dumped() -> Callable[[Path], list[str]]:
    return dump


def refused_unchanged(cli: Cli, args: list[str], code: int, words: str) -> None:
    """``vnuma ARGS`` exits ``code`` with ``words`` on stderr, no traceback, and the inventory unchanged."""
    before = dump(cli.db)
    res = cli(*args)
    assert res.exit_code == code, res.stderr
    assert words in res.stderr and "Traceback" not in res.stderr
    assert dump(cli.db) == before
