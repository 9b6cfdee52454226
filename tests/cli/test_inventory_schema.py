"""Which inventories vnuma creates: a new SQLite file, yes; a PostgreSQL database, only `vnuma db upgrade`.

A PostgreSQL database that was never upgraded (no tables at all) is refused
by every command that opens the inventory, exactly as an SQLite inventory
whose schema is behind: exit 6, ``hint: run `vnuma db upgrade```, nothing
written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect
from typer.testing import CliRunner

from tests.cli.conftest import REPO, Result
from tests.cli.test_docs import COMMANDS
from tests.inventory.test_migrations import TABLES
from vnuma.cli import app
from vnuma.inventory import head_revision, make_engine
from vnuma.sources.demo import demo_capabilities_path


def _process(url: str, *args: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "vnuma.cli", "--db", url, *args],
        capture_output=True, text=True, cwd=REPO, timeout=120, env=dict(os.environ),
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _assert_refused_as_behind(res: Result) -> None:
    assert res.exit_code == 6, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("error: inventory ")
    assert lines[0].endswith(f"schema is at revision base, this vnuma needs {head_revision()}")
    assert lines[1:] == ["hint: run `vnuma db upgrade`"]
    assert res.stdout == ""


def test_only_a_sqlite_file_is_created_on_first_use_a_postgres_database_waits_for_db_upgrade(url: str) -> None:
    res = _process(url, "host", "list", "--json")
    if url.startswith("sqlite"):
        # A file named with --db is created only when asked (the default location on first use).
        assert res.exit_code == 6 and "does not exist" in res.stderr
        res = _process(url, "--create", "host", "list", "--json")
        assert (res.exit_code, res.json()) == (0, [])
        assert _tables(url) == TABLES
    else:
        _assert_refused_as_behind(res)
        assert _tables(url) == set()
        upgraded = _process(url, "db", "upgrade")
        assert upgraded.exit_code == 0, upgraded.stderr
        assert upgraded.stdout == f"inventory at revision {head_revision()}\n"
        assert _tables(url) == TABLES
    assert _process(url, "host", "import", "h1", "--capabilities", str(demo_capabilities_path())).exit_code == 0
    res = _process(url, "host", "list", "--json")
    assert res.exit_code == 0, res.stderr
    assert [h["name"] for h in res.json()] == ["h1"]


# One invocation of every command that opens the inventory, with arguments that get it that far.
OPENING = {
    ("apply",): ["apply", "vm1"],
    ("db", "check"): ["db", "check"],
    ("host", "add"): ["host", "add", "h1", "--demo"],
    ("host", "import"): ["host", "import", "h1", "--capabilities", str(demo_capabilities_path())],
    ("host", "list"): ["host", "list"],
    ("log",): ["log"],
    ("host", "refresh"): ["host", "refresh", "h1"],
    ("host", "remove"): ["host", "remove", "h1"],
    ("host", "reserve"): ["host", "reserve", "h1", "--cpus", "0"],
    ("host", "show"): ["host", "show", "h1"],
    ("host", "cordon"): ["host", "cordon", "h1"],
    ("host", "uncordon"): ["host", "uncordon", "h1"],
    ("host", "drain"): ["host", "drain", "h1"],
    ("place",): ["place", "acme", "--vcpus", "1", "--memory", "1GiB"],
    ("rebalance",): ["rebalance"],
    ("reconcile",): ["reconcile"],
    ("render",): ["render", "vm1"],
    ("stats",): ["stats"],
    ("watch",): ["watch", "--once"],
    ("events",): ["events"],
    ("events", "apply"): ["events", "apply", "1"],
    ("capacity",): ["capacity", "vcpus=1,memory=1GiB"],
    ("trace", "export"): ["trace", "export"],
    ("tenant", "create"): ["tenant", "create", "acme"],
    ("tenant", "list"): ["tenant", "list"],
    ("tenant", "remove"): ["tenant", "remove", "acme"],
    ("tenant", "show"): ["tenant", "show", "acme"],
    ("tenant", "update"): ["tenant", "update", "acme", "--max-vcpus", "8"],
    ("vm", "list"): ["vm", "list"],
    ("vm", "release"): ["vm", "release", "vm1"],
    ("vm", "show"): ["vm", "show", "vm1"],
    ("vm", "guest-view"): ["vm", "guest-view", "vm1"],
    ("vm", "start"): ["vm", "start", "vm1"],
    ("vm", "stop"): ["vm", "stop", "vm1"],
    ("vm", "undefine"): ["vm", "undefine", "vm1"],
    ("vm", "repin"): ["vm", "repin", "vm1"],
    ("vm", "migrate"): ["vm", "migrate", "vm1", "--to", "h1"],
    ("token", "create"): ["token", "create", "t1", "--role", "admin"],
    ("token", "list"): ["token", "list"],
    ("token", "revoke"): ["token", "revoke", "t1"],
    ("serve",): ["serve", "--listen", "127.0.0.1:1"],
    ("gpu-profile", "import"): ["gpu-profile", "import", "h100-sxm5-80gb"],
    ("device", "taint"): ["device", "taint", "h1", "0000:10:00.0", "--reason", "x"],
    ("device", "untaint"): ["device", "untaint", "h1", "0000:10:00.0"],
    ("device", "clean"): ["device", "clean", "h1", "0000:10:00.0"],
    ("device", "set"): ["device", "set", "h1", "0000:10:00.0", "--after-release", "clean"],
    ("device", "list"): ["device", "list"],
    ("device", "health"): ["device", "health", "h1", "--kernel-log",
                           str(REPO / "tests/data/nvidia-smi-health/written-dmesg.log")],
    ("host", "set"): ["host", "set", "h1", "--after-release", "clean"],
    ("gpu-profile", "list"): ["gpu-profile", "list"],
    ("gpu-profile", "show"): ["gpu-profile", "show", "X"],
    ("gpu-profile", "remove"): ["gpu-profile", "remove", "X"],
}
# `db status` reads the revision without opening; `db upgrade` is the way out; `simulate`
# and `trace` have no inventory.
NOT_OPENING = {
    ("config", "show"), ("db", "status"), ("db", "upgrade"), ("simulate",), ("trace", "generate"), ("trace", "list")
}
BULK = [["host", "refresh", "--all"], ["host", "add", "--from-file", "HOSTS"]]


def test_the_table_names_every_command() -> None:
    assert set(OPENING) | NOT_OPENING == set(COMMANDS)


@pytest.mark.postgres
def test_every_command_refuses_a_never_upgraded_postgres_database(pg_url: str, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h1 test:///default\n")
    runner = CliRunner()
    for args in [*OPENING.values(), *BULK]:
        argv = [str(hosts) if a == "HOSTS" else a for a in args]
        res = runner.invoke(app, ["--db", pg_url, *argv], catch_exceptions=False)
        assert res.exit_code == 6, (args, res.output)
        _assert_refused_as_behind(Result(res.exit_code, res.stdout, res.stderr))
    assert _tables(pg_url) == set()
    status = runner.invoke(app, ["--db", pg_url, "db", "status", "--json"], catch_exceptions=False)
    assert status.exit_code == 0
    assert _tables(pg_url) == set()
