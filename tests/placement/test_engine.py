"""Engine contract: validation errors, rejection reasons, explain output, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.placement.helpers import GIB, request
from vnuma.errors import ConflictError, InvalidInputError, NotFoundError
from vnuma.placement.engine import best_reason, place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.memory import RefusalMemory
from vnuma.placement.model import CpuPolicy, EmulatorThreads, Isolation, Tenant, ThreadPolicy, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.quota import Usage, check_quota
from vnuma.placement.result import PlacementResult, Rejection
from vnuma.topology import PAGE_1G, PAGE_2M, Host

FLEET_HOSTS = [make_host("a", gpus_per_cell=1), make_host("b")]

INVALID = [
    # (id, request, error class, message fragment)
    ("zero-vcpus", request(vcpus=0), InvalidInputError, "at least 1 vCPU"),
    ("negative-gpus", request(gpus=-1), InvalidInputError, "negative"),
    ("no-size-without-gpus", request(vcpus=None, memory_gib=None), InvalidInputError, "required unless GPUs"),
    ("vcpus-do-not-split", request(vcpus=3, numa_nodes=2), InvalidInputError, "split evenly"),
    (
        "memory-not-whole-pages",
        request(memory_gib=3, numa_nodes=2, page_size_kib=PAGE_1G),
        InvalidInputError,
        "whole number of 1 GiB pages",
    ),
    (
        "memory-not-whole-4k",
        replace(request(), memory_kib=GIB + 2),
        InvalidInputError,
        "whole number of 4 KiB",
    ),
    ("more-gpus-than-the-fleet", request(gpus=3), InvalidInputError, "whole fleet has 2"),
    ("zero-numa-nodes", request(numa_nodes=0), InvalidInputError, "NUMA node count"),
    (
        "odd-require",
        request(vcpus=3, thread_policy=ThreadPolicy.REQUIRE, numa_nodes=1),
        InvalidInputError,
        "odd",
    ),
    (
        "shared-isolate",
        request(cpu_policy=CpuPolicy.SHARED, thread_policy=ThreadPolicy.ISOLATE),
        InvalidInputError,
        "dedicated",
    ),
    (
        "shared-emulator",
        request(cpu_policy=CpuPolicy.SHARED, emulator_threads=EmulatorThreads.ISOLATE),
        InvalidInputError,
        "dedicated",
    ),
    ("bad-page-size", request(page_size_kib=3000), InvalidInputError, "page size"),
    ("tiny-page-size", request(page_size_kib=2), InvalidInputError, "page size"),
    ("unknown-host", request(host="nowhere"), NotFoundError, "nowhere"),
]


@pytest.mark.parametrize(("req", "error", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_malformed_requests_raise(req: VmRequest, error: type[Exception], fragment: str) -> None:
    fleet = Fleet(FLEET_HOSTS)
    for explain in (True, False):
        with pytest.raises(error, match=fragment):
            place(req, fleet, explain=explain)


HOST = make_host("h", cells=2, cores_per_cell=8, smt=2, memory_gib=64, gpus_per_cell=1)

REJECTIONS = [
    # (id, hosts, request, strategy, expected check, reason fragment)
    ("host", [HOST, make_host("z")], request(host="z"), Strategy.PACK, "host", "not the requested host"),
    ("numa-nodes", [HOST], request(vcpus=4, numa_nodes=4), Strategy.PACK, "numa-nodes", "2 CPU cell"),
    (
        "cell-cpus",
        [HOST],
        request(vcpus=24, numa_nodes=1),
        Strategy.PACK,
        "cell-cpus",
        "cell 0: needs 24 pCPUs, 16 free",
    ),
    (
        "cell-cpus-whole-cores",
        [HOST],
        request(vcpus=10, numa_nodes=1, thread_policy=ThreadPolicy.ISOLATE),
        Strategy.PACK,
        "cell-cpus",
        "needs 10 whole cores, 8 free",
    ),
    (
        "cell-pages",
        [HOST],
        request(vcpus=2, memory_gib=40, numa_nodes=1),
        Strategy.PACK,
        "cell-pages",
        "needs 40 free 1 GiB pages",
    ),
    ("gpus", [HOST], request(vcpus=2, gpus=2, numa_nodes=1), Strategy.PACK, "gpus", "with 2 free GPUs"),
    (
        "smt",
        [make_host("flat", smt=1)],
        request(thread_policy=ThreadPolicy.REQUIRE),
        Strategy.PACK,
        "smt",
        "no SMT siblings",
    ),
    (
        "emulator",
        [HOST],
        request(vcpus=16, numa_nodes=1, emulator_threads=EmulatorThreads.ISOLATE),
        Strategy.PACK,
        "emulator",
        "plus 1 for the isolated emulator",
    ),
    ("gpu-reserve", [HOST], request(vcpus=2), Strategy.GPU_FIRST, "gpu-reserve", "gpu-first keeps"),
    (
        "gpu-strand",
        [make_host("h", cells=2, cores_per_cell=8, smt=2, memory_gib=64, gpus_per_cell=2)],
        request(vcpus=32, gpus=1, numa_nodes=2, page_size_kib=PAGE_2M),
        Strategy.GPU_FIRST,
        "gpu-strand",
        "would leave other free GPUs",
    ),
    (
        "size",
        [make_host("plain")],
        request(vcpus=None, memory_gib=None, gpus=1),
        Strategy.PACK,
        "size",
        "no GPUs on CPU cells",
    ),
]


@pytest.mark.parametrize(
    ("hosts", "req", "strategy", "check", "fragment"),
    [c[1:] for c in REJECTIONS],
    ids=[c[0] for c in REJECTIONS],
)
def test_rejection_reasons(
    hosts: list[Host], req: VmRequest, strategy: Strategy, check: str, fragment: str
) -> None:
    fleet = Fleet(hosts)
    if req.gpus > fleet.gpus_total:  # sizing needs a GPU somewhere to pass validation
        fleet = Fleet([*hosts, make_host("zz-gpu", cells=1, gpus_per_cell=1)])
    result = place(req, fleet, strategy)
    rejection = next(r for r in result.rejections if r.host == hosts[0].name)
    assert (rejection.check, fragment in rejection.reason) == (check, True), rejection
    if result.chosen is None:
        assert len(result.rejections) == len(fleet.host_names())
        assert best_reason(result)


def test_explain_rejects_every_other_host_and_scores_the_fitting_ones() -> None:
    fleet = Fleet([make_host("a"), make_host("b"), make_host("tiny", cells=1, cores_per_cell=1)])
    result = place(request(vcpus=4), fleet)
    assert result.chosen is not None
    assert [r.host for r in result.rejections] == ["tiny"]
    assert [h for h, _ in result.scores] == ["a", "b"]
    assert all(0 <= s <= 300 for _, s in result.scores)


def test_best_reason_names_the_host_that_came_closest() -> None:
    result = PlacementResult(
        None,
        (
            Rejection("a", "cell-cpus", "cell 0: needs 8 pCPUs, 6 free"),
            Rejection("b", "gpus", "no cell with 2 free GPUs"),
        ),
    )
    assert best_reason(result).endswith("; closest: b (no cell with 2 free GPUs)")
    assert best_reason(PlacementResult(None, (Rejection("b", "gpus", "no cell with 2 free GPUs"),))) == (
        "b: no cell with 2 free GPUs"
    )
    assert best_reason(PlacementResult(None)) == "the inventory has no hosts"


def test_an_empty_fleet_rejects_without_raising() -> None:
    for explain in (True, False):
        result = place(request(), Fleet([]), explain=explain)
        assert result.chosen is None and result.rejections == ()


def test_same_fleet_and_request_give_the_same_answer_in_any_host_order() -> None:
    hosts = [make_host(n, gpus_per_cell=g) for n, g in (("c", 1), ("a", 0), ("b", 2))]
    fleets = [Fleet(hosts), Fleet(list(reversed(hosts)))]
    for i in range(6):
        req = request(f"vm{i}", f"t{i % 3}", vcpus=2 * (i + 1), gpus=i % 2, numa_nodes=None)
        results = [place(req, f) for f in fleets] + [place(req, fleets[0], explain=False)]
        assert results[0] == results[1]
        assert results[2].chosen == results[0].chosen
        assert results[0].chosen is not None
        for f in fleets:
            f.add(results[0].chosen, Isolation.CORE)


def test_the_requested_host_is_the_only_candidate() -> None:
    fleet = Fleet([make_host("a"), make_host("b")])
    result = place(request(host="b"), fleet)
    assert result.chosen is not None and result.chosen.host == "b"
    assert [(r.host, r.check) for r in result.rejections] == [("a", "host")]


QUOTAS = [
    # (id, tenant, usage vcpus, usage gpus, asked vcpus, asked gpus, error or None)
    ("unlimited", Tenant("t"), 100, 10, 100, 10, None),
    ("within", Tenant("t", max_vcpus=8, max_gpus=2), 4, 1, 4, 1, None),
    ("vm-alone-too-big", Tenant("t", max_vcpus=8), 0, 0, 16, 0, ConflictError),
    ("usage-plus-vm", Tenant("t", max_vcpus=8), 6, 0, 4, 0, ConflictError),
    ("gpus", Tenant("t", max_gpus=1), 1, 1, 0, 1, ConflictError),
    # A lowered quota blocks growth, not a VM that asks for none of the resource.
    ("none-asked-over-lowered-quota", Tenant("t", max_vcpus=8, max_gpus=1), 4, 3, 2, 0, None),
]


@pytest.mark.parametrize(
    ("tenant", "uv", "ug", "rv", "rg", "error"), [c[1:] for c in QUOTAS], ids=[c[0] for c in QUOTAS]
)
def test_quota(tenant: Tenant, uv: int, ug: int, rv: int, rg: int, error: type[Exception] | None) -> None:
    if error is None:
        check_quota(tenant, Usage(uv, ug), rv, rg)
    else:
        with pytest.raises(error, match=tenant.name):
            check_quota(tenant, Usage(uv, ug), rv, rg)


def test_fast_path_remembers_refused_shapes_until_capacity_grows() -> None:
    fleet = Fleet([make_host("a", cells=1, cores_per_cell=2)])
    filler = place(request("fill", vcpus=4), fleet).chosen
    assert filler is not None
    fleet.add(filler)
    shape = {"numa_nodes": 1, "page_size_kib": PAGE_1G}  # fixed: only then is a bigger request refused too
    small, bigger = request("s", vcpus=2, **shape), request("b", vcpus=3, **shape)  # type: ignore[arg-type]
    memory = RefusalMemory()
    assert place(small, fleet, explain=False, memory=memory).chosen is None
    refused = place(bigger, fleet, explain=False, memory=memory)
    assert refused.chosen is None and "smaller request" in refused.rejections[0].reason
    # Without the memory the same request is refused for its own reason.
    assert "smaller request" not in place(bigger, fleet, explain=False).rejections[0].reason
    fleet.remove("fill")
    assert place(bigger, fleet, explain=False, memory=memory).chosen is not None


def test_under_gpu_first_a_refusal_is_forgotten_once_gpus_are_taken() -> None:
    host = make_host("g", cells=1, cores_per_cell=8, gpus_per_cell=2)  # 16 pCPUs, 2 GPUs
    fleet = Fleet([host])
    shape = {"numa_nodes": 1, "page_size_kib": PAGE_1G}
    small = request("small", "t1", vcpus=2, **shape)
    memory = RefusalMemory()
    assert place(small, fleet, Strategy.GPU_FIRST, explain=False, memory=memory).chosen is None  # kept for GPUs
    gpu_vm = place(request("gpu", "t2", vcpus=8, gpus=2, **shape), fleet, Strategy.GPU_FIRST)
    assert gpu_vm.chosen is not None
    fleet.add(gpu_vm.chosen)
    assert place(small, fleet, Strategy.GPU_FIRST, explain=False, memory=memory).chosen is not None


@pytest.mark.parametrize("explain", [True, False], ids=["explain", "fast"])
def test_gpu_first_holds_a_cells_only_gpu_to_the_no_stranding_rule(explain: bool) -> None:
    # One GPU per cell (NPS4-style): a 2-cell VM with 1 GPU fills a cell whose GPU it does not take.
    # Leaving that GPU half its cell's pCPUs (8 of 16) is no stranding: placed.
    small = place(request(vcpus=16, gpus=1, numa_nodes=2, page_size_kib=PAGE_2M), Fleet([HOST]), Strategy.GPU_FIRST,
                  explain=explain)
    assert small.chosen is not None and len(small.chosen.devices) == 1
    # Taking every pCPU of both cells strands the other GPU: gpu-first refuses, pack places.
    big = request(vcpus=32, gpus=1, numa_nodes=2, page_size_kib=PAGE_2M)
    refused = place(big, Fleet([HOST]), Strategy.GPU_FIRST, explain=explain)
    assert refused.chosen is None and refused.rejections[0].check == "gpu-strand"
    assert place(big, Fleet([HOST]), Strategy.PACK, explain=explain).chosen is not None


def test_under_gpu_first_more_gpus_can_fit_where_fewer_strand() -> None:
    fleet = Fleet([make_host("g", cells=1, cores_per_cell=8, gpus_per_cell=2)])
    shape = {"vcpus": 16, "numa_nodes": 1, "page_size_kib": PAGE_1G}
    one = place(request("one", gpus=1, **shape), fleet, Strategy.GPU_FIRST, explain=False)  # type: ignore[arg-type]
    assert one.chosen is None and one.rejections[0].check == "gpu-strand"
    two = place(request("two", gpus=2, **shape), fleet, Strategy.GPU_FIRST, explain=False)  # type: ignore[arg-type]
    assert two.chosen is not None
