"""resctrl facts from host capabilities: cache banks (L3 ids, not NUMA cells), bandwidth domains, monitors.

Fixtures (tests/data/capabilities) cover the shapes libvirt documents: two
Intel sockets with CAT+MBA+MBM, CDP (code/data controls), Sub-NUMA
Clustering (two cells on one L3 id), an AMD socket with four L3 ids in one
cell, CMT only (monitoring, no allocation), and a host with none.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_host
from tests.cli.conftest import Cli, refused_unchanged
from tests.sources.capswriter import capabilities_xml
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.inventory.topologies import ShapeDecoder, encode_topology
from vnuma.services.hosts import diff_hosts
from vnuma.sources.capabilities import parse_capabilities
from vnuma.topology import Host
from vnuma.topology.resctrl import NO_RESCTRL, BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl

DATA = Path(__file__).resolve().parent.parent / "data" / "capabilities"
RESCTRL = DATA / "x86-2cell-smt-resctrl.xml"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "inventory.db")


def load(name: str) -> Host:
    return parse_capabilities((DATA / name).read_bytes(), name="h", what=name)


# file -> ({cache id: (cells, ways, control types)}, {bandwidth id: (cells, granularity)}, cache features, max)
EXPECTED = {
    "x86-2cell-smt-resctrl.xml": (
        {0: ([0], 11, ["both"]), 1: ([1], 11, ["both"])}, {0: ([0], 10), 1: ([1], 10)},
        ["llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"], 176,
    ),
    "x86-2socket-cdp.xml": ({0: ([0], 12, ["code", "data"]), 1: ([1], 12, ["code", "data"])}, {}, [], None),
    "x86-snc2-resctrl.xml": ({0: ([0, 1], 12, ["both"])}, {0: ([0, 1], 10)}, ["llc_occupancy"], 224),
    "amd-1socket-4ccx-resctrl.xml": (
        {i: ([0], 16, ["both"]) for i in range(4)}, {i: ([0], 1) for i in range(4)}, ["llc_occupancy"], 256,
    ),
    "x86-2socket-cmt-only.xml": ({0: ([0], None, []), 1: ([1], None, [])}, {}, ["llc_occupancy"], 144),
    "laptop-1cell-minimal.xml": ({}, {}, [], None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_shape_reads_as_libvirt_documents_it(name: str) -> None:
    caches, bandwidth, features, max_monitors = EXPECTED[name]
    doc = host_to_dict(load(name))["resctrl"]
    assert {c["id"]: (c["cells"], c["ways"], [x["type"] for x in c["controls"]]) for c in doc["caches"]} == caches
    assert {n["id"]: (n["cells"], n["granularity"]) for n in doc["memory_bandwidth"]} == bandwidth
    assert doc["monitors"]["cache"] == features and doc["monitors"]["max_monitors"] == max_monitors
    for cache in doc["caches"]:
        assert set(cache) >= {"id", "level", "type", "size_kib", "ways", "granularity_kib", "min_kib", "max_allocs",
                              "cpus", "cells"}
        if cache["ways"] is not None:
            assert cache["ways"] == cache["size_kib"] // cache["granularity_kib"]
            assert cache["min_kib"] >= cache["granularity_kib"]
    for node in doc["memory_bandwidth"]:
        assert set(node) == {"id", "granularity", "min", "max_allocs", "cpus", "cells"}


def test_sizes_are_kib_whatever_unit_libvirt_printed() -> None:
    bank = load("x86-2cell-smt-resctrl.xml").resctrl.caches[0]  # size='22' unit='MiB', granularity='2' unit='MiB'
    assert (bank.size_kib, bank.controls[0].granularity_kib, bank.controls[0].min_kib) == (22528, 2048, 4096)
    cdp = load("x86-2socket-cdp.xml").resctrl.caches[0]  # granularity='2560' unit='KiB', no min: one granule
    assert (cdp.controls[0].granularity_kib, cdp.controls[0].min_kib) == (2560, 2560)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_host_dict_and_the_stored_topology_give_the_same_host_back(name: str) -> None:
    host = load(name)
    assert host_from_dict(host_to_dict(host)) == host
    stored = ShapeDecoder().host(host.name, host.uri, host.source.value, encode_topology(host), "")
    assert stored == host


def test_a_host_without_resctrl_stores_the_text_it_stored_before() -> None:
    assert '"resctrl"' not in encode_topology(load("laptop-1cell-minimal.xml"))
    assert '"resctrl"' in encode_topology(load("x86-snc2-resctrl.xml"))


def test_refresh_names_what_changed_in_resctrl() -> None:
    old = load("x86-2cell-smt-resctrl.xml")
    bank = old.resctrl.caches[1]
    new = replace(old, resctrl=replace(old.resctrl, caches=(old.resctrl.caches[0], replace(bank, size_kib=11264)),
                                       max_monitors=128))
    assert diff_hosts(old, new) == ["resctrl L3 cache id 1 changed", "resctrl monitors changed"]
    assert diff_hosts(old, replace(old, resctrl=NO_RESCTRL))[:2] == [
        "resctrl L3 cache id 0 removed", "resctrl L3 cache id 1 removed"
    ]


# --- bad input ------------------------------------------------------------------------------------------

BAD = {
    "control-without-granularity": (
        "<control granularity='2' min='4' unit='MiB' type='both' maxAllocs='16'/>",
        "<control min='4' unit='MiB' type='both' maxAllocs='16'/>", "has no granularity attribute",
    ),
    "cpus-the-host-lacks": ("cpus='4-7,12-15'>", "cpus='4-7,12-15,64'>", "names CPU(s) 64 the host does not have"),
    "bank-listed-twice": ("<bank id='1'", "<bank id='0'", "cache bank id 0 level 3 is listed twice"),
    "granularity-zero": (
        "<control granularity='2' min='4'", "<control granularity='0' min='4'", "granularity must be at least 1 KiB",
    ),
    "unknown-control-type": (
        "type='both' maxAllocs='16'", "type='unified' maxAllocs='16'", "is not both, code or data"
    ),
    "bandwidth-node-without-cpus": ("<node id='1' cpus='4-7,12-15'>", "<node id='1'>", "has no cpus attribute"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_resctrl_facts_are_refused_with_the_reason_and_nothing_written(
    case: str, cli: Cli, tmp_path: Path
) -> None:
    old, new, words = BAD[case]
    text = RESCTRL.read_text()
    assert old in text
    bad = tmp_path / "caps.xml"
    bad.write_text(text.replace(old, new, 1))
    cli.ok("host", "import", "good", "--capabilities", str(RESCTRL))
    refused_unchanged(cli, ["host", "import", "bad", "--capabilities", str(bad)], 4, words)


def test_host_show_prints_the_resctrl_section_and_json(cli: Cli) -> None:
    cli.ok("host", "import", "snc", "--capabilities", str(DATA / "x86-snc2-resctrl.xml"))
    cli.ok("host", "import", "plain", "--capabilities", str(DATA / "laptop-1cell-minimal.xml"))
    text = cli.ok("host", "show", "snc").stdout
    assert "resctrl caches (ids are L3 cache ids, not NUMA cells)" in text
    assert "llc_occupancy" in text and "224 monitors at most" in text
    assert cli.ok("host", "show", "plain").stdout.splitlines()[-1].startswith("resctrl: none")
    assert cli.ok("host", "show", "plain", "--json").json()["resctrl"] == {
        "caches": [], "memory_bandwidth": [], "monitors": {"cache": [], "memory_bandwidth": [], "max_monitors": None},
        "classes": None,
    }
    assert cli.ok("host", "show", "snc", "--json").json()["resctrl"] == {
        **host_to_dict(load("x86-snc2-resctrl.xml"))["resctrl"], "classes": {"used": 0, "total": 14},
    }
    assert "resctrl classes of service: 14 of 14 left" in text


# --- round trip through the capabilities XML ----------------------------------------------------------


@st.composite
def resctrl_hosts(draw: st.DrawFn) -> Host:
    host = make_host("r", cells=draw(st.integers(1, 3)), cores_per_cell=4, smt=draw(st.sampled_from([1, 2])))
    cpus = sorted(host.cpu_ids)
    domains = draw(st.integers(1, 4))
    groups = [frozenset(cpus[i::domains]) for i in range(domains)]
    banks = []
    for i, group in enumerate(groups):
        granule = draw(st.sampled_from([512, 768, 1024, 2048]))
        kinds = draw(st.sampled_from([(), (CacheType.BOTH,), (CacheType.CODE, CacheType.DATA)]))
        controls = tuple(
            CacheControl(granule, granule * draw(st.integers(1, 2)), kind, draw(st.integers(1, 16))) for kind in kinds
        )
        banks.append(CacheBank(i * 2, 3, CacheType.BOTH, granule * draw(st.integers(4, 20)), group, controls))
    nodes = tuple(
        BandwidthNode(i * 2, group, *draw(st.sampled_from([(None, None, None), (10, 10, 8), (1, 1, 16)])))
        for i, group in enumerate(groups)
    ) if draw(st.booleans()) else ()
    cache_features = tuple(draw(st.lists(st.sampled_from(["llc_occupancy", "llc_future"]), unique=True, max_size=2)))
    bw_features = tuple(draw(st.lists(st.sampled_from(["mbm_total_bytes", "mbm_local_bytes"]), unique=True)))
    monitors = draw(st.integers(1, 512)) if cache_features or bw_features else None
    return replace(host, resctrl=Resctrl(tuple(banks), nodes, cache_features, bw_features, monitors))


@given(resctrl_hosts())
def test_resctrl_round_trips_through_capabilities_xml_and_the_inventory_text(host: Host) -> None:
    parsed = parse_capabilities(capabilities_xml(host), name=host.name, uri=host.uri)
    assert parsed.resctrl == host.resctrl
    assert ShapeDecoder().host(host.name, host.uri, host.source.value, encode_topology(parsed), "") == parsed
    for bank in host_to_dict(parsed)["resctrl"]["caches"]:
        assert bank["cells"] == list(parsed.cells_of(frozenset(bank["cpus"])))
