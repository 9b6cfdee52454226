"""Every refusal exits as the exit-code table of docs/errors.md says, with one line on stderr, and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import make_host
from tests.cli.conftest import Cli
from tests.sources.capswriter import capabilities_xml


@pytest.fixture
def small(cli: Cli, tmp_path: Path) -> Cli:
    """One host (2 cells x 4 cores x 2 threads, 1 GiB pages), tenant a with one VM."""
    caps = tmp_path / "caps.xml"
    host = make_host("h", cells=2, cores_per_cell=4, smt=2, memory_gib=16, hugepages_2m_gib=2, hugepages_1g_gib=8)
    caps.write_text(capabilities_xml(host))
    cli.ok("host", "import", "h", "--capabilities", str(caps))
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--name", "a1")
    return cli


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if not line.startswith("hint: ")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("option", ["--host", "--tenant"])
def test_vm_list_filtered_by_an_unknown_name_is_exit_3(small: Cli, option: str) -> None:
    res = small("vm", "list", option, "nosuch")
    assert res.exit_code == 3, res.stderr
    assert "'nosuch' is not in the inventory" in _one_error_line(res.stderr)
    assert res.stdout == ""
    # The known names still filter.
    assert [v["vm"] for v in small.ok("vm", "list", "--host", "h", "--json").json()] == ["a1"]
    assert [v["vm"] for v in small.ok("vm", "list", "--tenant", "a", "--json").json()] == ["a1"]


@pytest.mark.parametrize("name", ["", " ", "a b", "x" * 64])
def test_an_empty_or_invalid_vm_name_is_refused_not_replaced(
    small: Cli, dumped: Callable[[Path], list[str]], name: str
) -> None:
    before = dumped(small.db)
    res = small("place", "a", "--vcpus", "1", "--memory", "1GiB", "--name", name)
    assert res.exit_code == 4, res.stderr
    assert "bad VM name" in _one_error_line(res.stderr)
    assert dumped(small.db) == before


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ("vcpus=abc", "vcpus must be a whole number, got 'abc'"),
        ("vcpus=4,memory=lots", "lots"),
        ("vcpus=4", "memory is required"),
        ("gpus=1", "vcpus and memory are required"),
        ("vcpus=4,memory=1GiB,gpus=-1", "gpus must be a whole number, got '-1'"),
    ],
)
def test_make_room_for_names_the_bad_value(small: Cli, shape: str, said: str) -> None:
    res = small("rebalance", "--make-room-for", shape)
    assert res.exit_code == 4, res.stderr
    assert said in _one_error_line(res.stderr)


def test_debug_shows_the_traceback_and_keeps_the_exit_code(small: Cli) -> None:
    plain = small.process("place", "a", "--vcpus", "1", "--memory", "12XB")
    debug = small.process("--debug", "place", "a", "--vcpus", "1", "--memory", "12XB")
    assert plain.exit_code == debug.exit_code == 4, (plain.stderr, debug.stderr)
    assert "Traceback" not in plain.stderr
    assert "Traceback (most recent call last)" in debug.stderr
    # The error line and its hint follow the traceback, as without --debug.
    assert debug.stderr.endswith(plain.stderr), (debug.stderr, plain.stderr)
    unknown = small.process("--debug", "vm", "show", "nosuch")
    assert unknown.exit_code == 3 and "Traceback" in unknown.stderr


def _quota_tenant(cli: Cli, name: str, *quota: str, used_vcpus: int = 0) -> None:
    cli.ok("tenant", "create", name, *quota)
    if used_vcpus:
        cli.ok("place", name, "--vcpus", str(used_vcpus), "--memory", "1GiB", "--name", f"{name}-1")


@pytest.mark.parametrize(
    ("quota", "used", "asked", "said"),
    [
        # Alone over the GPU quota: that quota is named even when the vCPU quota is used up too
        # (no release makes room for it).
        (("--max-vcpus", "2", "--max-gpus", "0"), 2, ("--gpus", "1"), "asks for 1 GPU, more than the quota of 0"),
        (("--max-gpus", "0"), 0, ("--gpus", "1"), "asks for 1 GPU, more than the quota of 0"),
        (("--max-gpus", "0"), 0, ("--gpus", "1", "--host", "gpu"), "asks for 1 GPU, more than the quota of 0"),
        # A GPU-only VM counts at least one vCPU up front...
        (("--max-vcpus", "2"), 2, ("--gpus", "1"), "2 vCPUs in use"),
        # ... and the size the host gives it (16 vCPUs: one GPU's share of its cell).
        (("--max-vcpus", "8"), 0, ("--gpus", "1"), "asks for 16 vCPUs, more than the quota of 8"),
        (("--max-vcpus", "8"), 0, ("--gpus", "1", "--host", "gpu"), "asks for 16 vCPUs, more than the quota of 8"),
        (("--max-vcpus", "4"), 0, ("--vcpus", "5", "--memory", "1GiB"), "asks for 5 vCPUs"),
        (("--max-vcpus", "4"), 2, ("--vcpus", "3", "--memory", "1GiB"), "2 vCPUs in use + 3 asked"),
    ],
)
def test_every_quota_refusal_is_exit_9_and_names_the_quota(
    cli: Cli, dumped: Callable[[Path], list[str]], quota: tuple[str, ...], used: int,
    asked: tuple[str, ...], said: str,
) -> None:
    cli.ok("host", "add", "gpu", "--demo")  # 4 cells x 32 threads, 2 GPUs per cell
    _quota_tenant(cli, "q", *quota, used_vcpus=used)
    before = dumped(cli.db)
    res = cli("place", "q", *asked)
    assert res.exit_code == 9, res.stderr
    assert said in _one_error_line(res.stderr)
    assert "quota" in res.stderr and "vnuma tenant update q" in res.stderr
    assert dumped(cli.db) == before


def test_version_comes_from_the_package_metadata(cli: Cli) -> None:
    from importlib.metadata import version

    res = cli.process("--version")
    assert (res.exit_code, res.stdout, res.stderr) == (0, f"vnuma {version('vnuma')}\n", "")


def test_sub_groups_list_every_command_and_no_completion_options(cli: Cli) -> None:
    from vnuma.cli import COMMANDS, _load

    for name, (_module, _attribute, help_text) in COMMANDS.items():
        if help_text is None:
            continue
        res = cli.ok(name, "--help")
        assert "--install-completion" not in res.stdout, name
        commands = _load(name).commands  # type: ignore[union-attr]
        for sub in commands:
            assert sub in res.stdout, (name, sub)
        if name == "vm":
            assert all(sub in help_text for sub in commands), help_text


@pytest.mark.parametrize(
    "args",
    [
        ("host", "list"),
        ("host", "list", "--json"),
        ("vm", "list"),
        ("vm", "list", "--tenant", "a", "--json"),
        ("host", "show", "h"),
        ("vm", "show", "a1", "--json"),
    ],
)
def test_read_commands_load_neither_the_orm_nor_the_engine(small: Cli, args: tuple[str, ...]) -> None:
    """``host list/show`` and ``vm list/show`` read through sqlite3 (vnuma.inventory.reading): no SQLAlchemy,
    no numpy."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['vnuma', '--db', {str(small.db)!r}, *{list(args)!r}]\n"
        "try:\n    runpy.run_module('vnuma.cli', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic', 'numpy'))\n"
        "print(heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "[]"
    assert ("a1" in proc.stdout) == (args[0] == "vm")
    assert args[:2] != ("host", "show") or "host h " in proc.stdout


