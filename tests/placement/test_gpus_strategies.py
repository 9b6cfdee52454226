"""GPU affinity, GPU sizing and the two strategies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.placement.helpers import GIB, check_fleet, request
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CellAssignment, EmulatorThreads, GpuAffinity, Placement, ThreadPolicy, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.result import PlacementResult
from vnuma.topology import PAGE_1G, DeviceKind, Host


def _gpus_on_cell(host: Host, cell: int) -> Host:
    """``host`` with only the GPUs of one cell left."""
    return replace(host, devices=tuple(d for d in host.devices if d.kind != "gpu" or d.numa_node == cell))


def _run(hosts: list[Host], *reqs: VmRequest, strategy: Strategy = Strategy.PACK) -> list[PlacementResult]:
    fleet = Fleet(hosts)
    results = []
    for r in reqs:
        result = place(r, fleet, strategy)
        if result.chosen is not None:
            fleet.add(result.chosen, r.isolation)
        results.append(result)
    check_fleet(hosts, fleet.placements(), fleet.isolation)
    return results


def _chosen(result: PlacementResult) -> Placement:
    assert result.chosen is not None, result.rejections
    return result.chosen


# A 2-cell host (one socket) whose only GPU is on cell 1.
GPU_ON_1 = _gpus_on_cell(make_host("g", cells=2, cores_per_cell=4, gpus_per_cell=1, cells_per_socket=2), 1)

AFFINITY_CASES = [
    # (id, affinity, placed?)
    ("required-refuses-a-remote-gpu", GpuAffinity.REQUIRED, False),
    ("preferred-takes-a-remote-gpu", GpuAffinity.PREFERRED, True),
    ("socket-takes-a-gpu-of-the-same-socket", GpuAffinity.SOCKET, True),
]


@pytest.mark.parametrize(
    ("affinity", "placed"), [c[1:] for c in AFFINITY_CASES], ids=[c[0] for c in AFFINITY_CASES]
)
def test_gpu_affinity(affinity: GpuAffinity, placed: bool) -> None:
    results = _run(
        [GPU_ON_1],
        request("a", "t0", vcpus=1),  # cell 0 (lowest id on a tie)
        request("b", "t0", vcpus=8),  # does not fit beside "a": fills the GPU cell 1
        request("gpu", "t1", vcpus=4, gpus=1, numa_nodes=1, gpu_affinity=affinity),
    )
    assert _chosen(results[0]).host_cells == (0,) and _chosen(results[1]).host_cells == (1,)
    assert (results[2].chosen is not None) is placed
    if placed:
        p = _chosen(results[2])
        (dev,) = p.devices
        assert p.host_cells == (0,) and dev.host_cell == 1 and dev.guest_cell == 0


def test_required_gpu_lands_on_the_gpu_cell() -> None:
    (result,) = _run([GPU_ON_1], request(vcpus=2, gpus=1))
    p = _chosen(result)
    assert p.cells[0].host_cell == 1 and p.devices[0].host_cell == 1


def test_gpus_are_spread_over_the_guest_cells_that_hold_them() -> None:
    host = make_host("g", cells=2, gpus_per_cell=2)
    (result,) = _run([host], request(vcpus=8, memory_gib=4, gpus=2, numa_nodes=2))
    p = _chosen(result)
    assert sorted(d.guest_cell for d in p.devices) == [0, 1]
    assert all(d.host_cell == p.cells[d.guest_cell].host_cell for d in p.devices)


def test_no_cell_set_with_enough_gpus_is_reported() -> None:
    host = make_host("g", cells=2, gpus_per_cell=1)
    (result,) = _run([host], request(vcpus=2, gpus=2, numa_nodes=1))
    assert result.chosen is None
    assert result.rejections[0].check == "gpus"
    assert "2 free GPUs" in result.rejections[0].reason


SIZE_CASES = [
    # (id, thread policy, gpus, expected vCPUs, expected memory GiB)
    ("one-gpu-prefer", ThreadPolicy.PREFER, 1, 16, 96),
    ("two-gpus-prefer", ThreadPolicy.PREFER, 2, 32, 192),
    ("one-gpu-isolate", ThreadPolicy.ISOLATE, 1, 8, 96),
]


@pytest.mark.parametrize(
    ("policy", "gpus", "vcpus", "mem_gib"), [c[1:] for c in SIZE_CASES], ids=[c[0] for c in SIZE_CASES]
)
def test_gpu_only_requests_get_their_gpus_share(
    policy: ThreadPolicy, gpus: int, vcpus: int, mem_gib: int
) -> None:
    # The example: 32 placeable pCPUs, 256 GiB (192 in 1 GiB pages) and 2 GPUs per cell.
    host = make_host(
        "g",
        cells=2,
        cores_per_cell=16,
        memory_gib=256,
        hugepages_1g_gib=192,
        hugepages_2m_gib=48,
        gpus_per_cell=2,
    )
    (result,) = _run([host], request(vcpus=None, memory_gib=None, gpus=gpus, thread_policy=policy))
    p = _chosen(result)
    assert (p.vcpus, p.memory_kib, p.cells[0].page_size_kib) == (vcpus, mem_gib * GIB, PAGE_1G)
    assert len(p.devices) == gpus


def test_gpu_only_request_on_a_host_without_gpus_is_a_size_rejection() -> None:
    fleet = Fleet([make_host("plain"), make_host("g", gpus_per_cell=1)])
    result = place(request(vcpus=None, memory_gib=None, gpus=1), fleet)
    assert _chosen(result).host == "g"
    assert [r.check for r in result.rejections] == ["size"]


def test_pack_fills_the_partly_used_host_first() -> None:
    results = _run([make_host("a"), make_host("b")], request("one", vcpus=4), request("two", vcpus=4))
    assert _chosen(results[0]).host == _chosen(results[1]).host == "a"
    assert _chosen(results[0]).cells[0].host_cell == _chosen(results[1]).cells[0].host_cell


def test_pack_fills_the_partly_used_host_whatever_its_name() -> None:
    hosts = [make_host("a"), make_host("b")]
    fleet = Fleet(hosts)
    fleet.add(_chosen(place(request("seed", vcpus=2, host="b"), fleet)))
    assert _chosen(place(request("next", vcpus=2), fleet)).host == "b"


def test_gpu_first_sends_vms_without_gpus_away_from_free_gpus() -> None:
    hosts = [make_host("a-gpu", gpus_per_cell=1), make_host("b-cpu")]
    vm = request(vcpus=2)
    assert _chosen(_run(hosts, vm)[0]).host == "a-gpu"
    assert _chosen(_run(hosts, vm, strategy=Strategy.GPU_FIRST)[0]).host == "b-cpu"


def test_gpu_first_keeps_each_free_gpus_share() -> None:
    host = make_host("g", cells=1, cores_per_cell=8, gpus_per_cell=2)  # 16 pCPUs, 8 kept per free GPU
    small, big = request("small", vcpus=2), request("big", vcpus=12)
    results = _run([host], small, big, strategy=Strategy.GPU_FIRST)
    assert results[0].chosen is None and results[0].rejections[0].check == "gpu-reserve"
    results = _run([host], request("gpu", vcpus=8, gpus=1), small, big, strategy=Strategy.GPU_FIRST)
    assert results[1].chosen is None  # 8 pCPUs left, all kept for the last free GPU
    results = _run([host], request("gpu", vcpus=8, gpus=2), small, big, strategy=Strategy.GPU_FIRST)
    assert results[1].chosen is not None and results[2].chosen is None


def test_gpu_first_refuses_a_gpu_vm_that_would_strand_the_other_gpu() -> None:
    host = make_host("g", cells=1, cores_per_cell=8, gpus_per_cell=2)
    greedy = request("greedy", vcpus=16, gpus=1)
    (pack,) = _run([host], greedy)
    (first,) = _run([host], greedy, strategy=Strategy.GPU_FIRST)
    assert pack.chosen is not None
    assert first.chosen is None and first.rejections[0].check == "gpu-strand"


def test_a_gpu_is_taken_from_the_cell_where_it_would_be_stranded() -> None:
    host = make_host("g", cells=2, cores_per_cell=8, gpus_per_cell=1)  # 16 pCPUs per cell
    results = _run(
        [host], request("a", vcpus=4), request("b", vcpus=14), request("gpu", vcpus=4, gpus=1, numa_nodes=2)
    )
    a, b, gpu = (_chosen(r) for r in results)
    assert a.host_cells == (0,) and b.host_cells == (1,)
    # cell 1 keeps 0 pCPUs after the GPU VM, cell 0 keeps 10: cell 1's GPU is the one to use.
    assert gpu.devices[0].host_cell == 1


def test_an_emulator_anchor_still_finds_the_one_cell_with_enough_gpus() -> None:
    # Cell 0: room for the emulator, no GPU; cell 1 (near): 1 GPU; cell 2 (far): 2 GPUs.
    # Cells 1 and 2 have exactly the VM's 2 pCPUs free, so cell 0 must be guest cell 0.
    full = make_host("g", cells=3, cores_per_cell=2, gpus_per_cell=2, cells_per_socket=2)
    drop = {d.address for d in full.devices if d.numa_node == 0} | {
        full.devices_of(DeviceKind.GPU)[2].address
    }
    host = replace(full, devices=tuple(d for d in full.devices if d.address not in drop))
    fleet = Fleet([host])
    for cell in (1, 2):
        pins = tuple(sorted(host.cell(cell).cpus[0].siblings))  # one whole core
        fleet.add(
            Placement(f"fill{cell}", "t0", "g", (CellAssignment(0, cell, (0, 1), pins, PAGE_1G, PAGE_1G),))
        )
    vm = request(vcpus=4, gpus=2, numa_nodes=2, emulator_threads=EmulatorThreads.ISOLATE)
    p = _chosen(place(vm, fleet))
    assert p.host_cells == (0, 2)
    assert {d.host_cell for d in p.devices} == {2}
