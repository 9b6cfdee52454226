"""HMAT and memory tiers: rated latency and bandwidth from capabilities and hwloc, cell kinds and tiers.

Inputs: a capabilities fixture with two CPU cells, two memory-only cells and
memory-side caches (shaped as libvirt's own test data), hwloc's own
Knights-Landing test topology (MCDRAM cells, memory attributes with cpuset
initiators), and a hwloc file with a CXL-DRAM cell.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.inventory.topologies import ShapeDecoder, encode_topology
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.hwloc import parse_hwloc
from vnuma.topology import Host, MemoryCache
from vnuma.topology.hmat import nested
from vnuma.topology.tiers import cell_kinds, cell_tiers

DATA = Path(__file__).resolve().parent.parent / "data"
CAPS = DATA / "capabilities" / "x86-hmat-memonly.xml"
KNL = DATA / "hwloc" / "upstream" / "64intel64-fakeKNL-SNC4-hybrid.xml"
CXL = DATA / "hwloc" / "2pkg-snc-smt-cxl-gpu.xml"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "inventory.db")


def caps(text: str | None = None) -> Host:
    return parse_capabilities(text if text is not None else CAPS.read_bytes(), name="h", what="caps")


def test_capabilities_give_latency_bandwidth_and_memory_side_caches() -> None:
    host = caps()
    assert nested(host.hmat.latency_ns) == {0: {0: 95, 2: 270}, 1: {1: 95, 3: 270}}
    assert nested(host.hmat.bandwidth_kib_s)[0] == {0: 157286400, 2: 31457280}
    assert host.hmat.write_latency_ns == ()
    assert host.cell(0).caches == (MemoryCache(1, 16 * 1024 * 1024, 64, "direct", "writeback"),)
    assert (cell_kinds(host), cell_tiers(host)) == (
        {0: "dram", 1: "dram", 2: "cxl", 3: "cxl"},
        {0: 0, 1: 0, 2: 1, 3: 1},
    )


def test_an_explicit_read_figure_wins_over_access_and_write_is_kept_apart() -> None:
    text = CAPS.read_text().replace(
        "<latency initiator='0' target='2' type='access' value='270'/>",
        "<latency initiator='0' target='2' type='access' value='270'/>"
        "<latency initiator='0' target='2' type='read' value='250'/>"
        "<latency initiator='0' target='2' type='write' value='400'/>",
    )
    host = caps(text)
    assert nested(host.hmat.latency_ns)[0][2] == 250
    assert nested(host.hmat.write_latency_ns) == {0: {2: 400}}


def test_a_memory_only_cell_faster_than_dram_is_hbm_and_one_without_figures_is_unknown() -> None:
    faster = CAPS.read_text().replace(
        "target='2' type='access' value='31457280'", "target='2' type='access' value='314572800'"
    )
    assert cell_kinds(caps(faster))[2] == "hbm" and cell_tiers(caps(faster))[2] == 0
    start, end = CAPS.read_text().index("<interconnects>"), CAPS.read_text().index("</interconnects>")
    bare = CAPS.read_text()[:start] + CAPS.read_text()[end + len("</interconnects>") :]
    host = caps(bare)
    assert host.hmat.empty and cell_kinds(host) == {0: "dram", 1: "dram", 2: "unknown", 3: "unknown"}
    assert host_to_dict(host)["hmat"] is None


def test_hwloc_memory_attributes_map_cpuset_initiators_to_the_cells_they_cover() -> None:
    host = parse_hwloc(KNL.read_bytes(), name="knl")
    bandwidth = nested(host.hmat.bandwidth_kib_s)
    assert bandwidth[0] == {0: 22500 * 1024, 7: 90000 * 1024}  # MiB/s -> KiB/s
    assert cell_kinds(host) == {**{i: "dram" for i in range(4)}, **{i: "hbm" for i in range(4, 8)}}
    assert cell_tiers(host)[4] == 0 and cell_tiers(host)[0] == 1


def test_an_initiator_that_covers_no_cell_is_ignored_and_shown() -> None:
    text = KNL.read_text().replace(
        '<memattr name="Bandwidth" flags="5">',
        '<memattr name="Bandwidth" flags="5">\n'
        '    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="2" value="1" initiator_cpuset="0x1"/>',
    )
    host = parse_hwloc(text, name="knl")
    assert host.hmat.ignored == ("0x1",)
    assert nested(host.hmat.bandwidth_kib_s)[0][0] == 22500 * 1024
    assert host_to_dict(host)["hmat"]["ignored_initiators"] == ["0x1"]


def test_hwloc_subtypes_name_the_kind() -> None:
    host = parse_hwloc(CXL.read_bytes(), name="c")
    assert cell_kinds(host)[4] == "cxl" and host.cell(4).subtype == "CXL-DRAM"


@pytest.mark.parametrize("source", ["caps", "knl"])
def test_hmat_survives_the_host_dict_and_the_stored_topology(source: str) -> None:
    host = caps() if source == "caps" else parse_hwloc(KNL.read_bytes(), name="knl")
    assert host_from_dict(host_to_dict(host)) == host
    assert ShapeDecoder().host(host.name, host.uri, host.source.value, encode_topology(host), "") == host


def test_host_show_prints_tiers_and_matrices(cli: Cli) -> None:
    cli.ok("host", "import", "hm", "--capabilities", str(CAPS))
    text = cli.ok("host", "show", "hm").stdout
    assert "memory tiers (0 is the fastest" in text and "HMAT read latency (ns)" in text
    assert "HMAT read bandwidth (GiB/s)" in text and "150.0" in text
    doc = cli.ok("host", "show", "hm", "--json").json()
    assert doc["hmat"]["latency_ns"] == {"0": {"0": 95, "2": 270}, "1": {"1": 95, "3": 270}}
    assert [(c["kind"], c["tier"]) for c in doc["cells"]] == [("dram", 0), ("dram", 0), ("cxl", 1), ("cxl", 1)]


def test_an_initiator_without_cpus_is_read_shown_and_ranks_no_kind(cli: Cli, tmp_path: Path) -> None:
    # Cell 2 (memory-only, no CPUs) rated as the initiator of cell 3's memory, far above DRAM: a Generic
    # Initiator. Cell 3's kind still comes from CPU cell 1's figure (30 GiB/s, below DRAM's 150): cxl.
    text = CAPS.read_text().replace(
        "<bandwidth initiator='1' target='3' type='access' value='31457280' unit='KiB'/>",
        "<bandwidth initiator='1' target='3' type='access' value='31457280' unit='KiB'/>"
        "<bandwidth initiator='2' target='3' type='access' value='3145728000' unit='KiB'/>",
    )
    assert text != CAPS.read_text()
    host = caps(text)
    assert nested(host.hmat.bandwidth_kib_s)[2] == {3: 3145728000}
    assert cell_kinds(host) == {0: "dram", 1: "dram", 2: "cxl", 3: "cxl"}
    assert host_from_dict(host_to_dict(host)) == host
    # Imported, the same file says more: HMAT rates cell 3 best from a device, so cell 3 is that device's
    # memory (vnuma.sources.gpunodes), its GPU unknown without node devices; cell 2 stays CXL memory.
    (tmp_path / "gi.xml").write_text(text)
    cli.ok("host", "import", "gi", "--capabilities", str(tmp_path / "gi.xml"))
    shown = cli.ok("host", "show", "gi").stdout.splitlines()
    assert [line.split()[-1] for line in shown if line.startswith("2 (no CPUs) ")] == ["3000.0"]
    assert [line.split()[2] for line in shown if line.startswith(("2 ", "3 ")) and "memory" in line] == [
        "(memory", "(GPU"]
    doc = cli.ok("host", "show", "gi", "--json").json()
    assert doc["hmat"]["bandwidth_kib_s"]["2"] == {"3": 3145728000}
    assert [(c["kind"], c["gpu"], c["subtype"]) for c in doc["cells"][2:]] == [("cxl", None, None),
                                                                              ("gpu", None, "GPUMemory")]


BAD = {
    "bad-value": ("target='3' type='access' value='270'", "target='3' type='access' value='fast'", "not an integer"),
    "cache-without-line": ("<line value='64' unit='B'/>", "", "needs <size> and <line>"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_hmat_is_refused_naming_it(case: str, cli: Cli, tmp_path: Path) -> None:
    old, new, words = BAD[case]
    text = CAPS.read_text()
    assert old in text
    bad = tmp_path / "caps.xml"
    bad.write_text(text.replace(old, new, 1))
    cli.ok("host", "list")
    refused_unchanged(cli, ["host", "import", "bad", "--capabilities", str(bad)], 4, words)
