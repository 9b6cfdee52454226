"""hwloc XML parser: packages, SNC groups, dies, SMT, CXL memory, PCI locality, distances."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.errors import InvalidInputError
from vnuma.sources.hwloc import parse_hwloc, parse_hwloc_bitmap, read_hwloc
from vnuma.topology import KIB_PER_GIB, DeviceKind, Host, PciDevice, Source, format_cpuset

DATA = Path(__file__).resolve().parent.parent / "data" / "hwloc"


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def load(name: str) -> Host:
    return parse_hwloc(read(name), name="hw1", what=name)


def bitmap(bits: frozenset[int]) -> str:
    """hwloc's writer: 32-bit words, most significant first."""
    if not bits:
        return "0x0"
    words = [
        sum(1 << (b - 32 * w) for b in bits if 32 * w <= b < 32 * w + 32) for w in range(max(bits) // 32 + 1)
    ]
    return ",".join(f"0x{word:08x}" for word in reversed(words))


# --- the two-socket SNC host with a CXL node -------------------------------------------------


def test_cells_cpus_and_memory_only_cxl_node() -> None:
    host = load("2pkg-snc-smt-cxl-gpu.xml")
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {
        0: "0-1,8-9",
        1: "2-3,10-11",
        2: "4-5,12-13",
        3: "6-7,14-15",
        4: "",
    }
    assert [c.id for c in host.cells if c.memory_only] == [4]
    assert host.cell(4).memory_kib == 256 * KIB_PER_GIB
    assert host.cell(0).memory_kib == 64 * KIB_PER_GIB
    assert host.source is Source.HWLOC
    assert host.name == "hw1"


def test_smt_siblings_sockets_and_core_ids() -> None:
    cpus = {c.id: c for cell in load("2pkg-snc-smt-cxl-gpu.xml").cells for c in cell.cpus}
    assert (cpus[0].socket, cpus[0].die, cpus[0].core, cpus[0].siblings) == (0, None, 0, frozenset({0, 8}))
    assert (cpus[14].socket, cpus[14].core, cpus[14].siblings) == (1, 2, frozenset({6, 14}))


def test_page_pools_in_kib() -> None:
    host = load("2pkg-snc-smt-cxl-gpu.xml")
    assert [(p.size_kib, p.count) for p in host.cell(1).pages] == [(4, 12582912), (2048, 4096), (1048576, 8)]
    assert [(p.size_kib, p.count) for p in host.cell(4).pages] == [(4, 256 * KIB_PER_GIB // 4)]


def test_latency_matrix_split_over_elements() -> None:
    host = load("2pkg-snc-smt-cxl-gpu.xml")
    assert host.cell(0).distances == ((0, 10), (1, 12), (2, 21), (3, 21), (4, 14))
    assert host.cell(3).distances == ((0, 21), (1, 21), (2, 12), (3, 10), (4, 24))
    assert host.cell(4).distances == ((0, 14), (1, 14), (2, 24), (3, 24), (4, 10))


def test_pci_devices_locality_and_parents() -> None:
    assert load("2pkg-snc-smt-cxl-gpu.xml").devices == (
        PciDevice("0000:16:01.0", DeviceKind.OTHER, "0x8086", "0x352a", 0, None, "pci0000:16", pci_class=0x060400),
        PciDevice(
            "0000:17:00.0", DeviceKind.GPU, "0x10de", "0x2330", 0, "0000:16:01.0", "pci0000:16", ("0000:16:01.0",),
            pci_class=0x030200, product_name="GH100 [H100 SXM5 80GB]",  # its PCIDevice info
        ),
        PciDevice("0000:b7:00.0", DeviceKind.NIC, "0x15b3", "0x1021", 3, None, "pci0000:b7", pci_class=0x020000),
        # attached to the whole package (nodes 2 and 3): no single NUMA node
        PciDevice("0000:c1:00.0", DeviceKind.GPU, "0x1da3", "0x1020", None, None, "pci0000:c1", pci_class=0x120000),
    )


def test_a_gpu_under_an_l3_shared_by_two_snc_nodes_has_no_numa_node() -> None:
    host = load("snc-gpu-on-two-nodes.xml")
    gpu = next(d for d in host.devices if d.address == "0000:17:00.0")
    assert (gpu.kind, gpu.numa_node, gpu.model()) == (DeviceKind.GPU, None, "H100 SXM5 80GB (10de:2330)")
    assert [c.gpu for c in host.cells] == [None] * len(host.cells)


def test_version_3_reads_the_same() -> None:
    v3 = read("2pkg-snc-smt-cxl-gpu.xml").replace(b'version="2.0"', b'version="3.0"')
    assert parse_hwloc(v3, name="hw1") == load("2pkg-snc-smt-cxl-gpu.xml")


# --- dies, no SMT, gp-indexed latency after a bandwidth matrix --------------------------------


def test_dies_without_smt() -> None:
    host = load("1pkg-2die-nosmt.xml")
    cpus = {c.id: c for cell in host.cells for c in cell.cpus}
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {0: "0-3", 1: "4-7"}
    assert (cpus[5].socket, cpus[5].die, cpus[5].core, cpus[5].siblings) == (0, 1, 1, frozenset({5}))
    assert host.devices == ()


def test_latency_matrix_with_gp_indexing_is_chosen_over_bandwidth() -> None:
    host = load("1pkg-2die-nosmt.xml")
    # the file lists node 1 first and is deliberately asymmetric, so a wrong mapping shows
    assert host.cell(0).distances == ((0, 10), (1, 13))
    assert host.cell(1).distances == ((0, 11), (1, 10))


# --- a laptop: one node on the Machine, interleaved SMT numbering -----------------------------


def test_machine_attached_node() -> None:
    host = load("laptop-machine-numa.xml")
    assert [(c.id, format_cpuset(c.cpu_ids)) for c in host.cells] == [(0, "0-3")]
    assert [c.siblings for c in host.cells[0].cpus] == [frozenset({0, 1})] * 2 + [frozenset({2, 3})] * 2
    assert host.cells[0].distances == ()
    assert host.devices == (
        PciDevice("0000:00:02.0", DeviceKind.GPU, "0x8086", "0x9a49", 0, None, "pci0000:00", pci_class=0x030000),
    )


# --- v1 and version handling ------------------------------------------------------------------


def test_v1_is_refused_with_conversion_hint() -> None:
    with pytest.raises(InvalidInputError) as info:
        load("v1-2node.xml")
    assert str(info.value) == 'v1-2node.xml: hwloc 1.x XML is not supported (no version="2.x")'
    assert "lstopo --input OLD.xml --of xml NEW.xml" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ('version="1.11"', "hwloc 1.x XML is not supported"),
        ('version="9.0"', "unsupported hwloc XML version '9.0'"),
    ],
    ids=["explicit-v1", "future"],
)
def test_other_versions(version: str, expected: str) -> None:
    data = read("laptop-machine-numa.xml").replace(b'version="2.0"', version.encode())
    with pytest.raises(InvalidInputError, match=expected):
        parse_hwloc(data, name="x")


def test_wrong_root_is_refused() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_hwloc(b"<capabilities/>", name="x", what="lstopo.xml")
    assert str(info.value) == "lstopo.xml: root element is <capabilities>, not <topology>"
    assert "lstopo --of xml" in (info.value.hint or "")


# --- small inline topologies for the attachment rules ----------------------------------------


def pu(i: int) -> str:
    return f'<object type="PU" os_index="{i}" cpuset="{bitmap(frozenset({i}))}"/>'


def core(index: int, pus: list[int]) -> str:
    cpus = bitmap(frozenset(pus))
    return f'<object type="Core" os_index="{index}" cpuset="{cpus}">{"".join(pu(p) for p in pus)}</object>'


def node(index: int, cpus: str, extra: str = "", memory: int = 1 << 30) -> str:
    nodeset = bitmap(frozenset({index}))
    return (
        f'<object type="NUMANode" os_index="{index}" cpuset="{cpus}" nodeset="{nodeset}" '
        f'local_memory="{memory}"{extra}/>'
    )


def package(index: int, cpus: str, children: str) -> str:
    return f'<object type="Package" os_index="{index}" cpuset="{cpus}">{children}</object>'


def host_bridge(children: str) -> str:
    return f'<object type="Bridge" bridge_type="0-1">{children}</object>'


def topology(children: str, nodes: str = "0x00000003", tail: str = "") -> bytes:
    return (
        f'<topology version="2.0"><object type="Machine" os_index="0" cpuset="0x0000000f" nodeset="{nodes}">'
        f"{children}</object>{tail}</topology>"
    ).encode()


def test_plain_dram_owns_cpus_next_to_hbm() -> None:
    # HBM has the lower os_index, but CPUs belong to the plain DRAM node beside it.
    data = topology(
        node(0, "0x0000000f", ' subtype="HBM"') + node(1, "0x0000000f", ' subtype="DRAM"') + core(0, [0, 1])
    )
    host = parse_hwloc(data, name="x")
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {0: "", 1: "0-1"}


def test_lowest_plain_node_owns_cpus() -> None:
    data = topology(node(1, "0x0000000f") + node(0, "0x0000000f") + core(0, [0, 1]))
    assert {c.id: format_cpuset(c.cpu_ids) for c in parse_hwloc(data, name="x").cells} == {0: "0-1", 1: ""}


def test_node_behind_memory_side_cache() -> None:
    memcache = f'<object type="MemCache" cpuset="0xf" nodeset="0x1">{node(0, "0x0000000f")}</object>'
    host = parse_hwloc(topology(memcache + core(0, [0, 1]), nodes="0x00000001"), name="x")
    assert format_cpuset(host.cell(0).cpu_ids) == "0-1"


def test_node_with_empty_cpuset_is_memory_only() -> None:
    cxl = node(1, "0x0")
    host = parse_hwloc(topology(cxl + package(0, "0x3", node(0, "0x3") + core(0, [0, 1]))), name="x")
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {0: "0-1", 1: ""}


def test_pus_outside_every_node_are_left_out() -> None:
    # More in tests/sources/test_leftout.py (hwloc's own offline-node and cgroup snapshots).
    pkg0 = package(0, "0x3", node(0, "0x3") + core(0, [0, 1]))
    pkg1 = package(1, "0xc", core(0, [2, 3]))
    imported = read_hwloc(topology(pkg0 + pkg1, nodes="0x00000001"), name="x", what="t.xml")
    assert [part.line() for part in imported.left_out] == ["PUs 2-3: in no NUMA node, left out"]
    assert imported.host.cpu_ids == {0, 1}


def test_no_numa_nodes_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"t\.xml: no NUMANode objects"):
        parse_hwloc(topology(core(0, [0, 1])), name="x", what="t.xml")


