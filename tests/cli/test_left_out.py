"""Partly unusable hosts: recorded with every part left out said on stderr and kept for `host show`;
`--strict` refuses them (exit 4, nothing written).

Real files: hwloc's own offline-node snapshot, libvirt's own capabilities test data (hugepage pools
larger than their cells), the project's node-device fixtures with one device listed twice and one that
cannot be read; through `host import`, `host add` (libvirt's test driver), `host refresh` (one host and
`--all`). The HTTP API: tests/api/test_left_out.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli, refused_unchanged
from tests.dbdump import dump
from vnuma.sources.demo import demo_capabilities_path, demo_node_path

DATA = REPO / "tests" / "data"
OFFLINE = DATA / "hwloc" / "upstream" / "linux" / "offline-cpu0-node0.xml"
VIRCAPS = DATA / "libvirt" / "vircaps2xmldata" / "vircaps-x86_64-basic.xml"
HMAT = DATA / "libvirt" / "vircaps2xmldata" / "vircaps-x86_64-hmat.xml"
PUS = "PUs 4,6,8,10,12,14,16,18,20"
PU_LINE = f"warning: {PUS}: in no NUMA node, left out"
FIRST_POOL = "6143 of cell 0's 6144 × 1 GiB pages"


def test_import_says_what_it_left_out_and_host_show_keeps_it(cli: Cli) -> None:
    res = cli.ok("host", "import", "r630", "--hwloc", str(OFFLINE))
    assert res.stderr.splitlines() == [PU_LINE]
    assert res.stdout == "added host r630: 1 cell, 8 CPUs, 0 GPUs, 64 GiB\n"
    table = cli.ok("host", "show", "r630").stdout.splitlines()
    assert table[-3] == "left out when the host was read (vnuma host import --strict refuses such a host)"
    assert table[-2].split() == ["PART", "WHY"] and table[-1].split() == [*PUS.split(), "in", "no", "NUMA", "node"]
    left_out = [{"what": PUS, "why": "in no NUMA node"}]
    assert cli.ok("host", "show", "r630", "--json").json()["left_out"] == left_out
    again = cli.ok("host", "import", "r630-b", "--hwloc", str(OFFLINE), "--json")
    assert again.json()["left_out"] == left_out and again.stderr.splitlines() == [PU_LINE]


def test_a_host_with_nothing_left_out_says_nothing(cli: Cli) -> None:
    res = cli.ok("host", "import", "demo", "--capabilities", str(demo_capabilities_path()), "--strict")
    assert res.stderr == ""
    assert cli.ok("host", "show", "demo", "--json").json()["left_out"] == []
    assert "left out" not in cli.ok("host", "show", "demo").stdout


def test_strict_refuses_naming_the_file_the_first_part_and_how_many_more(cli: Cli) -> None:
    cli.ok("host", "list")
    before = dump(cli.db)
    res = cli.process("host", "import", "r630", "--hwloc", str(OFFLINE), "--strict")
    assert res.exit_code == 4 and res.stdout == ""
    error, hint = res.stderr.splitlines()
    assert error == f"error: host 'r630' ({OFFLINE}): {PUS} would be left out: in no NUMA node"
    assert hint.startswith("hint: --strict records nothing when a part of the host would be left out")
    assert dump(cli.db) == before
    res = cli("host", "import", "lv", "--capabilities", str(VIRCAPS), "--strict")
    assert res.exit_code == 4 and dump(cli.db) == before
    assert res.stderr.splitlines()[0] == (
        f"error: host 'lv' ({VIRCAPS}): {FIRST_POOL} would be left out: more than the cell's 1 GiB of memory holds "
        "(and 11 more parts to leave out)"
    )


def test_pools_larger_than_their_cell_are_capped_and_a_placement_stays_within_the_memory(cli: Cli) -> None:
    res = cli.ok("host", "import", "lv", "--capabilities", str(VIRCAPS))
    lines = res.stderr.splitlines()
    first = f"warning: {FIRST_POOL}: more than the cell's 1 GiB of memory holds, left out"
    assert len(lines) == 12 and lines[0] == first
    cells = cli.ok("host", "show", "lv", "--json").json()["cells"]
    assert [c["pages"] for c in cells] == [{"4": 0, "2048": 0, "1048576": n} for n in (1, 2, 3, 4)]
    cli.ok("tenant", "create", "t")
    placed = cli.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--page-size", "1G", "--json").json()
    memory = {c["id"]: c["memory_kib"] for c in cells}
    assert [(c["host_cell"], c["memory_kib"]) for c in placed["cells"]] == [(3, 4 * 1024 * 1024)]
    assert all(c["memory_kib"] <= memory[c["host_cell"]] for c in placed["cells"])


def _nodedevs(tmp_path: Path) -> list[str]:
    """Three node-device files: a GPU, the same GPU again, and a bundle whose second device cannot be read."""
    gpu = (DATA / "nodedev" / "gpu-h100.xml").read_text()
    bad = ("<device><name>pci_0000_04_00_0</name><parent>computer</parent><capability type='pci'>"
           "<class>0x030200</class><domain>0</domain><bus>300</bus><slot>0</slot><function>0</function>"
           "<product id='0x2331'/><vendor id='0x10de'/></capability></device>")
    bundle = (DATA / "nodedev" / "nic-cx7.xml").read_text()
    files = {"gpu.xml": gpu, "gpu-again.xml": gpu, "bundle.xml": f"<devices>{bundle}{bad}</devices>"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return [a for name in files for a in ("--nodedev", str(tmp_path / name))]


def test_a_device_listed_twice_and_one_that_cannot_be_read_are_left_out_the_rest_recorded(
    cli: Cli, tmp_path: Path
) -> None:
    args = ["--capabilities", str(demo_capabilities_path()), *_nodedevs(tmp_path)]
    cli.ok("host", "list")
    refused_unchanged(cli, ["host", "import", "box", *args, "--strict"], 4, "would be left out")
    res = cli.ok("host", "import", "box", *args)
    assert res.stderr.splitlines() == [
        f"warning: device 0000:04:00.0 (GPU): cannot be read ({tmp_path / 'bundle.xml'} line 27: <bus> a number "
        "'300' is above 255), left out",
        "warning: device 0000:17:00.0 (GPU): listed twice, left out",
    ]
    doc = cli.ok("host", "show", "box", "--json").json()
    assert [d["address"] for d in doc["devices"]] == ["0001:37:00.1"]
    assert [part["what"] for part in doc["left_out"]] == ["device 0000:04:00.0 (GPU)", "device 0000:17:00.0 (GPU)"]


@pytest.mark.libvirt
def test_host_add_through_libvirt_keeps_what_it_left_out_and_refresh_updates_it(cli: Cli, tmp_path: Path) -> None:
    caps = tmp_path / "caps.xml"
    shutil.copy(HMAT, caps)  # 2 cells: the demo node file's devices on cells 2 and 3 lose their node
    res = cli.ok("host", "add", "lab", "--uri", f"test://{demo_node_path()}", "--capabilities", str(caps))
    gpu_line = ("warning: NUMA node 2 of device 0000:97:00.0 (GPU): the host has no cell 2 (the device is kept), "
                "left out")
    assert gpu_line in res.stderr.splitlines()
    doc = cli.ok("host", "show", "lab", "--json").json()
    assert {d["address"]: d["numa_node"] for d in doc["devices"]}["0000:97:00.0"] is None
    assert len(doc["left_out"]) == len(res.stderr.splitlines()) == 18  # 12 device nodes, 6 pools
    before = dump(cli.db)
    refused = cli("host", "refresh", "lab", "--strict")
    assert refused.exit_code == 4 and "would be left out" in refused.stderr and dump(cli.db) == before
    shutil.copy(demo_capabilities_path(), caps)  # the host as it really is: nothing left out
    out = cli.ok("host", "refresh", "lab", "--json")
    assert out.stderr == "" and out.json()["left_out"] == [] and out.json()["changed"]
    assert cli.ok("host", "show", "lab", "--json").json()["left_out"] == []


@pytest.mark.libvirt
def test_refresh_all_says_each_hosts_parts_and_strict_fails_that_host(cli: Cli, tmp_path: Path) -> None:
    caps = tmp_path / "caps.xml"
    shutil.copy(VIRCAPS, caps)
    cli.ok("host", "add", "lab", "--uri", "test:///default", "--capabilities", str(caps))
    res = cli.ok("host", "refresh", "--all", "--json")
    (host,) = res.json()["hosts"]
    assert host["result"] == "refreshed" and len(host["left_out"]) == 12
    assert res.stderr.splitlines()[0] == f"warning: host lab: {FIRST_POOL}: more than the cell's 1 GiB of memory " \
        "holds, left out"
    before = dump(cli.db)
    strict = cli("host", "refresh", "--all", "--strict", "--json")
    assert strict.exit_code == 4 and strict.json()["hosts"][0]["result"] == "failed" and dump(cli.db) == before
    assert "would be left out" in strict.json()["hosts"][0]["detail"]


def test_a_left_out_list_survives_a_round_trip_through_the_inventory_unchanged(cli: Cli) -> None:
    cli.ok("host", "import", "lv", "--capabilities", str(VIRCAPS))
    doc = cli.ok("host", "show", "lv", "--json").json()
    assert doc["left_out"][0] == {"what": FIRST_POOL, "why": "more than the cell's 1 GiB of memory holds"}
    assert cli.ok("host", "show", "lv", "--json").json() == doc


def test_an_unreadable_stored_list_is_an_inventory_error_naming_the_host(cli: Cli) -> None:
    import sqlite3

    cli.ok("host", "import", "r630", "--hwloc", str(OFFLINE))
    conn = sqlite3.connect(cli.db)
    with conn:
        conn.execute("UPDATE hosts SET left_out = '[{\"what\": 1}]'")
    conn.close()
    res = cli("host", "show", "r630")
    assert res.exit_code == 6
    assert res.stderr.startswith("error: inventory: the parts left out of host 'r630' are unreadable: ")
    assert "hint: record it again: `vnuma host refresh r630`" in res.stderr
