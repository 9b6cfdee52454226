"""Grace hosts end to end for the guest: imported, placed, rendered and shown with their GPUs' memory nodes.

Inputs: ``tests/data/grace`` (written by this project from NVIDIA's published topologies, see the README there):
the GB200-like compute tray as hwloc XML (two Graces, nodes 0 and 1; four GPUs whose HBM3e is nodes 2, 10, 18,
26) and the GH200-like host as libvirt's capabilities and node devices, its GPU owning nodes 1-8.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from tests.cli.conftest import REPO, Cli

GRACE = REPO / "tests" / "data" / "grace"
GB200_GPUS = ("0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0")


@pytest.fixture
def gb(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    assert "4 GPUs" in cli.ok("host", "import", "gb", "--hwloc", str(GRACE / "gb200-numa-hwloc.xml")).stdout
    cli.ok("tenant", "create", "t")
    return cli


def test_a_gb200_vm_with_the_four_gpus_gets_a_node_per_gpu_near_its_grace(gb: Cli) -> None:
    placed = gb.ok("place", "t", "--vcpus", "16", "--memory", "32GiB", "--gpus", "4", "--name", "b4", "--json").json()
    assert sorted(c["host_cell"] for c in placed["cells"]) == [0, 1]
    root = etree.fromstring(gb.ok("render", "b4").stdout.encode())
    cells = {c.get("id"): c for c in root.iterfind("cpu/numa/cell")}
    assert sorted(cells) == ["0", "1", "2", "3", "4", "5"]
    assert all(cells[n].get("memory") == "0" and cells[n].get("cpus") is None for n in "2345")
    ties = {h.find("source/address").get("domain"): h.find("acpi").get("nodeset")
            for h in root.iterfind("devices/hostdev")}
    assert ties == {"0x0008": "2", "0x0009": "3", "0x0018": "4", "0x0019": "5"}
    view = gb.ok("vm", "guest-view", "b4", "--json").json()
    guest = {d["address"]: d["guest_address"] for d in view["devices"]}
    assert [(n["id"], n.get("gpu")) for n in view["nodes"]] == [
        (0, None), (1, None), *((2 + i, guest[a]) for i, a in enumerate(GB200_GPUS))]
    assert {d["address"]: d["memory_nodes"] for d in view["devices"]} == {a: [2 + i] for i, a in enumerate(GB200_GPUS)}
    # The node of a GPU beside the first Grace is 80 from it and 120 from the other, as on the host.
    assert view["nodes"][2]["distances"] == {"0": 80, "1": 120, "2": 10, "3": 80, "4": 120, "5": 120}
    text = gb.ok("vm", "guest-view", "b4").stdout
    row = next(line for line in text.splitlines() if line.startswith("4 "))
    assert row.split() == ["4", "-", "-", "GPU", f"{guest['0018:01:00.0']}'s", "memory", "120", "80", "120", "120",
                           "10", "80", "-"]
    # NCCL finds each GPU on its Grace's node, not on its memory node.
    topo = etree.fromstring(gb.ok("vm", "guest-view", "b4", "--nccl-topo").stdout.encode())
    assert [c.get("numaid") for c in topo.iterfind("cpu")] == ["0", "1"]


def test_the_gh200_vm_gets_the_eight_nodes_its_gpu_owns(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "gh", "--capabilities", str(GRACE / "gh200-mig-capabilities.xml"),
           "--nodedev", str(GRACE / "gh200-numa-nodedevs.xml"))
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "8", "--memory", "16GiB", "--gpus", "1", "--name", "g1")
    view = cli.ok("vm", "guest-view", "g1", "--json").json()
    (gpu,) = view["devices"]
    assert gpu["memory_nodes"] == list(range(1, 9))
    assert [n["id"] for n in view["nodes"] if n.get("gpu") == gpu["guest_address"]] == list(range(1, 9))
    assert all(n["vcpus"] == [] and n["memory_kib"] == 0 for n in view["nodes"][1:])
    assert "<acpi nodeset='1-8'/>" in cli.ok("render", "g1").stdout