def _matrix(indexes: str, values: str, nbobjs: int = 2) -> str:
    return (
        f'<distances2 type="NUMANode" nbobjs="{nbobjs}" kind="5" indexing="os">'
        f"<indexes length='0'>{indexes}</indexes><u64values length='0'>{values}</u64values></distances2>"
    )


TWO_NODES = node(0, "0x00000003") + node(1, "0x0") + core(0, [0, 1])


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (_matrix("0 7", "10 20 20 10").replace('"os"', '"gp"'), r"names NUMA node\(s\) \[0, 7\] \(gp index\)"),
        (_matrix("0 1", "10 20 20"), "distance matrix for 2 nodes has 2 indexes and 3 values"),
        (_matrix("0 1", "10 x 20 10"), "a number 'x' is not an integer"),
        (_matrix("0 1", "10 20 20 10").replace('"os"', '"logical"'), "unknown distance indexing 'logical'"),
    ],
    ids=["unknown-gp-node", "short-values", "bad-value", "bad-indexing"],
)
def test_bad_distance_matrices(tail: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        parse_hwloc(topology(TWO_NODES, tail=tail), name="x", what="t.xml")


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ('pci_busid="0000:17:00" pci_type="0302 [10de:2330] [10de:16c1] a1"',
         "device '0000:17:00' (GPU) at t.xml line 1: its pci_busid is not a PCI address (dddd:bb:ss.f), left out"),
        ('pci_busid="0000:17:00.0" pci_type="GPU"',
         "device 0000:17:00.0: its pci_type 'GPU' cannot be read (t.xml line 1), left out"),
    ],
    ids=["busid", "type"],
)
def test_unreadable_pci_objects_are_left_out(attrs: str, expected: str) -> None:
    imported = read_hwloc(topology(TWO_NODES + host_bridge(f'<object type="PCIDev" {attrs}/>')), name="x",
                          what="t.xml")
    assert [part.line() for part in imported.left_out] == [expected]
    assert imported.host.devices == ()


