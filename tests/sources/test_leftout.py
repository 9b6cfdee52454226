"""What an import leaves out of a host, read from real files: libvirt's and hwloc's own test data.

Pools larger than their cell (libvirt's vircaps2xmldata and capabilityschemadata), PUs in no NUMA
node (hwloc's offline-node snapshot, a cpuset-restricted export), PUs and nodes outside the allowed
sets (``lstopo --disallowed``), a PCI bus id listed twice, relative distances below 10, a memory-only
cell without memory, HMAT figures naming missing cells or negative: each is left out and said so
(:mod:`vnuma.topology.leftout`); the usable step's invariants hold for any host (property test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.sources.capabilities import read_capabilities
from vnuma.sources.hwloc import read_hwloc
from vnuma.topology import Cell, Cpu, DeviceKind, Host, Mdev, PagePool, PciDevice, format_size_kib
from vnuma.topology.hmat import Hmat, nested
from vnuma.topology.leftout import LeftOut, fit_pools, usable

DATA = Path(__file__).resolve().parent.parent / "data"
VIRCAPS = DATA / "libvirt" / "vircaps2xmldata"
HWLOC = DATA / "hwloc" / "upstream"
NOT_ALLOWED = "not allowed where lstopo ran (a cgroup or cpuset restricts it)"


def caps(path: Path, text: str | None = None) -> tuple[Host, list[str]]:
    imported = read_capabilities(text if text is not None else path.read_bytes(), name="h", what=path.name)
    return imported.host, [part.line() for part in imported.left_out]


def hwloc(name: str) -> tuple[Host, list[str]]:
    imported = read_hwloc((HWLOC / name).read_bytes(), name="h", what=name)
    return imported.host, [part.line() for part in imported.left_out]


# --- hugepage pools larger than their cell ---------------------------------------------------------


def test_libvirts_6144_one_gib_pages_on_a_one_gib_cell_are_capped_to_what_fits() -> None:
    host, lines = caps(VIRCAPS / "vircaps-x86_64-basic.xml")
    assert [[(p.size_kib, p.count) for p in c.pages] for c in host.cells] == [
        [(4, 0), (2048, 0), (1048576, n)] for n in (1, 2, 3, 4)
    ]
    for cell in host.cells:
        assert sum(p.size_kib * p.count for p in cell.pages) <= cell.memory_kib
    assert lines[:3] == [
        "6143 of cell 0's 6144 × 1 GiB pages: more than the cell's 1 GiB of memory holds, left out",
        "4096 of cell 0's 4096 × 2 MiB pages: the cell's 1 GiB of memory is taken by its larger pages, left out",
        "2048 of cell 0's 2048 × 4 KiB pages: the cell's 1 GiB of memory is taken by its larger pages, left out",
    ]
    assert len(lines) == 12  # three pools on each of the four cells


def test_a_4k_count_above_its_cell_is_cut_and_the_other_cell_is_untouched() -> None:
    host, lines = caps(DATA / "libvirt" / "capabilityschemadata" / "caps-test3.xml")
    assert lines == ["868146 of cell 0's 4011249 × 4 KiB pages: more than the cell's 12.0 GiB of memory holds, "
                     "left out"]
    assert host.cell(0).pages_of(4) * 4 == 12572412 and host.cell(1).pages == ()


@pytest.mark.parametrize(
    ("memory", "pools", "kept"),
    [
        (1024 * 1024, [(4, 2048), (2048, 4096), (1048576, 6144)], [0, 0, 1]),  # libvirt's test cell
        (16314180, [(4, 3816513), (2048, 512)], [3816401, 512]),  # 448 KiB over: the derived 4 KiB count pays
        (64 * 1024 * 1024, [(4, 10485760), (2048, 4096), (1048576, 16)], [10485760, 4096, 16]),  # exact fit
        (3 * 1024 * 1024, [(2048, 2048), (1048576, 2)], [512, 2]),  # the larger pages are kept first
        (0, [(4, 5)], [0]),
    ],
    ids=["libvirt-test-cell", "small-excess", "exact", "larger-first", "no-memory"],
)
def test_fit_pools_keeps_the_largest_pages_first(memory: int, pools: list[tuple[int, int]], kept: list[int]) -> None:
    fitted, cut = fit_pools(memory, [PagePool(s, n) for s, n in pools])
    assert [p.count for p in fitted] == kept
    assert cut == {s: n - k for (s, n), k in zip(pools, kept, strict=True) if n != k}


# --- a memory-only cell with pages but no memory, HMAT naming missing cells, negative figures ----


HMAT = VIRCAPS / "vircaps-x86_64-hmat.xml"
CELL1_MEMORY = "<memory unit='KiB'>2097152</memory>"


def test_a_memory_only_cell_with_pages_but_no_memory_is_left_out_with_its_figures() -> None:
    text = HMAT.read_text()
    assert CELL1_MEMORY in text
    host, lines = caps(HMAT, text.replace(CELL1_MEMORY, "<memory unit='KiB'>0</memory>"))
    assert [c.id for c in host.cells] == [0]
    assert "cell 1: no CPUs and no memory (18432 pages listed), left out" in lines
    assert {t for _i, t, _v in host.hmat.latency_ns} == {0}  # its HMAT figures go with it, said once
    assert not any("HMAT" in line for line in lines)


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("<latency initiator='0' target='1' type='read' value='11'/>",
         "<latency initiator='0' target='9' type='read' value='11'/>",
         "HMAT read latency from cell 0 to cell 9: the host has no cell 9, left out"),
        ("<latency initiator='0' target='1' type='read' value='11'/>",
         "<latency initiator='0' target='1' type='read' value='-11'/>",
         "HMAT read latency from cell 0 to cell 1: -11 is below 1, left out"),
        ("<bandwidth initiator='0' target='1' type='write' value='104448' unit='KiB'/>",
         "<bandwidth initiator='0' target='1' type='write' value='-104448' unit='KiB'/>",
         "HMAT write bandwidth from cell 0 to cell 1: -104448 is below 1, left out"),
    ],
    ids=["missing-target", "negative-latency", "negative-bandwidth"],
)
def test_hmat_figures_naming_a_missing_cell_or_negative_are_left_out(old: str, new: str, line: str) -> None:
    text = HMAT.read_text()
    assert old in text
    host, lines = caps(HMAT, text.replace(old, new))
    assert line in lines
    assert nested(host.hmat.latency_ns)[0][0] == 6  # the other figures are kept


def test_negative_memory_and_page_counts_and_distances_are_read_as_left_out() -> None:
    doc = ("<capabilities><host><topology><cells>"
           "<cell id='0'><memory>-5</memory><pages size='4'>-3</pages><distances><sibling id='0' value='-10'/>"
           "<sibling id='1' value='21'/><sibling id='7' value='30'/></distances>"
           "<cpus num='1'><cpu id='0'/></cpus></cell>"
           "<cell id='1'><memory>1024</memory><cpus num='1'><cpu id='1'/></cpus></cell>"
           "</cells></topology></host></capabilities>")
    imported = read_capabilities(doc, name="h", what="c.xml")
    assert imported.left_out == (
        LeftOut("memory of cell 0", "-5 KiB is negative"),
        LeftOut("4 KiB page count of cell 0", "-3 is negative"),
        LeftOut("distance from cell 0 to cell 7", "the host has no cell 7"),
        LeftOut("distance from cell 0 to cell 0", "-10 is below 10"),
    )
    cell = imported.host.cell(0)
    assert (cell.memory_kib, cell.pages, cell.distances) == (0, (PagePool(4, 0),), ((1, 21),))


# --- hwloc: offline nodes, cgroups, devices ---------------------------------------------------------


def test_an_offline_node_leaves_its_pus_in_no_numa_node() -> None:
    host, lines = hwloc("linux/offline-cpu0-node0.xml")
    assert lines == ["PUs 4,6,8,10,12,14,16,18,20: in no NUMA node, left out"]
    assert [c.id for c in host.cells] == [1]
    assert sorted(host.cpu_ids) == [5, 7, 9, 11, 13, 15, 17, 19]


def test_a_cpuset_restricted_export_leaves_the_pus_of_the_excluded_node_out() -> None:
    host, lines = hwloc("xml/16amd64-8n2c-cpusets.xml")
    assert lines == ["PUs 0-1,12-15: in no NUMA node, left out"]
    assert {c.id: sorted(c.cpu_ids) for c in host.cells} == {1: [2, 3], 2: [5], 3: [6], 4: [], 5: []}


def test_disallowed_nodes_and_pus_are_left_out_and_devices_on_them_lose_only_their_node() -> None:
    host, lines = hwloc("xml/64intel64-3g2n+2n-irregulargroups+pci.xml")
    assert lines[:2] == [f"NUMA nodes 2-7: {NOT_ALLOWED}, left out", f"PUs 16-63: {NOT_ALLOWED}, left out"]
    assert [c.id for c in host.cells] == [0, 1] and sorted(host.cpu_ids) == list(range(16))
    gpus = {d.address: d.numa_node for d in host.devices_of(DeviceKind.GPU)}
    assert gpus == {"0000:08:00.0": 0, "0002:01:00.0": None, "0004:01:00.0": None}
    assert "NUMA node 4 of device 0002:01:00.0 (GPU): the host has no cell 4 (the device is kept), left out" in lines
    assert all(d for c in host.cells for d in c.distances)  # no distance to a node left out


def test_an_infinite_allowed_cpuset_allows_every_pu_above_its_words() -> None:
    pus = "".join(f"<object type='PU' os_index='{i}'/>" for i in (0, 1, 40))
    doc = ("<topology version='2.0'><object type='Machine' os_index='0' allowed_cpuset='0xf...f,0x00000001'>"
           f"<object type='NUMANode' os_index='0' cpuset='0x00000100,0x00000003' local_memory='1073741824'/>{pus}"
           "</object>"
           "</topology>")
    imported = read_hwloc(doc, name="h", what="t.xml")
    assert imported.host.cpu_ids == {0, 40}
    assert [p.line() for p in imported.left_out] == [f"PU 1: {NOT_ALLOWED}, left out"]


def test_a_pci_bus_id_listed_twice_leaves_out_both_devices_naming_the_nic() -> None:
    host, lines = hwloc("xml/32em64t-2n8c2t-pci-normalio.xml")
    assert lines == ["device 0000:04:00.0 (NIC): listed twice, left out"]
    assert "0000:04:00.0" not in {d.address for d in host.devices} and len(host.devices) == 14


def test_relative_distances_below_10_are_left_out_in_one_line() -> None:
    host, lines = hwloc("xml/16amd64-4distances.v1tov2.xml")
    assert lines == ["64 distances between cells 0-7: below 10 (1 to 8); a SLIT distance is 10 or more, left out"]
    assert all(c.distances == () for c in host.cells)


def test_hmat_figures_for_an_unknown_gp_index_are_left_out_once() -> None:
    attr = ("<memattr name='Latency' flags='6'>"
            + "<memattr_value target_obj_type='NUMANode' target_obj_gp_index='99' value='100' initiator_cpuset='0x1'/>"
            * 2 + "</memattr>")
    doc = ("<topology version='2.0'><object type='Machine' os_index='0'>"
           "<object type='NUMANode' os_index='0' cpuset='0x1' local_memory='1073741824' gp_index='2'/>"
           f"<object type='PU' os_index='0'/></object>{attr}</topology>")
    imported = read_hwloc(doc, name="h", what="t.xml")
    assert imported.left_out == (LeftOut("HMAT figures for NUMA node gp_index 99", "the topology has no such node"),)
    assert imported.host.hmat.empty


# --- the usable step: devices, mediated devices, and its invariants ---------------------------------


def gpu(address: str, node: int | None) -> PciDevice:
    return PciDevice(address, DeviceKind.GPU, "0x10de", "0x2330", node)


def test_a_device_on_a_missing_cell_is_kept_without_its_node_and_an_mdev_without_its_device_left_out() -> None:
    cell = Cell(0, 1 << 20, (Cpu(0, 0, None, 0, frozenset({0})),))
    raw = Host("h", (cell,), (gpu("0000:17:00.0", 3), gpu("0000:18:00.0", 0)),
               mdevs=(Mdev("4b20d080-1b54-4048-85b3-a6a62d165c01", "nvidia-18", "0000:86:00.0"),))
    imported = usable(raw)
    assert [d.numa_node for d in imported.host.devices] == [None, 0] and imported.host.mdevs == ()
    assert imported.left_out == (
        LeftOut("NUMA node 3 of device 0000:17:00.0 (GPU)", "the host has no cell 3 (the device is kept)"),
        LeftOut("mediated device 4b20d080-1b54-4048-85b3-a6a62d165c01",
                "on PCI device 0000:86:00.0, which the host does not have"),
    )


@st.composite
def raw_hosts(draw: st.DrawFn) -> Host:
    """Hosts as a parser might hand them over: pools above their memory (negative counts too), cells without
    memory, distances and HMAT figures naming missing cells or below their floor, devices on missing
    cells or listed twice, mdevs on missing devices."""
    ids = sorted(draw(st.sets(st.integers(0, 7), min_size=1, max_size=5)))
    cells = []
    next_cpu = 0
    for cell_id in ids:
        n = draw(st.integers(1 if cell_id == ids[0] else 0, 3))  # one cell with CPUs: a host is left
        cpus = tuple(Cpu(next_cpu + i, None, None, None, frozenset({next_cpu + i})) for i in range(n))
        next_cpu += n
        sizes = draw(st.sets(st.sampled_from((4, 2048, 1048576)), max_size=3))
        pages = tuple(PagePool(s, draw(st.integers(-2, 3000))) for s in sorted(sizes))
        others = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(-5, 40)), max_size=4, unique_by=lambda t: t[0]))
        memory = draw(st.integers(-4, 8 << 20))
        cells.append(Cell(cell_id, memory, cpus, pages, tuple(sorted(others))))
    cpu_cells = [c.id for c in cells if c.cpus] or [99]
    figures = st.lists(st.tuples(st.sampled_from(cpu_cells), st.integers(0, 9), st.integers(-3, 500)), max_size=6,
                       unique_by=lambda t: t[:2])
    addresses = [f"0000:{b:02x}:00.0" for b in range(4)]
    devices = draw(st.lists(st.builds(gpu, st.sampled_from(addresses), st.none() | st.integers(0, 9)), max_size=5))
    mdevs = draw(st.lists(st.builds(Mdev, st.sampled_from(["4b20d080-1b54-4048-85b3-a6a62d165c01",
                                                             "9f1c6e2a-0d3b-4c51-8a77-2e6b1f0c9d44"]),
                                    st.just("nvidia-18"), st.sampled_from(addresses)), max_size=3))
    return Host("h", tuple(cells), tuple(sorted(devices, key=lambda d: d.address)),
                hmat=Hmat(tuple(sorted(draw(figures)))), mdevs=tuple(mdevs))


@given(raw_hosts())
def test_the_usable_part_fits_says_what_it_drops_and_is_already_usable(raw: Host) -> None:
    imported = usable(raw)  # checked: check_host passed
    host, said = imported.host, " | ".join(part.line() for part in imported.left_out)
    for cell in host.cells:
        assert cell.memory_kib >= 0 and all(p.count >= 0 for p in cell.pages)
        assert sum(p.size_kib * p.count for p in cell.pages) <= cell.memory_kib
        assert all(d >= 10 for _o, d in cell.distances)
    assert all(v >= 1 for matrix in host.hmat.matrices().values() for _i, _t, v in matrix)
    for cell in raw.cells:
        assert cell.id in {c.id for c in host.cells} or f"cell {cell.id}: " in said
    for dev in raw.devices:
        assert dev.address in {d.address for d in host.devices} or f"device {dev.address}" in said
    for mdev in raw.mdevs:
        assert mdev in host.mdevs or f"mediated device {mdev.uuid}" in said
    assert usable(host).left_out == ()  # nothing more to leave out
    assert usable(host).host == host


def test_format_of_a_cut_names_sizes_as_people_read_them() -> None:
    cell = Cell(0, 2 * 1024 * 1024, (Cpu(0, None, None, None, frozenset({0})),), (PagePool(1048576, 3),))
    (part,) = usable(Host("h", (cell,))).left_out
    assert part == LeftOut(f"1 of cell 0's 3 × {format_size_kib(1048576)} pages", "more than the cell's 2 GiB of "
                           "memory holds")
