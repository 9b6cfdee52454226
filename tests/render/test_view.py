"""The view model: topology, distances, pages, the PCIe layout, options and bad placements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from vnuma.errors import ConfigError, RenderError
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    DeviceAssignment,
    IoThreadPolicy,
    MemoryMode,
    Placement,
    ThreadPolicy,
)
from vnuma.render.checks import check_domain
from vnuma.render.cputopology import guest_topology
from vnuma.render.domain import render_domain
from vnuma.render.pcie import TOP_BUS_NR, layout_devices
from vnuma.render.view import OVERRIDE_MODES, Pin, RenderOptions, build_view, domain_uuid
from vnuma.topology import KIB_PER_GIB, PAGE_1G, PAGE_2M, PAGE_4K, DeviceKind, Host, format_cpuset

HOST = make_host()


@given(
    threads=st.integers(1, 4),
    cells=st.lists(st.integers(0, 24), min_size=1, max_size=6).filter(lambda c: sum(c) > 0),
)
def test_topology_product_is_the_vcpu_count(threads: int, cells: list[int]) -> None:
    topo = guest_topology(threads, tuple(cells))
    product = int(topo.sockets) * int(topo.dies) * int(topo.cores) * int(topo.threads)
    assert product == sum(cells)
    if all(n % threads == 0 for n in cells):
        assert int(topo.threads) == threads
    else:
        assert topo.threads == "1"


@pytest.mark.parametrize(
    ("threads", "cells", "expected"),
    [
        (2, (8, 8), ("2", "1", "4", "2")),
        (1, (4,), ("1", "1", "4", "1")),
        (2, (4, 2), ("1", "1", "3", "2")),
        (2, (3, 3), ("2", "1", "3", "1")),
        (2, (4, 0), ("1", "1", "2", "2")),
    ],
    ids=["two-equal-cells", "one-cell", "unequal-cells", "odd-cells-drop-threads", "memory-only-cell"],
)
def test_topology_table(threads: int, cells: tuple[int, ...], expected: tuple[str, ...]) -> None:
    topo = guest_topology(threads, cells)
    assert (topo.sockets, topo.dies, topo.cores, topo.threads) == expected


@pytest.mark.parametrize(
    ("cells", "sockets", "expected"),
    [
        ((8, 8), (0, 0), ("1", "1", "8", "2")),
        ((8, 8), (0, 1), ("2", "1", "4", "2")),
        ((4, 4, 4, 4), (0, 0, 1, 1), ("2", "1", "4", "2")),
        ((4, 4, 4), (0, 0, 1), ("3", "1", "2", "2")),
        ((8, 8), (0, None), ("2", "1", "4", "2")),
        ((8, 4), (0, 0), ("1", "1", "6", "2")),
    ],
    ids=["one-socket-two-cells", "two-sockets", "two-per-socket", "unequal-shares", "socket-unknown", "unequal-cells"],
)
def test_topology_follows_the_host_sockets(
    cells: tuple[int, ...], sockets: tuple[int | None, ...], expected: tuple[str, ...]
) -> None:
    topo = guest_topology(2, cells, sockets)
    assert (topo.sockets, topo.dies, topo.cores, topo.threads) == expected


def test_a_vm_on_two_cells_of_one_socket_renders_one_socket() -> None:
    host = make_host(cells=4, cores_per_cell=4, cells_per_socket=2)
    placement = make_placement(host, [CellSpec(0, 4), CellSpec(1, 4)], threads=2)
    topo = build_view(host, placement, RenderOptions()).topology
    assert (topo.sockets, topo.cores, topo.threads) == ("1", "4", "2")
    across = make_placement(host, [CellSpec(1, 4), CellSpec(2, 4)], threads=2)
    topo = build_view(host, across, RenderOptions()).topology
    assert (topo.sockets, topo.cores, topo.threads) == ("2", "2", "2")


def test_distances_mirror_the_chosen_host_cells() -> None:
    host = make_host(cells=4, cores_per_cell=4, cells_per_socket=2)
    placement = make_placement(host, [CellSpec(3, 2), CellSpec(2, 2), CellSpec(0, 2)], threads=2)
    view = build_view(host, placement, RenderOptions())
    got = {c.id: [(s.id, s.value) for s in c.distances] for c in view.cells}
    # guest 0 = host 3, guest 1 = host 2 (same socket: 12), guest 2 = host 0 (other socket: 21)
    assert got == {
        "0": [("0", "10"), ("1", "12"), ("2", "21")],
        "1": [("0", "12"), ("1", "10"), ("2", "21")],
        "2": [("0", "21"), ("1", "21"), ("2", "10")],
    }
    render_domain(host, placement)


def test_distances_are_omitted_for_one_cell_and_for_hosts_without_them() -> None:
    one = build_view(HOST, make_placement(HOST, [CellSpec(0, 2)]), RenderOptions())
    assert one.cells[0].distances == ()
    bare = replace(HOST, cells=tuple(replace(c, distances=()) for c in HOST.cells))
    placement = make_placement(bare, [CellSpec(0, 2), CellSpec(1, 2)])
    assert all(c.distances == () for c in build_view(bare, placement, RenderOptions()).cells)
    assert "<distances>" not in render_domain(bare, placement)


def test_two_guest_cells_on_one_host_cell_render_without_distances() -> None:
    """An off-diagonal 10 is what libvirt 9.0.0 chokes on; the view leaves distances out instead."""
    placement = make_placement(HOST, [CellSpec(0, 2)], threads=2)
    second = CellAssignment(1, 0, (2, 3), (1, 17), 2 * KIB_PER_GIB, PAGE_2M)
    placement = replace(placement, cells=(placement.cells[0], second))
    view = build_view(HOST, placement, RenderOptions())
    assert all(c.distances == () for c in view.cells)
    assert view.memnodes[1].nodeset == "0"
    render_domain(HOST, placement)


def test_asymmetric_host_distances_are_left_out() -> None:
    cells = list(HOST.cells)
    cells[0] = replace(cells[0], distances=((0, 10), (1, 31)))
    host = replace(HOST, cells=tuple(cells))
    view = build_view(host, make_placement(host, [CellSpec(0, 2), CellSpec(1, 2)]), RenderOptions())
    assert all(c.distances == () for c in view.cells)


def test_pages_group_guest_cells_by_size_and_skip_4k() -> None:
    host = make_host(cells=4, cores_per_cell=4)
    specs = [CellSpec(0, 2, 2 * KIB_PER_GIB, PAGE_1G), CellSpec(1, 2, 2 * KIB_PER_GIB, PAGE_2M),
             CellSpec(2, 2, 2 * KIB_PER_GIB, PAGE_1G), CellSpec(3, 2, 2 * KIB_PER_GIB, PAGE_4K)]  # fmt: skip
    view = build_view(host, make_placement(host, specs), RenderOptions())
    assert [(p.size_kib, p.nodeset) for p in view.pages] == [("2048", "1"), ("1048576", "0,2")]
    assert [c.mem_access for c in view.cells] == ["shared", "shared", "shared", ""]
    render_domain(host, make_placement(host, specs))


def test_emulator_pin_follows_the_emulator_policy() -> None:
    shared = build_view(HOST, make_placement(HOST, [CellSpec(0, 2)], threads=2), RenderOptions())
    isolated = build_view(
        HOST, make_placement(HOST, [CellSpec(0, 2)], threads=2, isolate_emulator=True), RenderOptions()
    )
    assert shared.emulator_cpuset == "0,16"
    assert isolated.emulator_cpuset == "1"
    float_set = make_placement(HOST, [CellSpec(1, 2)], cpu_policy=CpuPolicy.SHARED)
    assert build_view(HOST, float_set, RenderOptions()).emulator_cpuset == "8-15,24-31"


def test_memnode_mode_option_and_restrictive_memory() -> None:
    placement = make_placement(HOST, [CellSpec(0, 2), CellSpec(1, 2)])
    for mode in ("strict", "preferred", "restrictive"):
        view = build_view(HOST, placement, RenderOptions(memnode_mode=mode))
        assert {n.mode for n in view.memnodes} == {mode}
        assert view.memory_mode == ("restrictive" if mode == "restrictive" else "strict")
        render_domain(HOST, placement, options=RenderOptions(memnode_mode=mode))


def _with_modes(placement: Placement, *modes: MemoryMode) -> Placement:
    cells = tuple(replace(c, memory_mode=m) for c, m in zip(placement.cells, modes, strict=True))
    return replace(placement, cells=cells)


def test_each_cell_renders_its_own_memory_mode_and_interleave_spans_the_vms_cells() -> None:
    placement = _with_modes(make_placement(HOST, [CellSpec(0, 2), CellSpec(1, 2)]), MemoryMode.INTERLEAVE,
                            MemoryMode.PREFERRED)
    view = build_view(HOST, placement, RenderOptions())
    assert [(n.cellid, n.mode, n.nodeset) for n in view.memnodes] == [("0", "interleave", "0-1"),
                                                                      ("1", "preferred", "1")]
    assert view.memory_mode == "strict"
    render_domain(HOST, placement)  # the schema and vnuma's checks accept the interleaved nodeset
    with pytest.raises(ConfigError, match="interleaved memory, claimed on every one of its host cells"):
        build_view(HOST, placement, RenderOptions(memnode_mode="strict"))
    everywhere = _with_modes(placement, MemoryMode.RESTRICTIVE, MemoryMode.RESTRICTIVE)
    assert build_view(HOST, everywhere, RenderOptions()).memory_mode == "restrictive"


def test_iothreads_run_with_the_emulator_or_beside_the_first_device() -> None:
    gpu_host = make_host("gpu-host", gpus_per_cell=2)
    placement = make_placement(gpu_host, [CellSpec(0, 2), CellSpec(1, 2, gpus=1)])
    assert [d.guest_cell for d in placement.devices] == [1]
    with_emulator = replace(placement, iothreads=2)
    view = build_view(gpu_host, with_emulator, RenderOptions())
    assert view.iothreads == "2" and {p.cpuset for p in view.iothreadpins} == {view.emulator_cpuset}
    local = replace(placement, iothreads=2, iothread_policy=IoThreadPolicy.DEVICE_LOCAL)
    view = build_view(gpu_host, local, RenderOptions())
    guest1 = format_cpuset(placement.cells[1].pcpus)
    assert [(p.id, p.cpuset) for p in view.iothreadpins] == [("1", guest1), ("2", guest1)]
    assert build_view(gpu_host, local, RenderOptions(iothreads=3)).iothreadpins[-1] == Pin("3", guest1)
    assert build_view(gpu_host, local, RenderOptions(iothreads=0)).iothreadpins == ()
    render_domain(gpu_host, local)


def test_a_template_that_interleaves_a_strict_cell_is_refused() -> None:
    """A strict cell's pages are claimed on its own host cell: a memnode spanning others is refused."""
    placement = make_placement(HOST, [CellSpec(0, 2), CellSpec(1, 2)])
    xml = render_domain(HOST, placement).replace(
        "<memnode cellid='0' mode='strict' nodeset='0'/>", "<memnode cellid='0' mode='interleave' nodeset='0-1'/>"
    )
    assert "nodeset='0-1'/>" in xml
    with pytest.raises(RenderError, match="memnode cellid=0"):
        check_domain(etree.fromstring(xml.encode()), HOST, placement)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (RenderOptions(memnode_mode="loose"), "memnode mode override 'loose'"),
        (RenderOptions(memnode_mode="interleave"), "memnode mode override 'interleave'"),
        (RenderOptions(domain_type="xen"), "unknown domain type 'xen'"),
        (RenderOptions(iothreads=-1), "iothreads must be 0 to 64"),
    ],
    ids=["memnode-mode", "memnode-interleave", "domain-type", "iothreads"],
)
def test_bad_options_are_config_errors(options: RenderOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_view(HOST, make_placement(HOST, [CellSpec(0, 2)]), options)


def test_uuid_is_stable_and_per_vm_identity() -> None:
    a = make_placement(HOST, [CellSpec(0, 2)], vm="x", tenant="t1")
    b = make_placement(HOST, [CellSpec(1, 2)], vm="x", tenant="t1")
    c = make_placement(HOST, [CellSpec(0, 2)], vm="x", tenant="t2")
    assert domain_uuid(a) == domain_uuid(b) != domain_uuid(c)
    # The same VM on another host is the same domain: libvirt migrates only onto its UUID.
    assert domain_uuid(replace(a, host="elsewhere")) == domain_uuid(a)
    given_uuid = "0f0e0d0c-0b0a-4908-8706-050403020100"
    assert build_view(HOST, a, RenderOptions(uuid=given_uuid)).uuid == given_uuid


def _bad_cells(placement_cells: tuple[CellAssignment, ...]) -> tuple[CellAssignment, ...]:
    first = placement_cells[0]
    return (replace(first, pcpus=first.pcpus[:-1]),)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: replace(p, host="other"), "rendered against host 'host-a'"),
        (
            lambda p: replace(p, cells=(replace(p.cells[0], host_cell=9),)),
            "guest cell 0 is on missing host cell 9",
        ),
        (lambda p: replace(p, cells=_bad_cells(p.cells)), "guest cell 0 has 2 vCPUs but 1 pCPUs"),
        (lambda p: replace(p, cells=(replace(p.cells[0], vcpus=()),)), "the VM has no vCPUs"),
        (lambda p: replace(p, cells=(p.cells[0], p.cells[0])), r"guest cell ids repeat: \[0, 0\]"),
        (
            lambda p: replace(p, devices=(DeviceAssignment("0000:10:00.0", DeviceKind.GPU, 3, 0),)),
            "device 0000:10:00.0 is assigned to missing guest cell 3",
        ),
        (
            lambda p: replace(p, devices=(DeviceAssignment("10:00.0", DeviceKind.GPU, 0, 0),)),
            "device address '10:00.0' is not a PCI address",
        ),
    ],
    ids=[
        "host-name",
        "host-cell",
        "pcpu-count",
        "no-vcpus",
        "repeated-cell",
        "device-cell",
        "device-address",
    ],
)
def test_unrenderable_placements_are_render_errors(
    change: Callable[[Placement], Placement], message: str
) -> None:
    placement = change(make_placement(HOST, [CellSpec(0, 2)], threads=2))
    with pytest.raises(RenderError, match=message):
        build_view(HOST, placement, RenderOptions())