def _package_with_gpu(nodeset: str, nodes: str) -> bytes:
    gpu = host_bridge('<object type="PCIDev" pci_busid="0000:17:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1"/>')
    return topology(
        f'<object type="Package" os_index="0" cpuset="0x3" nodeset="{nodeset}">{nodes}{core(0, [0, 1])}{gpu}</object>',
        nodes=nodeset,
    )


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        # CXL memory (no CPUs) on the GPU's package, as hwloc attaches it: the GPU is local to node 0's CPUs.
        (node(0, "0x3") + node(2, "0x0", ' subtype="CXL-DRAM"'), 0),
        # HBM beside DRAM with the same CPUs (KNL's MCDRAM, SNC-4 hybrid): still node 1's CPUs.
        (node(1, "0x3", ' subtype="DRAM"') + node(3, "0x3", ' subtype="HBM"'), 1),
    ],
    ids=["cxl", "hbm"],
)
def test_device_is_local_to_the_cpu_node_beside_memory_only_nodes(nodes: str, expected: int) -> None:
    nodeset = bitmap(frozenset(int(i) for i in re.findall(r'os_index="(\d+)"', nodes)))
    host = parse_hwloc(_package_with_gpu(nodeset, nodes), name="x")
    assert [(d.address, d.numa_node) for d in host.devices] == [("0000:17:00.0", expected)]


