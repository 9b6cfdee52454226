"""Table tests of the engine's CPU, thread, isolation, page and emulator policies."""

from __future__ import annotations

import pytest

from tests.builders import make_host
from tests.placement.helpers import GIB, check_fleet, held_by, request, siblings_of
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CpuPolicy, EmulatorThreads, Isolation, Placement, ThreadPolicy, VmRequest
from vnuma.placement.result import PlacementResult
from vnuma.topology import PAGE_1G, PAGE_2M, PAGE_4K, Host

SMALL = make_host(
    "a", cells=1, cores_per_cell=4, smt=2, memory_gib=16, hugepages_2m_gib=4, hugepages_1g_gib=8
)


def _run(hosts: list[Host], *reqs: VmRequest) -> tuple[Fleet, list[PlacementResult]]:
    """Place requests in order on a fresh fleet (adding each placement), checking invariants."""
    fleet = Fleet(hosts)
    results = []
    for r in reqs:
        result = place(r, fleet)
        if result.chosen is not None:
            fleet.add(result.chosen, r.isolation)
        results.append(result)
        check_fleet(hosts, fleet.placements(), fleet.isolation)
    return fleet, results


def _chosen(result: PlacementResult) -> Placement:
    assert result.chosen is not None, result.rejections
    return result.chosen


THREAD_CASES = [
    # (id, request kwargs, expected threads_per_core, pCPUs held)
    ("prefer-even-on-pairs", {"vcpus": 4}, 2, 4),
    ("prefer-odd-single-threads", {"vcpus": 3}, 1, 3),
    ("isolate-whole-cores", {"vcpus": 2, "thread_policy": ThreadPolicy.ISOLATE}, 1, 4),
    ("require-pairs", {"vcpus": 4, "thread_policy": ThreadPolicy.REQUIRE}, 2, 4),
    (
        "isolate-emulator-gets-a-core",
        {"vcpus": 1, "thread_policy": ThreadPolicy.ISOLATE, "emulator_threads": EmulatorThreads.ISOLATE},
        1,
        4,
    ),
    ("prefer-emulator-one-thread", {"vcpus": 2, "emulator_threads": EmulatorThreads.ISOLATE}, 2, 3),
]


@pytest.mark.parametrize(
    ("kw", "threads", "held"), [c[1:] for c in THREAD_CASES], ids=[c[0] for c in THREAD_CASES]
)
def test_thread_policies(kw: dict[str, object], threads: int, held: int) -> None:
    _, (result,) = _run([SMALL], request(**kw))  # type: ignore[arg-type]
    p = _chosen(result)
    assert p.threads_per_core == threads
    assert len(held_by(p, SMALL)) == held


def test_emulator_isolate_is_an_extra_pcpu_on_the_first_guest_cell() -> None:
    host = make_host("a", cells=2, cores_per_cell=2)
    _, (result,) = _run([host], request(vcpus=4, numa_nodes=2, emulator_threads=EmulatorThreads.ISOLATE))
    p = _chosen(result)
    (emu,) = p.emulator_pcpus
    assert emu not in {x for c in p.cells for x in c.pcpus}
    assert emu in host.cell(p.cells[0].host_cell).cpu_ids


def test_emulator_share_floats_over_the_vm_pcpus() -> None:
    _, (result,) = _run([SMALL], request(vcpus=2))
    p = _chosen(result)
    assert set(p.emulator_pcpus) == {x for c in p.cells for x in c.pcpus}


def test_isolate_leaves_the_siblings_empty_for_everyone() -> None:
    _fleet, results = _run(
        [SMALL],
        request("iso", "t1", vcpus=4, thread_policy=ThreadPolicy.ISOLATE),
        request("other", "t1", vcpus=1),
    )
    assert results[0].chosen is not None and results[1].chosen is None
    assert results[1].rejections[0].check == "cell-cpus"


def test_require_on_a_host_without_smt_is_rejected() -> None:
    host = make_host("flat", cells=1, cores_per_cell=8, smt=1)
    _, (result,) = _run([host], request(vcpus=2, thread_policy=ThreadPolicy.REQUIRE))
    assert result.chosen is None
    assert result.rejections[0].check == "smt"


ISOLATION_CASES = [
    # (id, isolation of both tenants, second VM placed?)
    ("core-keeps-a-tenants-odd-sibling", Isolation.CORE, False),
    ("none-shares-siblings", Isolation.NONE, True),
]