def test_gpus_need_a_pcie_machine() -> None:
    host = make_host(gpus_per_cell=1)
    placement = make_placement(host, [CellSpec(0, 2, gpus=1)])
    with pytest.raises(RenderError, match="machine type 'pc' has no PCIe root") as info:
        build_view(host, placement, RenderOptions(machine="pc"))
    assert info.value.hint
    build_view(host, placement, RenderOptions(machine="pc-q35-7.2"))
    build_view(HOST, make_placement(HOST, [CellSpec(0, 2)]), RenderOptions(machine="pc"))


@given(per_cell=st.lists(st.integers(0, 6), min_size=1, max_size=8))
def test_pcie_layout_is_consistent(per_cell: list[int]) -> None:
    devices = [
        DeviceAssignment(f"0000:{0x10 + cell * 16 + i:02x}:00.0", DeviceKind.GPU, cell, cell)
        for cell, n in enumerate(per_cell)
        for i in range(n)
    ]
    layout = layout_devices("vm", devices, frozenset(range(len(per_cell))), "q35")
    expanders = {int(e.index): e for e in layout.expanders}
    ports = {int(p.index): p for p in layout.root_ports}
    assert len(layout.hostdevs) == len(devices)
    assert set(expanders).isdisjoint(ports) and 0 not in expanders
    assert len({e.slot for e in layout.expanders}) == len(expanders)
    # every hostdev sits on its own root port, behind the expander of its own guest cell
    assert len({h.bus for h in layout.hostdevs}) == len(devices)
    for dev, hostdev in zip(
        sorted(devices, key=lambda d: (d.guest_cell, d.address)), layout.hostdevs, strict=True
    ):
        port = ports[int(hostdev.bus, 16)]
        expander = expanders[int(port.bus, 16)]
        assert int(expander.index) < int(port.index)
        assert expander.node == str(dev.guest_cell)
        assert hostdev.address == dev.address
    # each expander owns bus numbers [busNr, next higher busNr): its own bus plus one per root port
    bounds = [*sorted(int(e.bus_nr) for e in layout.expanders), TOP_BUS_NR]
    for e in layout.expanders:
        owned = bounds[bounds.index(int(e.bus_nr)) + 1] - int(e.bus_nr)
        assert owned == 1 + sum(1 for p in layout.root_ports if int(p.bus, 16) == int(e.index))
    assert all(1 <= int(e.bus_nr) <= 254 for e in layout.expanders)