def test_device_under_two_cpu_nodes_has_no_node() -> None:
    pkg = (
        '<object type="Package" os_index="0" cpuset="0xf" nodeset="0x3">'
        f'<object type="Group" cpuset="0x3" nodeset="0x1">{node(0, "0x3")}{core(0, [0, 1])}</object>'
        f'<object type="Group" cpuset="0xc" nodeset="0x2">{node(1, "0xc")}{core(1, [2, 3])}</object>'
        + host_bridge('<object type="PCIDev" pci_busid="0000:17:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1"/>')
        + "</object>"
    )
    assert [d.numa_node for d in parse_hwloc(topology(pkg), name="x").devices] == [None]


def test_pci_class_with_prog_if() -> None:
    dev = '<object type="PCIDev" pci_busid="0000:C1:00.0" pci_type="0302 [10DE:2330] [10de:16c1] a1 00"/>'
    host = parse_hwloc(topology(TWO_NODES + host_bridge(dev)), name="x")
    assert host.devices == (
        PciDevice("0000:c1:00.0", DeviceKind.GPU, "0x10de", "0x2330", 0, None, pci_class=0x030200),
    )


# --- bitmaps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("0x00000001", {0}),
        ("0x000000ff,0xffffffff", set(range(40))),
        ("0x0000c000,0x0", {46, 47}),
        ("0x1,,0x1", {0, 64}),
        ("0xf...f,0x00000003", {0, 1}),
        ("0x0", set()),
        ("", set()),
    ],
    ids=["one", "two-words", "short-zero-word", "empty-word", "infinite-prefix", "zero", "empty"],
)
def test_bitmap_parse(text: str, bits: set[int]) -> None:
    assert parse_hwloc_bitmap(text) == frozenset(bits)


@pytest.mark.parametrize(
    "text", ["ff", "0x1ffffffff", "0xgg", "0x1;0x2"], ids=["no-0x", "too-wide", "not-hex", "separator"]
)
def test_bitmap_refuses(text: str) -> None:
    with pytest.raises(InvalidInputError, match="bad bitmap"):
        parse_hwloc_bitmap(text, what="t.xml")


@given(st.frozensets(st.integers(min_value=0, max_value=300), max_size=80))
def test_bitmap_round_trip(bits: frozenset[int]) -> None:
    assert parse_hwloc_bitmap(bitmap(bits)) == bits
