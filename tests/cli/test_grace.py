"""Grace Hopper in NUMA mode end to end: a GH200-like host imported, shown and used in a placement.

Inputs: ``tests/data/grace`` (written by this project from NVIDIA's published topology, see the README
there): one Grace CPU (72 cores, node 0, 480 GiB LPDDR5X) and one GPU (``0009:01:00.0``) whose 96 GiB of
HBM3 is node 1, once as hwloc XML (hwloc names the node ``GPUMemory``) and once as libvirt's capabilities
and node devices (whose HMAT names the GPU, a CPU-less Generic Initiator, as the initiator of node 1).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

GRACE = REPO / "tests" / "data" / "grace"
HWLOC = ("--hwloc", str(GRACE / "gh200-numa-hwloc.xml"))
LIBVIRT = ("--capabilities", str(GRACE / "gh200-numa-capabilities.xml"),
           "--nodedev", str(GRACE / "gh200-numa-nodedevs.xml"))
GPU = "0009:01:00.0"
GIB = 1024 * 1024


@pytest.fixture(params=["hwloc", "libvirt"])
def gh(request: pytest.FixtureRequest, tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    res = cli.ok("host", "import", "gh", *(HWLOC if request.param == "hwloc" else LIBVIRT))
    assert res.stderr == "" and "1 GPU" in res.stdout
    cli.ok("tenant", "create", "t")
    return cli


def _rows(text: str, table: str) -> dict[str, str]:
    """The rows of one ``host show`` table whose rows start with a cell id, by that id."""
    rows: dict[str, str] = {}
    for line in text.split(f"\n{table}\n")[1].splitlines()[1:]:
        if not line[:1].isdigit():
            break
        rows[line.split()[0]] = line
    return rows


def _page_cells(db: Path) -> set[int]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT cell_id FROM page_claims")}


def test_host_show_gives_the_hbm_node_as_the_gpus_memory(gh: Cli) -> None:
    text = gh.ok("host", "show", "gh").stdout
    cells = _rows(text, "cells")
    assert "0-71" in cells["0"] and "480 GiB" in cells["0"]
    # The host's total is what guests can have: the Grace memory, not the GPU's own.
    assert {h["name"]: h["memory_kib"] for h in gh.ok("host", "list", "--json").json()} == {"gh": 480 * GIB}
    assert f"(GPU memory of {GPU})" in cells["1"] and "96 GiB" in cells["1"]
    assert f"└─ {GPU}  gpu 0x10de:0x2342  cell 0  memory: node 1, 96 GiB" in text
    tiers = _rows(text, "memory tiers (0 is the fastest; kind from hwloc, else from HMAT, else unknown for "
                        "memory-only cells)")
    assert tiers["0"].split()[:2] == ["0", "dram"] and tiers["1"].split()[:2] == ["1", "gpu"]
    doc = gh.ok("host", "show", "gh", "--json").json()
    cell = {c["id"]: c for c in doc["cells"]}[1]
    assert (cell["kind"], cell["gpu"], cell["memory_only"], cell["memory_kib"]) == ("gpu", GPU, True, 96 * GIB)
    assert {d["address"]: d["numa_node"] for d in doc["devices"] if d["kind"] == "gpu"} == {GPU: 0}


def test_the_hmat_row_of_the_gpu_initiator_names_the_gpu(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "gh", *LIBVIRT)
    text = cli.ok("host", "show", "gh").stdout
    rows = _rows(text, "HMAT read bandwidth (GiB/s): initiator cell (row) to memory cell (column)")
    assert rows["0"].split() == ["0", "476.8", "-"]
    assert rows["1"].split() == ["1", "(GPU", f"{GPU})", "-", "3725.3"]
    hmat = cli.ok("host", "show", "gh", "--json").json()["hmat"]
    assert hmat["bandwidth_kib_s"] == {"0": {"0": 500000000}, "1": {"1": 3906250000}}


def test_the_capabilities_alone_are_no_longer_refused(tmp_path: Path) -> None:
    # Before: "initiator cell 1 has no CPUs", exit 4. Without node devices the GPU is not known, but its
    # memory is still a GPU's, never a cold tier.
    cli = Cli(tmp_path / "inventory.db")
    res = cli.process("host", "import", "gh", *LIBVIRT[:2])
    assert (res.exit_code, res.stderr) == (0, "")
    cells = _rows(cli.ok("host", "show", "gh").stdout, "cells")
    assert "(GPU memory)" in cells["1"]
    assert {c["id"]: c["kind"] for c in cli.ok("host", "show", "gh", "--json").json()["cells"]}[1] == "gpu"


def test_a_vm_gets_the_grace_cpus_and_the_gpu_and_its_memory_stays_off_the_gpus_node(gh: Cli) -> None:
    doc = gh.ok("place", "t", "--vcpus", "16", "--memory", "64GiB", "--gpus", "1", "--name", "g1", "--json").json()
    assert doc["host"] == "gh"
    assert [(c["host_cell"], c["memory_kib"], c["page_size_kib"]) for c in doc["cells"]] == [(0, 64 * GIB, GIB)]
    assert [(d["address"], d["host_cell"]) for d in doc["devices"]] == [(GPU, 0)]
    assert _page_cells(gh.db) == {0}
    # Not even as a cold tier: the GPU's node is no capacity tier, whatever else the host has.
    before = dump(gh.db)
    cold = gh("place", "t", "--vcpus", "4", "--memory", "4GiB", "--cold-memory", "16GiB")
    assert cold.exit_code == 5 and "cold memory" in cold.stderr and "Traceback" not in cold.stderr
    assert "unknown" not in cold.stderr  # the empty nodes serve nothing and are named in no refusal
    # Nor as the memory of a VM the CPU node's pages cannot hold (96 GiB of 4 KiB pages there, 96 more
    # on the GPU's node).
    big = gh("place", "t", "--vcpus", "8", "--memory", "120GiB", "--page-size", "4K")
    assert big.exit_code == 5 and "Traceback" not in big.stderr
    assert dump(gh.db) == before and _page_cells(gh.db) == {0}


def test_the_gpus_empty_nodes_that_hmat_names_as_its_initiators_are_the_gpus_too(tmp_path: Path) -> None:
    # Where the kernel lists every node of the GPU as a best initiator of its memory (nodes 1-8 rate node 1
    # alike), the seven empty nodes kept for MIG are recorded with the GPU as well.
    caps = (GRACE / "gh200-numa-capabilities.xml").read_text()
    one = "<bandwidth initiator='1' target='1' type='read' value='3906250000' unit='KiB'/>"
    more = "".join(one.replace("initiator='1'", f"initiator='{n}'") for n in range(2, 9))
    assert one in caps
    (tmp_path / "caps.xml").write_text(caps.replace(one, one + more))
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "gh", "--capabilities", str(tmp_path / "caps.xml"), *LIBVIRT[2:])
    text = cli.ok("host", "show", "gh").stdout
    cells = _rows(text, "cells")
    assert all(f"(GPU node of {GPU})" in cells[str(n)] for n in range(2, 9))
    assert f"{GPU}  gpu 0x10de:0x2342  cell 0  memory: nodes 1-8, 96 GiB" in text
    doc = cli.ok("host", "show", "gh", "--json").json()
    assert [(c["id"], c["kind"]) for c in doc["cells"] if c["gpu"] == GPU] == [(n, "gpu") for n in range(1, 9)]