def test_an_explicit_inventory_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "no" / "such" / "dir" / "inv.db"
    bare = Cli(where, create=False)
    for args in (("host", "list"), ("tenant", "create", "t"), ("vm", "list", "--json")):
        res = bare.process(*args)
        assert res.exit_code == 6, res.stderr
        assert _one_error_line(res.stderr) == f"error: inventory {where} does not exist"
        assert "db upgrade" in res.stderr and "--create" in res.stderr
        assert not (tmp_path / "no").exists()
    env = Cli(tmp_path / "env.db", create=False)
    res = subprocess.run(
        [sys.executable, "-m", "vnuma.cli", "host", "list"], capture_output=True, text=True,
        env={**os.environ, "VNUMA_DB": str(tmp_path / "env.db")}, timeout=60,
    )
    assert res.returncode == 6 and "does not exist" in res.stderr
    status = env.process("db", "status", "--json")  # reads a missing file as new, creates nothing
    assert status.exit_code == 0 and not env.db.exists()
    assert env.process("db", "upgrade").exit_code == 0 and env.db.exists()
    assert env.process("host", "list", "--json").stdout == "[]\n"
    created = Cli(tmp_path / "made" / "inv.db", create=True)
    assert created.process("host", "list", "--json").stdout == "[]\n"


def test_the_default_inventory_is_created_on_first_use(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "vnuma.cli", "host", "list", "--json"], capture_output=True, text=True,
        env={**{k: v for k, v in os.environ.items() if k != "VNUMA_DB"}, "XDG_DATA_HOME": str(tmp_path)},
        timeout=60,
    )
    assert (res.returncode, res.stdout) == (0, "[]\n"), res.stderr
    assert (tmp_path / "vnuma" / "inventory.db").is_file()