@pytest.mark.parametrize(
    ("iso", "placed"), [c[1:] for c in ISOLATION_CASES], ids=[c[0] for c in ISOLATION_CASES]
)
def test_core_isolation(iso: Isolation, placed: bool) -> None:
    host = make_host(
        "a", cells=1, cores_per_cell=2, smt=2, memory_gib=8, hugepages_1g_gib=4, hugepages_2m_gib=2
    )
    _, results = _run(
        [host],
        request("a1", "ta", vcpus=1, isolation=iso),
        request("b1", "tb", vcpus=3, isolation=iso),
    )
    assert (results[1].chosen is not None) is placed


def test_a_tenant_fills_its_own_half_used_core_first() -> None:
    host = make_host(
        "a", cells=1, cores_per_cell=2, smt=2, memory_gib=8, hugepages_1g_gib=4, hugepages_2m_gib=2
    )
    _, results = _run([host], request("a1", "ta", vcpus=1), request("a2", "ta", vcpus=1))
    first, second = _chosen(results[0]).cells[0].pcpus[0], _chosen(results[1]).cells[0].pcpus[0]
    assert siblings_of(host)[first] == siblings_of(host)[second]


def test_cell_isolation_keeps_other_tenants_out() -> None:
    host = make_host("a", cells=2, cores_per_cell=4, smt=2)
    _, results = _run(
        [host],
        request("c1", "tc", vcpus=1, isolation=Isolation.CELL),
        request("b1", "tb", vcpus=2),
        request("b2", "tb", vcpus=8),
        request("c2", "tc", vcpus=2, isolation=Isolation.CELL),
    )
    c1, b1 = _chosen(results[0]), _chosen(results[1])
    assert b1.cells[0].host_cell != c1.cells[0].host_cell
    assert results[2].chosen is None  # the only free cell is the isolated tenant's
    assert _chosen(results[3]).cells[0].host_cell == c1.cells[0].host_cell


def test_every_cell_taken_by_a_cell_isolated_tenant_is_reported() -> None:
    host = make_host("a", cells=1, cores_per_cell=4)
    _, results = _run(
        [host], request("c1", "tc", vcpus=1, isolation=Isolation.CELL), request("b1", "tb", vcpus=1)
    )
    assert results[1].chosen is None
    assert results[1].rejections[0].check == "cell-isolation"


def test_shared_vms_float_over_a_common_pool_that_dedicated_vms_avoid() -> None:
    host = make_host(
        "a", cells=1, cores_per_cell=2, smt=2, memory_gib=16, hugepages_1g_gib=8, hugepages_2m_gib=4
    )
    _fleet, results = _run(
        [host],
        request("s1", "t1", vcpus=2, cpu_policy=CpuPolicy.SHARED),
        request("s2", "t1", vcpus=2, cpu_policy=CpuPolicy.SHARED),
        request("d1", "t1", vcpus=3),
        request("d2", "t1", vcpus=2),
    )
    s1, s2 = _chosen(results[0]), _chosen(results[1])
    assert s1.cells[0].pcpus == s2.cells[0].pcpus
    assert s1.dedicated_pcpus == frozenset()
    assert results[2].chosen is None
    assert not set(_chosen(results[3]).cells[0].pcpus) & set(s1.cells[0].pcpus)


def test_shared_pool_of_one_tenant_is_closed_to_another_under_core_isolation() -> None:
    host = make_host(
        "a", cells=1, cores_per_cell=1, smt=2, memory_gib=16, hugepages_1g_gib=8, hugepages_2m_gib=4
    )
    _, results = _run(
        [host],
        request("s1", "t1", vcpus=1, cpu_policy=CpuPolicy.SHARED),
        request("s2", "t2", vcpus=1, cpu_policy=CpuPolicy.SHARED),
    )
    assert results[0].chosen is not None and results[1].chosen is None


PAGE_CASES = [
    # (id, host kwargs, request kwargs, expected page size, or the check that refuses)
    ("large-picks-1g", {}, {"memory_gib": 2}, PAGE_1G),
    ("large-falls-back-to-2m", {"hugepages_1g_gib": 0}, {"memory_gib": 2}, PAGE_2M),
    ("large-never-falls-back-to-4k", {"hugepages_1g_gib": 0, "hugepages_2m_gib": 0}, {"memory_gib": 2}, "page-size"),
    ("explicit-4k", {}, {"memory_gib": 2, "page_size_kib": PAGE_4K}, PAGE_4K),
    ("explicit-2m", {}, {"memory_gib": 2, "page_size_kib": PAGE_2M}, PAGE_2M),
    (
        "explicit-1g-pool-too-small",
        {"hugepages_1g_gib": 1},
        {"memory_gib": 2, "page_size_kib": PAGE_1G},
        "cell-pages",
    ),
]


