"""libvirt capabilities parser: real host shapes, bad input, round trips."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_host
from tests.sources.capswriter import capabilities_xml
from vnuma.errors import InvalidInputError
from vnuma.sources.capabilities import parse_capabilities, unit_bytes
from vnuma.topology import KIB_PER_GIB, Host, Source, format_cpuset, parse_cpuset

DATA = Path(__file__).resolve().parent.parent / "data" / "capabilities"


def load(name: str) -> Host:
    return parse_capabilities((DATA / name).read_bytes(), name="h1", what=name)


@dataclass(frozen=True)
class Shape:
    file: str
    cells: dict[int, str]  # cell id -> cpuset
    memory_kib: dict[int, int]
    sockets: frozenset[int | None]
    dies: frozenset[int | None]
    smt: int


SHAPES = [
    Shape("laptop-1cell-minimal.xml", {0: "0-3"}, {0: 16314180}, frozenset({None}), frozenset({None}), 1),
    Shape(
        "x86-2cell-smt-resctrl.xml",
        {0: "0-3,8-11", 1: "4-7,12-15"},
        {0: 64 * KIB_PER_GIB, 1: 64 * KIB_PER_GIB},
        frozenset({0, 1}),
        frozenset({0}),
        2,
    ),
    Shape(
        "x86-1socket-2die.xml",
        {0: "0-3", 1: "4-7"},
        {0: 32 * KIB_PER_GIB, 1: 32 * KIB_PER_GIB},
        frozenset({0}),
        frozenset({0, 1}),
        1,
    ),
    Shape(
        "aarch64-2cell-clusters.xml",
        {0: "0-3", 1: "4-7"},
        {0: 128 * KIB_PER_GIB, 1: 128 * KIB_PER_GIB},
        frozenset({36, 3180}),
        frozenset({0}),
        1,
    ),
    Shape(
        "x86-hmat-memonly.xml",
        {0: "0-3,8-11", 1: "4-7,12-15", 2: "", 3: ""},
        {0: 96 * KIB_PER_GIB, 1: 96 * KIB_PER_GIB, 2: 256 * KIB_PER_GIB, 3: 256 * KIB_PER_GIB},
        frozenset({0, 1}),
        frozenset({0}),
        2,
    ),
    Shape(
        "epyc-8cell-nps4.xml",
        {n: f"{2 * n}-{2 * n + 1},{2 * n + 16}-{2 * n + 17}" for n in range(8)},
        {n: 48 * KIB_PER_GIB for n in range(8)},
        frozenset({0, 1}),
        frozenset({0}),
        2,
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.file.removesuffix(".xml") for s in SHAPES])
def test_fixture_shapes(shape: Shape) -> None:
    host = load(shape.file)
    assert [c.id for c in host.cells] == sorted(shape.cells)
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == shape.cells
    assert {c.id: c.memory_kib for c in host.cells} == shape.memory_kib
    cpus = [cpu for cell in host.cells for cpu in cell.cpus]
    assert {cpu.socket for cpu in cpus} == shape.sockets
    assert {cpu.die for cpu in cpus} == shape.dies
    assert {len(cpu.siblings) for cpu in cpus} == {shape.smt}
    assert all(cpu.id in cpu.siblings for cpu in cpus)
    assert host.devices == ()
    assert host.source is Source.CAPABILITIES


def test_cpus_and_cells_come_out_sorted() -> None:
    host = load("laptop-1cell-minimal.xml")  # the file lists CPU 3 first
    assert [c.id for c in host.cells[0].cpus] == [0, 1, 2, 3]


def test_smt_siblings_and_core_ids() -> None:
    host = load("x86-2cell-smt-resctrl.xml")
    cpu9 = next(c for c in host.cells[0].cpus if c.id == 9)
    assert (cpu9.socket, cpu9.die, cpu9.core, cpu9.siblings) == (0, 0, 1, frozenset({1, 9}))
    cpu12 = next(c for c in host.cells[1].cpus if c.id == 12)
    assert (cpu12.socket, cpu12.core, cpu12.siblings) == (1, 0, frozenset({4, 12}))


def test_missing_optional_cpu_attributes() -> None:
    cpu = load("laptop-1cell-minimal.xml").cells[0].cpus[2]
    assert (cpu.id, cpu.socket, cpu.die, cpu.core, cpu.siblings) == (2, None, None, None, frozenset({2}))


def test_dies_repeat_core_ids() -> None:
    cpus = {c.id: c for cell in load("x86-1socket-2die.xml").cells for c in cell.cpus}
    assert (cpus[0].die, cpus[0].core) == (0, 0)
    assert (cpus[4].die, cpus[4].core) == (1, 0)


def test_page_pools_in_kib_sorted_by_size() -> None:
    pages = load("x86-2cell-smt-resctrl.xml").cells[1].pages
    assert [(p.size_kib, p.count) for p in pages] == [(4, 40 * KIB_PER_GIB // 4), (2048, 4096), (1048576, 16)]


def test_aarch64_64k_base_and_512m_huge_pages() -> None:
    cell = load("aarch64-2cell-clusters.xml").cells[0]
    assert [(p.size_kib, p.count) for p in cell.pages] == [(64, 96 * KIB_PER_GIB // 64), (524288, 64)]
    assert cell.distance_to(1) == 20


def test_memory_only_cells_with_and_without_cpus_element() -> None:
    host = load("x86-hmat-memonly.xml")
    assert [c.id for c in host.cells if c.memory_only] == [2, 3]
    assert host.cell(2).distance_to(0) == 14
    assert host.cell(3).distance_to(2) == 30
    assert host.cell(0).pages_of(2048) == 8192


def test_epyc_distances() -> None:
    host = load("epyc-8cell-nps4.xml")
    assert [host.cell(0).distance_to(n) for n in range(8)] == [10, 12, 12, 12, 32, 32, 32, 32]
    assert host.cell(5).distances == tuple((n, 32 if n < 4 else 10 if n == 5 else 12) for n in range(8))


def test_name_and_uri_are_the_callers() -> None:
    data = (DATA / "epyc-8cell-nps4.xml").read_bytes()
    host = parse_capabilities(data, name="gpu-07", uri="qemu+ssh://gpu-07/system", source=Source.LIBVIRT)
    assert (host.name, host.uri, host.source) == ("gpu-07", "qemu+ssh://gpu-07/system", Source.LIBVIRT)


def test_test_driver_without_cells_is_refused_with_hint() -> None:
    with pytest.raises(InvalidInputError) as info:
        load("test-driver-no-cells.xml")
    assert str(info.value) == (
        "test-driver-no-cells.xml: no NUMA topology (no <host><topology><cells><cell> elements)"
    )
    assert "--capabilities FILE" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<host><cpu><arch>x86_64</arch></cpu></host>", "no NUMA topology"),
        ("<guest><os_type>hvm</os_type></guest>", "<capabilities> has no <host> element"),
    ],
    ids=["no-topology", "no-host"],
)
def test_documents_without_topology(body: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        parse_capabilities(f"<capabilities>{body}</capabilities>", name="h", what="c.xml")


def test_missing_sibling_cpu_is_named() -> None:
    with pytest.raises(InvalidInputError) as info:
        load("bad-missing-sibling.xml")
    assert str(info.value) == (
        "bad-missing-sibling.xml: host 'h1': cell 0 CPU 0 lists missing sibling CPU(s) 4"
    )


def test_cpu_in_two_cells_is_named() -> None:
    expected = r"bad-duplicate-cpu\.xml: .*CPU 1 appears in more than one cell"
    with pytest.raises(InvalidInputError, match=expected):
        load("bad-duplicate-cpu.xml")


def _one_cell(cell_body: str, cell_attrs: str = "id='0'") -> str:
    return (
        "<capabilities><host><topology><cells num='1'>\n"
        f"<cell {cell_attrs}>{cell_body}</cell>\n"
        "</cells></topology></host></capabilities>"
    )


CPU0 = "<cpus num='1'><cpu id='0'/></cpus>"


def _dist(siblings: str) -> str:
    return _one_cell(f"<distances>{siblings}</distances>{CPU0}")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (_one_cell(CPU0, "id='zero'"), "c.xml line 2: <cell> attribute id 'zero' is not an integer"),
        (_one_cell(CPU0, "num='1'"), "c.xml line 2: <cell> is missing attribute id"),
        (_one_cell("<memory unit='parsecs'>1</memory>" + CPU0), "<memory> has unknown unit 'parsecs'"),
        (_one_cell("<cpus num='1'><cpu id='0' siblings='0-x'/></cpus>"), "CPU 0 siblings: bad cpuset '0-x'"),
        (_one_cell("<cpus num='1'><cpu id='0' socket_id='s'/></cpus>"), "attribute socket_id 's' is not an"),
        (_one_cell("<cpus num='1'><cpu/></cpus>"), "<cpu> is missing attribute id"),
        (
            _one_cell("<pages size='4'>1</pages><pages unit='KiB' size='4'>2</pages>" + CPU0),
            "<pages> size 4 KiB listed twice",
        ),
        (_one_cell("<pages size='0'>1</pages>" + CPU0), "<pages> size is below 1 KiB"),
        (_one_cell("<pages size='4'>many</pages>" + CPU0), "<pages> a page count 'many' is not an integer"),
        (_dist("<sibling id='0' value='10'/>" * 2), "distance to cell 0 listed twice"),
    ],
    ids=[
        "cell-id-word",
        "cell-id-missing",
        "unknown-unit",
        "bad-siblings",
        "bad-socket",
        "cpu-id-missing",
        "duplicate-pages",
        "zero-page-size",
        "bad-page-count",
        "duplicate-distance",
    ],
)
def test_bad_values_are_named(doc: str, expected: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_capabilities(doc, name="h", what="c.xml")
    assert expected in str(info.value)
    assert str(info.value).startswith("c.xml")


@pytest.mark.parametrize(
    ("unit", "value", "kib"),
    [
        (None, 2048, 2048),
        ("KiB", 2048, 2048),
        ("k", 10, 10),
        ("KB", 1024, 1000),
        ("MiB", 2, 2048),
        ("M", 3, 3072),
        ("MB", 1, 976),
        ("G", 1, KIB_PER_GIB),
        ("GiB", 256, 256 * KIB_PER_GIB),
        ("TiB", 1, 1024 * KIB_PER_GIB),
        ("bytes", 8192, 8),
        ("b", 1024, 1),
    ],
    ids=lambda v: str(v),
)
def test_memory_units(unit: str | None, value: int, kib: int) -> None:
    unit_attr = f" unit='{unit}'" if unit else ""
    host = parse_capabilities(_one_cell(f"<memory{unit_attr}>{value}</memory>" + CPU0), name="h")
    assert host.cells[0].memory_kib == kib


def test_unit_bytes_rejects_unknown() -> None:
    assert unit_bytes("furlongs") is None
    assert unit_bytes("PiB") == 1024**5
    assert unit_bytes("EB") == 1000**6


def test_memory_defaults_to_page_pools_then_zero() -> None:
    pools = "<pages unit='KiB' size='4'>1024</pages><pages unit='MiB' size='2'>3</pages>"
    assert parse_capabilities(_one_cell(pools + CPU0), name="h").cells[0].memory_kib == 4096 + 3 * 2048
    assert parse_capabilities(_one_cell(CPU0), name="h").cells[0].memory_kib == 0


def test_siblings_always_include_the_cpu_itself() -> None:
    doc = _one_cell("<cpus num='2'><cpu id='0' siblings='1'/><cpu id='1' siblings='0'/></cpus>")
    cpus = parse_capabilities(doc, name="h").cells[0].cpus
    assert [c.siblings for c in cpus] == [frozenset({0, 1}), frozenset({0, 1})]


@given(st.frozensets(st.integers(min_value=0, max_value=1023), max_size=64))
def test_cpuset_round_trip(cpus: frozenset[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == cpus


@given(st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=30), st.randoms())
def test_cpuset_parse_ignores_order_and_duplicates(ids: list[int], rnd: random.Random) -> None:
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    assert parse_cpuset(",".join(map(str, shuffled))) == frozenset(ids)


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    hugepages_2m = draw(st.integers(0, 8))
    hugepages_1g = draw(st.integers(0, 8))
    return make_host(
        draw(st.sampled_from(["a", "gpu-01", "rack7.host"])),
        cells=draw(st.integers(1, 4)),
        cores_per_cell=draw(st.integers(1, 4)),
        smt=draw(st.integers(1, 2)),
        cells_per_socket=draw(st.integers(1, 2)),
        memory_gib=hugepages_2m + hugepages_1g + draw(st.integers(1, 64)),
        hugepages_2m_gib=hugepages_2m,
        hugepages_1g_gib=hugepages_1g,
        memory_only_cells=draw(st.integers(0, 2)),
        memory_only_gib=draw(st.integers(1, 512)),
        uri=draw(st.none() | st.just("qemu:///system")),
    )


@given(hosts(), st.booleans(), st.booleans())
def test_capabilities_round_trip(host: Host, reverse_cells: bool, reverse_cpus: bool) -> None:
    xml = capabilities_xml(host, reverse_cells=reverse_cells, reverse_cpus=reverse_cpus)
    assert parse_capabilities(xml, name=host.name, uri=host.uri) == host
