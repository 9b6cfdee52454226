"""``vnuma host refresh`` of hosts added with ``--demo`` or ``--capabilities FILE``: read the same way again.

The inventory records the override (``hosts.topology_override``): the marker
``demo`` (the package's demo host, never a path of the checkout) or the
file's absolute path; ``refresh NAME`` and ``refresh --all`` use it, and an
explicit ``refresh NAME --capabilities FILE`` replaces it.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import vnuma.sources.demo
from tests.cli.conftest import Cli
from vnuma.sources.demo import demo_capabilities_path

pytestmark = pytest.mark.libvirt

TEST_DRIVER = "test:///default"  # 2 cells x 8 CPUs: not the 4-cell demo topology
PAGES_CHANGE = "cell 0: 1048576 KiB pages 160 -> 60"


def _override(cli: Cli, name: str) -> str | None:
    con = sqlite3.connect(cli.db)
    try:
        row = con.execute("SELECT topology_override FROM hosts WHERE name = ?", (name,)).fetchone()
    finally:
        con.close()
    assert row is not None, name
    return row[0]


def _fewer_1g_pages(src: Path, dst: Path) -> Path:
    """A copy of a capabilities file whose cell 0 has 60 pages of 1 GiB (not 160: 1160 would not fit its memory,
    and the import would cap them)."""
    text = src.read_text()
    old = "<pages unit='KiB' size='1048576'>160<"
    assert old in text
    dst.write_text(text.replace(old, "<pages unit='KiB' size='1048576'>60<", 1))
    return dst


def _refresh_all(cli: Cli) -> dict[str, dict[str, object]]:
    doc = cli.ok("host", "refresh", "--all", "--json").json()
    return {h["name"]: h for h in doc["hosts"]}


def test_a_demo_host_is_refreshed_from_the_shipped_demo_host(cli: Cli) -> None:
    cli.ok("host", "add", "lab", "--demo")
    before = cli.ok("host", "show", "lab", "--json").json()
    assert _override(cli, "lab") == "demo"
    assert cli.ok("host", "refresh", "lab").stdout == "host lab: no change\n"
    lab = _refresh_all(cli)["lab"]
    assert (lab["result"], lab["changes"]) == ("refreshed", [])
    assert cli.ok("host", "show", "lab", "--json").json() == before


def test_a_host_added_with_a_capabilities_file_is_refreshed_from_that_file(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(demo_capabilities_path(), tmp_path / "caps.xml")
    cli.ok("host", "add", "gpu-1", "--uri", TEST_DRIVER, "--capabilities", "caps.xml")
    assert _override(cli, "gpu-1") == str(tmp_path / "caps.xml")  # absolute, whatever the working directory
    out = cli.ok("host", "refresh", "gpu-1", "--json").json()
    assert (out["changed"], out["changes"]) == (False, [])
    _fewer_1g_pages(demo_capabilities_path(), tmp_path / "caps.xml")
    gpu = _refresh_all(cli)["gpu-1"]
    assert gpu["result"] == "refreshed"
    assert gpu["changes"] == [PAGES_CHANGE]
    assert cli.ok("host", "refresh", "gpu-1").stdout == "host gpu-1: no change\n"
    assert len(cli.ok("host", "show", "gpu-1", "--json").json()["cells"]) == 4


def test_an_explicit_capabilities_file_wins_and_is_recorded(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "lab", "--demo")
    edited = _fewer_1g_pages(demo_capabilities_path(), tmp_path / "edited.xml")
    out = cli.ok("host", "refresh", "lab", "--capabilities", str(edited), "--json").json()
    assert out["changes"] == [PAGES_CHANGE]
    assert _override(cli, "lab") == str(edited)
    # Read from the recorded file again, not from the demo host: nothing changes.
    assert cli.ok("host", "refresh", "lab").stdout == "host lab: no change\n"
    assert _refresh_all(cli)["lab"]["changes"] == []


def test_a_missing_override_file_is_exit_4_naming_the_file_and_the_fix(
    cli: Cli, tmp_path: Path, dumped: Callable[[Path], list[str]]
) -> None:
    caps = tmp_path / "caps.xml"
    shutil.copy(demo_capabilities_path(), caps)
    cli.ok("host", "add", "gpu-1", "--uri", TEST_DRIVER, "--capabilities", str(caps))
    cli.ok("host", "add", "lab", "--demo")
    caps.unlink()
    before = dumped(cli.db)
    res = cli.process("host", "refresh", "gpu-1")
    assert res.exit_code == 4, res.stderr
    assert res.stderr.splitlines() == [
        f"error: host 'gpu-1' is refreshed from the capabilities file {caps}, which is missing",
        "hint: put the file back, or refresh from another: vnuma host refresh gpu-1 --capabilities FILE",
    ]
    res = cli("host", "refresh", "--all", "--json")
    assert res.exit_code == 4
    by_name = {h["name"]: h for h in res.json()["hosts"]}
    assert by_name["gpu-1"]["result"] == "failed" and str(caps) in by_name["gpu-1"]["detail"]
    assert "--capabilities FILE" in by_name["gpu-1"]["hint"]
    assert by_name["lab"]["result"] == "refreshed"
    assert dumped(cli.db) == before


def test_a_demo_host_outlives_a_moved_checkout(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = demo_capabilities_path().parent
    old, new = tmp_path / "old" / "data", tmp_path / "new" / "data"
    shutil.copytree(shipped, old)
    monkeypatch.setattr(vnuma.sources.demo, "data_dir", lambda: old)
    cli.ok("host", "add", "lab", "--demo")
    shutil.move(old, new)
    monkeypatch.setattr(vnuma.sources.demo, "data_dir", lambda: new)
    # The stored URI names no path: the moved checkout's node file is found when connecting.
    out = cli.ok("host", "refresh", "lab", "--json").json()
    assert out["changes"] == []
    assert cli.ok("host", "show", "lab", "--json").json()["uri"] == "test:///vnuma-demo"
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "2", "--memory", "2GiB", "--name", "v")
    assert cli.ok("apply", "v").stdout.strip().endswith("defined")
    assert _override(cli, "lab") == "demo"
    assert _refresh_all(cli)["lab"]["changes"] == []
