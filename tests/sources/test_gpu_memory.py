"""GPU memory as NUMA nodes: hwloc's ``GPUMemory`` nodes read with the GPU they belong to, kept through the
codec and the stored topology, and shown beside their GPU by ``host show``.

Input: hwloc's own POWER9 snapshot (``tests/hwloc/linux/nvidiagpunumanodes`` of hwloc 2.9.0, read by its
``lstopo`` with ``HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1``; see ``tests/data/hwloc/upstream/README.md``): 2
packages, 6 V100s, GPU memory nodes 250-255 of 15 GiB each; and small inline topologies for the edges.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.sources.test_hwloc import bitmap, core, package, topology
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.errors import InvalidInputError
from vnuma.inventory.topologies import ShapeDecoder, encode_topology
from vnuma.report.pcietree import gpu_memory_texts
from vnuma.services.hosts import diff_hosts
from vnuma.sources.hwloc import parse_hwloc
from vnuma.topology import KIB_PER_GIB, Host, format_cpuset
from vnuma.topology.hostcheck import check_host
from vnuma.topology.tiers import cell_kinds, cell_tiers

POWER9 = Path(__file__).resolve().parent.parent / "data" / "hwloc" / "upstream" / "power9-nvidia-gpu-numanodes.xml"


@pytest.fixture(scope="module")
def p9() -> Host:
    return parse_hwloc(POWER9.read_bytes(), name="p9", what=POWER9.name)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "inventory.db")


def gpu_node(index: int, cpus: str, busid: str | None, subtype: str = "GPUMemory") -> str:
    info = f'<info name="PCIBusID" value="{busid}"/>' if busid is not None else ""
    return (
        f'<object type="NUMANode" os_index="{index}" cpuset="{cpus}" nodeset="{bitmap(frozenset({index}))}" '
        f'subtype="{subtype}" local_memory="{16 << 30}">{info}</object>'
    )


def plain_node(index: int, cpus: str) -> str:
    return (
        f'<object type="NUMANode" os_index="{index}" cpuset="{cpus}" nodeset="{bitmap(frozenset({index}))}" '
        f'local_memory="{64 << 30}"/>'
    )


# --- reading ---------------------------------------------------------------------------------


def test_the_power9_snapshot_has_its_cpu_cells_and_gpu_memory_kind_and_tier(p9: Host) -> None:
    assert {c.id: format_cpuset(c.cpu_ids) for c in p9.cells if c.cpus} == {0: "0-15", 8: "88-103"}
    assert [c.id for c in p9.cells if c.gpu_memory] == [250, 251, 252, 253, 254, 255]
    assert all(p9.cell(i).subtype == "GPUMemory" for i in range(250, 256))
    kinds, tiers = cell_kinds(p9), cell_tiers(p9)
    assert {kinds[i] for i in range(250, 256)} == {"gpu"} and {tiers[i] for i in range(250, 256)} == {1}
    assert (kinds[0], tiers[0]) == ("dram", 0)


def test_a_gpu_memory_node_alone_under_its_package_never_takes_the_cpus() -> None:
    # hwloc gives the node its GPU's local CPUs as cpuset, so it hangs off the package; the CPUs stay
    # with the DRAM node above.
    data = topology(plain_node(0, "0x3") + package(0, "0x3", gpu_node(1, "0x3", "0004:0A:00.0") + core(0, [0, 1])))
    host = parse_hwloc(data, name="x")
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {0: "0-1", 1: ""}
    assert host.cell(1).gpu == "0004:0a:00.0"  # the devices' lowercase form


def test_gpu_memory_without_a_bus_id_is_still_gpu_memory() -> None:
    data = topology(package(0, "0x3", plain_node(0, "0x3") + gpu_node(1, "0x3", None) + core(0, [0, 1])))
    cell = parse_hwloc(data, name="x").cell(1)
    assert (cell.gpu, cell.gpu_memory, cell.memory_only) == (None, True, True)


def test_a_bus_id_on_another_kind_of_node_is_not_read() -> None:
    data = topology(package(0, "0x3", plain_node(0, "0x3") + gpu_node(1, "0x0", "0004:05:00.0", "HBM")
                            + core(0, [0, 1])))
    cell = parse_hwloc(data, name="x").cell(1)
    assert (cell.gpu, cell.gpu_memory) == (None, False)


def test_a_bad_bus_id_is_refused_naming_it() -> None:
    data = topology(package(0, "0x3", plain_node(0, "0x3") + gpu_node(1, "0x3", "GPU0") + core(0, [0, 1])))
    with pytest.raises(InvalidInputError, match=r"t\.xml line 1: bad PCIBusID 'GPU0'"):
        parse_hwloc(data, name="x", what="t.xml")


# --- the codec, the stored topology, refresh -----------------------------------------------------


def test_the_gpu_survives_the_host_dict_and_the_stored_topology(p9: Host) -> None:
    doc = host_to_dict(p9)
    assert {c["id"]: c["gpu"] for c in doc["cells"]}[255] == "0004:05:00.0"
    assert {c["id"]: c["gpu"] for c in doc["cells"]}[0] is None
    assert host_from_dict(doc) == p9
    assert ShapeDecoder().host(p9.name, p9.uri, p9.source.value, encode_topology(p9), "") == p9


def test_a_document_written_before_the_key_reads_as_no_gpu(p9: Host) -> None:
    doc = host_to_dict(p9)
    for cell in doc["cells"]:
        del cell["gpu"]
    old = host_from_dict(doc)
    assert all(c.gpu is None for c in old.cells)
    assert [c.id for c in old.cells if c.gpu_memory] == [250, 251, 252, 253, 254, 255]  # the subtype still says so


def test_gpu_memory_with_cpus_is_refused(p9: Host) -> None:
    doc = host_to_dict(p9)
    doc["cells"][0]["gpu"] = "0004:05:00.0"
    with pytest.raises(InvalidInputError, match="cell 0 is GPU memory but has CPUs"):
        host_from_dict(doc)
    with pytest.raises(InvalidInputError, match="cell 0 is GPU memory but has CPUs"):
        check_host(replace(p9, cells=(replace(p9.cells[0], subtype="GPUMemory"), *p9.cells[1:])))


def test_refresh_reports_a_cell_that_became_or_stopped_being_gpu_memory(p9: Host) -> None:
    before = replace(p9, cells=tuple(replace(c, gpu=None, subtype=None) if c.id == 250 else c for c in p9.cells))
    assert diff_hosts(before, p9) == [
        "cell 250: memory kind or memory-side caches changed", "cell 250: GPU memory of - -> 0035:05:00.0"
    ]
    assert diff_hosts(p9, p9) == []


# --- host show -------------------------------------------------------------------------------


def test_each_gpus_memory_is_summed_beside_it() -> None:
    host = parse_hwloc(POWER9.read_bytes(), name="p9")
    two = replace(host, cells=tuple(replace(c, gpu="0004:05:00.0") if c.id == 254 else c for c in host.cells))
    texts = gpu_memory_texts(two)
    assert texts["0004:05:00.0"] == "memory: nodes 254-255, 30 GiB"
    assert "0004:06:00.0" not in texts and texts["0035:05:00.0"] == "memory: node 250, 15 GiB"


def test_host_show_puts_gpu_memory_beside_its_gpu(cli: Cli) -> None:
    cli.ok("host", "import", "p9", "--hwloc", str(POWER9))
    text = cli.ok("host", "show", "p9").stdout
    table = text.split("\ncells\n")[1].split("\ndevices\n")[0]
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert "(GPU memory of 0004:05:00.0)" in rows["255"] and "15 GiB" in rows["255"]
    assert "(GPU memory of 0035:05:00.0)" in rows["250"]
    assert "└─ 0004:05:00.0  gpu 0x0000:0x0000  cell 0  memory: node 255, 15 GiB" in text
    assert "└─ 0035:05:00.0  gpu 0x0000:0x0000  cell 8  memory: node 250, 15 GiB" in text
    doc = cli.ok("host", "show", "p9", "--json").json()
    cells = {c["id"]: c for c in doc["cells"]}
    assert {i: cells[i]["gpu"] for i in (0, 8, 253)} == {0: None, 8: None, 253: "0006:00:00.0"}
    assert (cells[253]["kind"], cells[253]["memory_only"], cells[253]["memory_kib"]) == ("gpu", True, 15 * KIB_PER_GIB)


def test_a_host_without_gpu_memory_shows_memory_only_cells_as_before(cli: Cli) -> None:
    cxl = Path(__file__).resolve().parent.parent / "data" / "hwloc" / "2pkg-snc-smt-cxl-gpu.xml"
    cli.ok("host", "import", "snc", "--hwloc", str(cxl))
    text = cli.ok("host", "show", "snc").stdout
    assert "(memory only)" in text and "GPU memory" not in text and "memory: node" not in text
    assert all(c["gpu"] is None for c in cli.ok("host", "show", "snc", "--json").json()["cells"])