_HOST_SHAPES = st.builds(
    lambda cells, cores, smt, gpus: make_host(cells=cells, cores_per_cell=cores, smt=smt, gpus_per_cell=gpus),
    st.integers(1, 4),
    st.integers(2, 6),
    st.integers(1, 2),
    st.integers(0, 2),
)


@st.composite
def _placements(draw: st.DrawFn) -> tuple[Host, Placement, RenderOptions]:
    host = draw(_HOST_SHAPES)
    smt = len(host.cells[0].cpus[0].siblings)
    threads = draw(st.sampled_from([t for t in (1, 2) if t <= smt]))
    cores = len(host.cells[0].cpus) // smt
    host_cells = draw(
        st.lists(
            st.sampled_from([c.id for c in host.cells]), min_size=1, max_size=len(host.cells), unique=True
        )
    )
    gpus = sum(1 for d in host.devices if d.numa_node == 0)
    specs = [
        CellSpec(
            hc,
            draw(st.integers(1, cores)) * threads,
            draw(st.integers(1, 4)) * KIB_PER_GIB,
            draw(st.sampled_from([PAGE_4K, PAGE_2M, PAGE_1G])),
            gpus=draw(st.integers(0, gpus)),
        )
        for hc in host_cells
    ]
    policy = draw(st.sampled_from(list(CpuPolicy)))
    placement = make_placement(
        host, specs, threads=threads, cpu_policy=policy, thread_policy=ThreadPolicy.PREFER
    )
    if draw(st.booleans()):  # restrictive on every cell, or a free mix of the other three
        modes = [MemoryMode.RESTRICTIVE] * len(specs)
    else:
        choices = [MemoryMode.STRICT, MemoryMode.PREFERRED, MemoryMode.INTERLEAVE]
        modes = [draw(st.sampled_from(choices)) for _ in specs]
    placement = _with_modes(placement, *modes)
    override = None if MemoryMode.INTERLEAVE in modes else draw(st.sampled_from([None, *OVERRIDE_MODES]))
    options = RenderOptions(
        memnode_mode=override,
        iothreads=draw(st.integers(0, 2)),
        domain_type=draw(st.sampled_from(["kvm", "qemu"])),
    )
    return host, placement, options


