"""``vnuma host``: discovery through libvirt's test driver, file import, reading, bad input."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from vnuma.sources.demo import demo_capabilities_path, demo_node_path

pytestmark = pytest.mark.libvirt

HOST_KEYS = {"name", "uri", "source", "reserved_cpus", "cells", "devices"}
CELL_KEYS = {"id", "memory_kib", "memory_only", "cpus", "pages", "distances"}
CPU_KEYS = {"id", "socket", "die", "core", "siblings"}
DEVICE_KEYS = {"address", "kind", "numa_node", "vendor_id", "product_id", "parent"}
DATA = Path(__file__).resolve().parents[1] / "data"


def test_demo_host_is_discovered_through_the_test_driver(cli: Cli) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    shown = cli.ok("host", "show", "gpu-node-1", "--json").json()
    assert shown.keys() >= HOST_KEYS
    assert shown["source"] == "libvirt"
    assert shown["uri"] == "test:///vnuma-demo"  # resolved to this vnuma's node file when connecting
    assert len(shown["cells"]) == 4
    for cell in shown["cells"]:
        assert cell.keys() >= CELL_KEYS
        assert len(cell["cpus"]) == 32
        assert all(cpu.keys() >= CPU_KEYS for cpu in cell["cpus"])
        assert {"2048", "1048576"} <= cell["pages"].keys()
        assert cell["distances"][str(cell["id"])] == 10
    assert shown["cells"][0]["distances"] == {"0": 10, "1": 12, "2": 21, "3": 21}
    kinds = [d["kind"] for d in shown["devices"]]
    assert kinds.count("gpu") == 8 and kinds.count("nic") == 4
    assert all(d.keys() >= DEVICE_KEYS for d in shown["devices"])
    per_cell = {c["id"]: sum(1 for d in shown["devices"] if d["kind"] == "gpu" and d["numa_node"] == c["id"])
                for c in shown["cells"]}
    assert per_cell == {0: 2, 1: 2, 2: 2, 3: 2}


def test_host_list_json_has_the_documented_keys(cli: Cli) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    rows = cli.ok("host", "list", "--json").json()
    assert [r["name"] for r in rows] == ["gpu-node-1"]
    assert {"name", "cells", "cpus", "gpus", "memory_kib"} <= rows[0].keys()
    assert (rows[0]["cells"], rows[0]["cpus"], rows[0]["gpus"]) == (4, 128, 8)


def test_host_show_table_names_cells_devices_and_distances(cli: Cli) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    text = cli.ok("host", "show", "gpu-node-1").stdout
    for word in ("cells", "devices", "distances", "HUGEPAGES", "x 1 GiB", "gpu"):
        assert word in text


def test_import_from_capabilities_and_nodedev_files(cli: Cli, tmp_path: Path) -> None:
    nodedevs = []
    for name in ("pci_0000_17_00_0", "pci_0000_27_00_0"):
        xml = _virsh_nodedev(name)
        path = tmp_path / f"{name}.xml"
        path.write_text(xml)
        nodedevs += ["--nodedev", str(path)]
    cli.ok("host", "import", "offline-1", "--capabilities", str(demo_capabilities_path()), *nodedevs)
    shown = cli.ok("host", "show", "offline-1", "--json").json()
    assert shown["source"] == "capabilities" and shown["uri"] is None
    assert sorted(d["address"] for d in shown["devices"]) == ["0000:17:00.0", "0000:27:00.0"]


def _virsh_nodedev(name: str) -> str:
    out = subprocess.run(
        ["virsh", "-c", f"test://{demo_node_path()}", "nodedev-dumpxml", name],
        capture_output=True, text=True, check=True,
    )
    return out.stdout


def test_reserve_and_remove(cli: Cli) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("host", "reserve", "gpu-node-1", "--cpus", "0-1,64-65")
    assert cli.ok("host", "show", "gpu-node-1", "--json").json()["reserved_cpus"] == [0, 1, 64, 65]
    res = cli("host", "reserve", "gpu-node-1", "--cpus", "0,999")
    assert res.exit_code == 4 and "999" in res.stderr
    cli.ok("host", "remove", "gpu-node-1")
    assert cli.ok("host", "list", "--json").json() == []


def test_refresh_reports_no_change_then_a_change(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    caps = str(demo_capabilities_path())
    assert "no change" in cli.ok("host", "refresh", "gpu-node-1", "--capabilities", caps).stdout
    edited = tmp_path / "caps.xml"
    text = demo_capabilities_path().read_text()
    edited.write_text(text.replace("<pages unit='KiB' size='1048576'>", "<pages unit='KiB' size='1048576'>1", 1))
    out = cli.ok("host", "refresh", "gpu-node-1", "--capabilities", str(edited), "--json").json()
    assert out["changed"] and any("1048576 KiB pages" in c for c in out["changes"])


BAD_FILES = {
    "malformed": "<capabilities><host><topology>",
    "truncated": "<capabilities><host><topology><cells num='1'><cell id='0'><memory unit='KiB'>1024</mem",
    "empty": "",
    "wrong-kind": "<domain type='kvm'><name>x</name></domain>",
    "missing-sibling": (
        "<capabilities><host><cpu><arch>x86_64</arch></cpu><topology><cells num='1'><cell id='0'>"
        "<memory unit='KiB'>1048576</memory><cpus num='1'>"
        "<cpu id='0' socket_id='0' core_id='0' siblings='0,7'/></cpus></cell></cells></topology></host></capabilities>"
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES), ids=sorted(BAD_FILES))
def test_bad_capabilities_file_is_one_clear_line_and_changes_nothing(
    cli: Cli, tmp_path: Path, kind: str, dumped: Callable[[Path], list[str]]
) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    before = dumped(cli.db)
    bad = tmp_path / f"{kind}.xml"
    bad.write_text(BAD_FILES[kind])
    res = cli.process("host", "import", "h2", "--capabilities", str(bad))
    assert res.exit_code == 4, res.stderr
    assert res.stderr.startswith("error: ") and str(bad) in res.stderr.splitlines()[0]
    assert "Traceback" not in res.stderr
    assert dumped(cli.db) == before


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["host", "show", "nope"], 3, "nope"),
        (["host", "remove", "nope"], 3, "nope"),
        (["host", "add", "gpu-node-1", "--demo"], 9, "already"),
        (["host", "add", "h3", "--uri", "qemu+ssh://root@nohost.invalid/system"], 8, "nohost.invalid"),
        (["host", "add", "h3"], 4, "URI"),
        (["host", "import", "h3"], 4, "--capabilities"),
        (["host", "import", "h3", "--capabilities", "/nonexistent.xml"], 4, "/nonexistent.xml"),
        (["host", "reserve", "gpu-node-1", "--cpus", "3-1"], 4, "reversed"),
    ],
    ids=["show-unknown", "remove-unknown", "duplicate", "unreachable-uri", "no-uri", "no-file", "missing-file",
         "bad-cpuset"],
)
def test_errors_have_distinct_exit_codes_and_change_nothing(
    cli: Cli, args: list[str], code: int, needle: str, dumped: Callable[[Path], list[str]]
) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    before = dumped(cli.db)
    res = cli.process(*args)
    assert res.exit_code == code, res.stderr
    first = res.stderr.splitlines()[0]
    assert first.startswith("error: ") and needle in first
    assert "Traceback" not in res.stderr
    assert dumped(cli.db) == before


BAD_HOST_NAMES = ["bad 10", "a;b", "x$(id)", "", "_under", "a/b", "h" * 64, "naïve"]


@pytest.mark.parametrize("name", BAD_HOST_NAMES, ids=["space", "semicolon", "dollar", "empty", "underscore-first",
                                                      "slash", "64-chars", "non-ascii"])
def test_a_bad_host_name_is_refused_on_every_path_that_creates_a_host(
    cli: Cli, tmp_path: Path, dumped: Callable[[Path], list[str]], name: str
) -> None:
    """The one name rule of tenants and VMs (``vnuma.topology.names``): host add (libvirt and the demo), host
    import, a host list line (a name without blanks: blanks separate its fields), each exit 4 naming the
    name, nothing written."""
    cli.ok("host", "add", "gpu-node-1", "--demo")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"{name} test:///default\n")
    caps = str(DATA / "capabilities" / "laptop-1cell-minimal.xml")
    before = dumped(cli.db)
    paths = [["host", "add", name, "--demo"], ["host", "add", name, "--uri", "test:///default"],
             ["host", "import", name, "--capabilities", caps]]
    if name and name == "".join(name.split()):
        paths.append(["host", "add", "--from-file", str(hosts)])
    for args in paths:
        res = cli(*args)
        assert res.exit_code == 4 and f"bad host name {name!r}" in res.stderr, (args, res.stderr)
        assert dumped(cli.db) == before


def test_a_bare_uri_in_a_host_list_names_its_host_by_the_same_rule(
    cli: Cli, tmp_path: Path, dumped: Callable[[Path], list[str]]
) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("qemu+ssh://root@x$(id)/system\n")
    before = dumped(cli.db)
    res = cli("host", "add", "--from-file", str(hosts))
    assert res.exit_code == 4 and "line 1: bad host name 'x$(id)'" in res.stderr, res.stderr
    assert dumped(cli.db) == before


def test_lists_are_in_natural_order(cli: Cli) -> None:
    for name in ("node-10", "node-2", "node-1"):
        cli.ok("host", "add", name, "--demo")
    for name in ("t10", "t9"):
        cli.ok("tenant", "create", name)
    for i in (1, 10, 2, 11):
        cli.ok("place", "t9", "--vcpus", "1", "--memory", "1GiB", "--page-size", "4K", "--name", f"vm{i}")
    assert [h["name"] for h in cli.ok("host", "list", "--json").json()] == ["node-1", "node-2", "node-10"]
    assert [t["name"] for t in cli.ok("tenant", "list", "--json").json()] == ["t9", "t10"]
    assert [v["vm"] for v in cli.ok("vm", "list", "--json").json()] == ["vm1", "vm2", "vm10", "vm11"]
    table = cli.ok("vm", "list").stdout.splitlines()[1:]
    assert [line.split()[0] for line in table] == ["vm1", "vm2", "vm10", "vm11"]


def test_a_database_behind_head_is_refused_with_the_upgrade_hint(cli: Cli, dumped: Callable[[Path], list[str]]) -> None:
    import sqlite3

    cli.ok("host", "add", "gpu-node-1", "--demo")
    con = sqlite3.connect(cli.db)
    con.execute("UPDATE alembic_version SET version_num = 'an-older-revision'")
    con.commit()
    con.close()
    before = dumped(cli.db)
    res = cli.process("host", "list")
    assert res.exit_code == 6
    assert "vnuma db upgrade" in res.stderr
    assert dumped(cli.db) == before
