"""A GPU's own NUMA nodes read from libvirt: HMAT naming a CPU-less initiator, with the node devices.

Inputs: the GH200-like capabilities and node devices of ``tests/data/grace`` (written by this project from
NVIDIA's published topology: see the README there), and built hosts (two CPU cells, memory-only cells 2 and 3;
cell 2 is 14 from cell 0 and 24 from cell 1) with HMAT tables written for each rule of
:mod:`vnuma.sources.gpunodes`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from vnuma.placement.cold import cold_cells
from vnuma.services.hosts import import_documents
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.gpunodes import with_gpu_nodes
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.hmat import Hmat
from vnuma.topology.hostcheck import check_host
from vnuma.topology.tiers import cell_kinds

GRACE = Path(__file__).resolve().parent.parent / "data" / "grace"
CAPS = GRACE / "gh200-numa-capabilities.xml"
NODEDEVS = GRACE / "gh200-numa-nodedevs.xml"
GH200_GPU = "0009:01:00.0"
GPU_A, GPU_B = "0000:10:00.0", "0000:20:00.0"


def _gh200(*, nodedevs: bool = True) -> Host:
    docs = [(NODEDEVS.name, NODEDEVS.read_bytes())] if nodedevs else []
    imported = import_documents("gh", (CAPS.name, CAPS.read_bytes()), docs, None)
    assert imported.left_out == ()
    return imported.host


def _built(
    bandwidth: tuple[tuple[int, int, int], ...] = (),
    gpus: dict[str, int] | None = None,
    latency: tuple[tuple[int, int, int], ...] = (),
) -> Host:
    """Two CPU cells (DRAM rated 100 from itself), memory-only cells 2 and 3, GPUs on the cells given."""
    host = make_host("h", cells=2, memory_only_cells=2, memory_only_gib=16)
    devices = tuple(PciDevice(a, DeviceKind.GPU, "0x10de", "0x2342", n) for a, n in sorted((gpus or {}).items()))
    rated = {(0, 0): 100, (1, 1): 100} | {(i, t): v for i, t, v in bandwidth}
    figures = tuple(sorted((i, t, v) for (i, t), v in rated.items()))
    hmat = Hmat(latency_ns=tuple(sorted(latency)), bandwidth_kib_s=figures)
    return check_host(replace(host, devices=devices, hmat=hmat))


def _memoryless(host: Host, cell_id: int) -> Host:
    cells = tuple(replace(c, memory_kib=0, pages=()) if c.id == cell_id else c for c in host.cells)
    return replace(host, cells=cells)


# --- the GH200-like host ---------------------------------------------------------------------


def test_gh200s_hbm_node_is_the_gpus_memory_and_the_gpu_stays_beside_the_grace_cpus() -> None:
    host = _gh200()
    hbm = host.cell(1)
    assert (hbm.gpu, hbm.subtype, hbm.memory_only, hbm.memory_kib) == (GH200_GPU, "GPUMemory", True, 96 << 20)
    assert cell_kinds(host)[0] == "dram" and cell_kinds(host)[1] == "gpu"
    assert [c.id for c in host.cells if c.gpu_memory] == [1]  # nodes 2-8 (kept for MIG, empty) are named by nothing
    (gpu,) = host.devices_of(DeviceKind.GPU)
    assert (gpu.address, gpu.numa_node) == (GH200_GPU, 0)
    assert (1, 1, 4 * 10**12 // 1024) in host.hmat.bandwidth_kib_s  # the GPU as the initiator of its memory
    assert [c.id for c in cold_cells(host) if c.capacity and c.id == 1] == []


def test_without_node_devices_the_hbm_node_is_still_gpu_memory_of_a_gpu_not_known() -> None:
    host = _gh200(nodedevs=False)
    assert (host.cell(1).gpu, host.cell(1).gpu_memory, cell_kinds(host)[1]) == (None, True, "gpu")


def test_capabilities_alone_read_the_cpu_less_initiator_as_any_other() -> None:
    host = parse_capabilities(CAPS.read_bytes(), name="gh", what=CAPS.name)
    assert {(i, t) for i, t, _v in host.hmat.bandwidth_kib_s} == {(0, 0), (1, 1)}
    assert host.cell(1).gpu is None  # the node devices join later (services), and then the rule applies


# --- the rule, on built hosts -----------------------------------------------------------------


def test_memory_rated_best_from_a_cpu_less_initiator_is_the_gpus_on_the_nearest_cpu_cell() -> None:
    host = with_gpu_nodes(_built(((0, 2, 50), (2, 2, 1000), (1, 3, 50)), {GPU_A: 0, GPU_B: 1}))
    assert (host.cell(2).gpu, cell_kinds(host)[2]) == (GPU_A, "gpu")  # cell 0 is nearest cell 2 (14 vs 24)
    assert (host.cell(3).gpu, cell_kinds(host)[3]) == (None, "cxl")  # rated from a CPU cell only
    assert {d.address: d.numa_node for d in host.devices} == {GPU_A: 0, GPU_B: 1}


def test_two_gpus_on_the_nearest_cpu_cell_leave_the_gpu_unknown_and_the_memory_a_gpus() -> None:
    host = with_gpu_nodes(_built(((2, 2, 1000),), {GPU_A: 0, "0000:11:00.0": 0}))
    cell = host.cell(2)
    assert (cell.gpu, cell.subtype, cell.gpu_memory) == (None, "GPUMemory", True)
    assert [(c.id, c.kind, c.capacity) for c in cold_cells(host)] == [(2, "gpu", False), (3, "unknown", True)]


def test_a_gpu_whose_node_device_names_its_own_node_is_that_memorys_and_moves_beside_the_cpus() -> None:
    host = with_gpu_nodes(_built(((2, 2, 1000),), {GPU_A: 0, GPU_B: 2}))
    assert host.cell(2).gpu == GPU_B
    assert {d.address: d.numa_node for d in host.devices} == {GPU_A: 0, GPU_B: 0}  # cell 0 is nearest cell 2


def test_an_initiator_without_memory_is_recorded_with_the_gpu_whose_memory_it_rates_best() -> None:
    # Cell 3 stands for Grace Hopper's nodes kept for MIG: no memory, the GPU's initiator all the same.
    host = with_gpu_nodes(_memoryless(_built(((2, 2, 1000), (3, 2, 1000)), {GPU_A: 0}), 3))
    assert (host.cell(2).gpu, host.cell(3).gpu) == (GPU_A, GPU_A)
    assert cell_kinds(host)[3] == "gpu"


def test_a_gpu_on_any_of_the_initiators_rated_best_is_that_memorys() -> None:
    host = with_gpu_nodes(_memoryless(_built(((2, 2, 1000), (3, 2, 1000)), {GPU_A: 3}), 3))
    assert (host.cell(2).gpu, host.cell(3).gpu) == (GPU_A, GPU_A)
    assert host.devices[0].numa_node == 1  # cell 1 is nearest cell 3 (14 vs 24)


def test_an_initiator_with_memory_of_its_own_rated_best_from_a_cpu_keeps_it() -> None:
    host = with_gpu_nodes(_built(((2, 2, 1000), (3, 2, 1000), (1, 3, 50)), {GPU_A: 0}))
    assert (host.cell(2).gpu, host.cell(3).gpu, cell_kinds(host)[3]) == (GPU_A, None, "cxl")


def test_a_tie_with_a_cpu_or_a_slower_device_is_not_a_devices_memory() -> None:
    for bandwidth in (((0, 2, 1000), (2, 2, 1000)), ((0, 2, 50), (3, 2, 10))):
        host = with_gpu_nodes(_built(bandwidth, {GPU_A: 0}))
        assert not any(c.gpu_memory for c in host.cells), bandwidth


def test_without_bandwidth_figures_the_lowest_latency_decides() -> None:
    host = with_gpu_nodes(_built(latency=((0, 2, 300), (2, 2, 100)), gpus={GPU_A: 0}))
    assert host.cell(2).gpu == GPU_A
    host = with_gpu_nodes(_built(latency=((0, 2, 100), (2, 2, 300)), gpus={GPU_A: 0}))
    assert not host.cell(2).gpu_memory


def test_a_tie_between_cpu_cells_leaves_the_gpu_unknown_and_unplaced() -> None:
    built = _built(((2, 2, 1000),), {GPU_A: 2})
    even = tuple(replace(c, distances=((0, 20), (1, 20), (2, 10), (3, 30))) if c.id == 2 else c for c in built.cells)
    host = with_gpu_nodes(replace(built, cells=even))
    assert host.cell(2).gpu == GPU_A  # its node device names the node
    assert host.devices[0].numa_node is None  # no one CPU cell nearest: --gpu-affinity preferred places it


def test_hosts_with_nothing_to_read_are_returned_as_they_are() -> None:
    plain = _built(((0, 2, 50),), {GPU_A: 0})
    assert with_gpu_nodes(plain) is plain  # no CPU-less initiator
    named = replace(plain, cells=tuple(replace(c, gpu=GPU_A) if c.id == 3 else c for c in plain.cells))
    named = replace(named, hmat=Hmat(bandwidth_kib_s=((2, 2, 1000),)))
    assert with_gpu_nodes(named) is named  # the host names its GPU memory already (hwloc)


_FIGURES = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 2000)), max_size=10, unique_by=lambda x: x[:2]
)


@settings(max_examples=200, deadline=None)
@given(bandwidth=_FIGURES, latency=_FIGURES, gpu_cells=st.lists(st.integers(0, 3), max_size=3))
def test_only_cpu_less_cells_rated_best_from_no_cpu_become_a_gpus(
    bandwidth: list[tuple[int, int, int]], latency: list[tuple[int, int, int]], gpu_cells: list[int]
) -> None:
    gpus = {f"0000:{0x10 + i:02x}:00.0": cell for i, cell in enumerate(gpu_cells)}
    before = _built(tuple(bandwidth), gpus, tuple(latency))
    after = check_host(with_gpu_nodes(before))
    cpu_cells = {c.id for c in before.cells if c.cpus}
    for old, new in zip(before.cells, after.cells, strict=True):
        if not new.gpu_memory:
            assert new == old
            continue
        assert not new.cpus and (new.gpu is None or new.gpu in gpus)
        rated = {i: v for i, t, v in before.hmat.bandwidth_kib_s if t == new.id}
        if new.memory_kib and rated:
            best = max(rated.values())
            assert not any(rated.get(c) == best for c in cpu_cells)
    assert all(cell_kinds(after)[c] == "dram" for c in cpu_cells)
    assert not any(c.capacity for c in cold_cells(after) if after.cell(c.id).gpu_memory)
    for dev in after.devices:
        assert dev.numa_node is None or dev.numa_node in cpu_cells or not after.cell(dev.numa_node).gpu_memory