@given(case=_placements())
def test_every_consistent_placement_renders_valid_xml(case: tuple[Host, Placement, RenderOptions]) -> None:
    host, placement, options = case
    root = etree.fromstring(render_domain(host, placement, options=options).encode())
    assert len(root.findall("cputune/vcpupin")) == placement.vcpus
    assert len(root.findall("devices/hostdev")) == len(placement.devices)


def test_memory_only_guest_cell_renders_without_cpus() -> None:
    host = make_host(memory_only_cells=1)
    placement = make_placement(host, [CellSpec(0, 2)], threads=2)
    extra = CellAssignment(1, 2, (), (), 8 * KIB_PER_GIB, PAGE_4K)
    placement = replace(placement, cells=(*placement.cells, extra))
    xml = render_domain(host, placement)
    assert "<cell id='1' memory='8388608' unit='KiB'>" in xml
    assert host.cells[2].memory_only


def test_the_operator_topology_replaces_the_host_following_one() -> None:
    placement = make_placement(HOST, [CellSpec(0, 4), CellSpec(1, 4)], threads=2)
    follows = build_view(HOST, placement, RenderOptions()).topology
    assert (follows.sockets, follows.cores, follows.threads) == ("2", "2", "2")
    view = build_view(HOST, placement, RenderOptions(threads=1))
    assert (view.topology.sockets, view.topology.cores, view.topology.threads) == ("2", "4", "1")
    view = build_view(HOST, placement, RenderOptions(sockets=1, cores=8, threads=1))
    assert (view.topology.sockets, view.topology.cores, view.topology.threads) == ("1", "8", "1")
    render_domain(HOST, placement, options=RenderOptions(sockets=1, threads=1))
    with pytest.raises(ConfigError, match="does not make the VM's 8 vCPUs"):
        build_view(HOST, placement, RenderOptions(sockets=3))
    with pytest.raises(ConfigError, match="does not make the VM's 8 vCPUs"):
        build_view(HOST, placement, RenderOptions(sockets=2, cores=3, threads=1))
    with pytest.raises(ConfigError, match="--cores 0: a guest CPU topology count must be 1 or more"):
        build_view(HOST, placement, RenderOptions(cores=0))
