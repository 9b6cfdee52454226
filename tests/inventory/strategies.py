"""Hypothesis strategies for hosts (through ``tests.builders.make_host``) and placements."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from tests.builders import kept, make_host
from vnuma.placement.model import CellAssignment, CpuPolicy, DeviceAssignment, Placement, ThreadPolicy
from vnuma.topology import Cpu, DeviceKind, Host, PciDevice, Source

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20)
small = st.integers(min_value=0, max_value=2**40)


@st.composite
def _devices(draw: st.DrawFn, cell_ids: list[int]) -> tuple[PciDevice, ...]:
    buses = draw(st.lists(st.integers(0, 255), unique=True, max_size=4))
    return tuple(
        PciDevice(
            address=f"0000:{bus:02x}:00.{draw(st.integers(0, 7))}",
            kind=draw(st.sampled_from(DeviceKind)),
            vendor_id=draw(st.sampled_from(["0x10de", "0x15b3", "0x8086"])),
            product_id=f"0x{draw(st.integers(0, 0xFFFF)):04x}",
            numa_node=draw(st.none() | st.sampled_from(cell_ids)),
            parent=draw(st.none() | st.just(f"0000:{bus:02x}:01.0")),
        )
        for bus in sorted(buses)
    )


def _unknown_core(cpu: Cpu) -> Cpu:
    return replace(cpu, die=None, core=None)


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    """Hosts of 1-4 CPU cells plus memory-only cells, SMT 1-2, GPUs/NICs, reserved CPUs, extra devices."""
    memory_gib = draw(st.integers(1, 512))
    hp_2m = draw(st.integers(0, memory_gib))
    host = make_host(
        draw(names),
        cells=draw(st.integers(1, 4)),
        cores_per_cell=draw(st.integers(1, 6)),
        smt=draw(st.integers(1, 2)),
        cells_per_socket=draw(st.integers(1, 2)),
        memory_gib=memory_gib,
        hugepages_2m_gib=hp_2m,
        hugepages_1g_gib=draw(st.integers(0, memory_gib - hp_2m)),
        gpus_per_cell=draw(st.integers(0, 2)),
        nics_per_cell=draw(st.integers(0, 1)),
        memory_only_cells=draw(st.integers(0, 2)),
        uri=draw(st.none() | st.sampled_from(["qemu:///system", "qemu+ssh://root@hv1/system"])),
    )
    cpus = sorted(host.cpu_ids)
    cells = host.cells
    if draw(st.booleans()):  # a source that knows no core/die ids
        cells = tuple(replace(c, cpus=tuple(_unknown_core(cpu) for cpu in c.cpus)) for c in cells)
    extra = () if host.devices else draw(_devices([c.id for c in cells]))
    return replace(
        host,
        cells=cells,
        devices=host.devices + extra,
        source=draw(st.sampled_from(Source)),
        reserved_cpus=frozenset(draw(st.lists(st.sampled_from(cpus), max_size=4))),
    )


@st.composite
def placements(draw: st.DrawFn) -> Placement:
    """Structurally arbitrary placements (the codec does not judge feasibility)."""
    n_cells = draw(st.integers(1, 4))
    cells = []
    for g in range(n_cells):
        pcpus = tuple(draw(st.lists(st.integers(0, 511), max_size=8)))
        cells.append(
            CellAssignment(
                guest_cell=g,
                host_cell=draw(st.integers(0, 63)),
                vcpus=tuple(range(len(pcpus))),
                pcpus=pcpus,
                memory_kib=draw(small),
                page_size_kib=draw(st.sampled_from([4, 2048, 1048576])),
            )
        )
    devices = draw(
        st.lists(
            st.builds(
                DeviceAssignment,
                address=st.from_regex(r"\A0000:[0-9a-f]{2}:00\.[0-7]\Z"),
                kind=st.sampled_from(DeviceKind),
                guest_cell=st.integers(0, n_cells - 1),
                host_cell=st.none() | st.integers(0, 63),
            ),
            max_size=4,
        )
    )
    return kept(Placement(
        vm=draw(names),
        tenant=draw(names),
        host=draw(names),
        cells=tuple(cells),
        emulator_pcpus=tuple(draw(st.lists(st.integers(0, 511), max_size=2))),
        devices=tuple(devices),
        cpu_policy=draw(st.sampled_from(CpuPolicy)),
        thread_policy=draw(st.sampled_from(ThreadPolicy)),
        threads_per_core=draw(st.integers(1, 2)),
    ))