@pytest.mark.parametrize(
    ("host_kw", "kw", "size"), [c[1:] for c in PAGE_CASES], ids=[c[0] for c in PAGE_CASES]
)
def test_page_sizes(host_kw: dict[str, int], kw: dict[str, object], size: int | str) -> None:
    """A page size, or the check that refuses (a host whose hugepage pools hold no pages has no hugepages)."""
    host = make_host("a", cells=1, **host_kw)  # type: ignore[arg-type]
    _, (result,) = _run([host], request(**kw))  # type: ignore[arg-type]
    if isinstance(size, str):
        assert result.chosen is None and result.rejections[0].check == size
    else:
        assert _chosen(result).cells[0].page_size_kib == size
        assert _chosen(result).cells[0].pages * size == 2 * GIB


NODE_CASES = [
    # (id, vcpus, numa_nodes, expected cell count)
    ("auto-one-cell-when-it-fits", 8, None, 1),
    ("auto-two-cells-when-it-does-not", 24, None, 2),
    ("explicit-two", 8, 2, 2),
]


@pytest.mark.parametrize(
    ("vcpus", "nodes", "cells"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES]
)
def test_numa_nodes(vcpus: int, nodes: int | None, cells: int) -> None:
    host = make_host("a", cells=4, cells_per_socket=2)
    _, (result,) = _run([host], request(vcpus=vcpus, memory_gib=4, numa_nodes=nodes))
    assert len(_chosen(result).cells) == cells


def test_two_node_vm_takes_two_cells_of_one_socket() -> None:
    host = make_host("a", cells=4, cells_per_socket=2)
    fleet, results = _run(
        [host],
        request("fill0", vcpus=12, numa_nodes=1),  # leaves socket 0 lopsided
        request("wide", vcpus=8, numa_nodes=2),
    )
    wide = _chosen(results[1])
    assert fleet.state("a").is_adjacent(wide.host_cells)
    sockets = {host.cell(c).cpus[0].socket for c in wide.host_cells}
    assert len(sockets) == 1


def test_memory_is_split_evenly_and_vcpus_numbered_across_cells() -> None:
    host = make_host("a", cells=2)
    _, (result,) = _run([host], request(vcpus=6, memory_gib=4, numa_nodes=2))
    p = _chosen(result)
    assert [c.vcpus for c in p.cells] == [(0, 1, 2), (3, 4, 5)]
    assert [c.memory_kib for c in p.cells] == [2 * GIB, 2 * GIB]


def test_placement_never_uses_reserved_cpus() -> None:
    host = make_host("a", cells=1, cores_per_cell=2, smt=2, reserved_cpus=frozenset({0, 2}))
    _, results = _run([host], request(vcpus=2), request("b", vcpus=1))
    assert set(_chosen(results[0]).cells[0].pcpus) == {1, 3}
    assert results[1].chosen is None


def test_a_core_shared_before_an_isolation_change_is_closed_to_everyone() -> None:
    host = make_host(
        "a", cells=1, cores_per_cell=2, smt=4, memory_gib=16, hugepages_1g_gib=8, hugepages_2m_gib=4
    )
    fleet = Fleet([host])
    pins = []
    for name, tenant in (("t1", "ta"), ("u1", "tb")):
        chosen = _chosen(place(request(name, tenant, vcpus=1, isolation=Isolation.NONE), fleet))
        fleet.add(chosen, Isolation.NONE)
        pins.append(chosen.cells[0].pcpus[0])
    assert siblings_of(host)[pins[0]] == siblings_of(host)[pins[1]]  # isolation none: one core, two tenants
    # Tenant tb becomes core-isolated: the core it shares with ta may take nobody's vCPUs any more.
    fleet.add(_chosen(place(request("u2", "tb", vcpus=4, isolation=Isolation.CORE), fleet)), Isolation.CORE)
    assert place(request("t2", "ta", vcpus=1, isolation=Isolation.NONE), fleet).chosen is None
