"""Per-cell use, locality and fragmentation, checked against the engine and the placements."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import GIB, request
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import GpuAffinity, Isolation, Placement
from vnuma.report.usage import UsageCache, cell_use, host_use, largest_vm, locality
from vnuma.topology import PAGE_1G
from vnuma.topology.devstates import TaintEffect, tainted


def _placed(fleet: Fleet, *reqs: object) -> list[Placement]:
    out = []
    for r in reqs:
        chosen = place(r, fleet).chosen  # type: ignore[arg-type]
        assert chosen is not None
        fleet.add(chosen)
        out.append(chosen)
    return out


def test_cell_use_counts_claims_reservations_and_pages() -> None:
    host = make_host(cells=2, cores_per_cell=4, smt=2, reserved_cpus=frozenset({0}), gpus_per_cell=1)
    fleet = Fleet([host])
    (vm,) = _placed(fleet, request("a", vcpus=4, memory_gib=4, gpus=1, page_size_kib=PAGE_1G))
    cells = {c.cell: c for c in cell_use(fleet, host.name)}
    used = cells[vm.host_cells[0]]
    assert used.pcpus_claimed == 4
    assert used.pcpus_claimed + used.pcpus_free + used.pcpus_reserved == used.pcpus_total == 8
    assert {p.size_kib: p.claimed for p in used.pools}[PAGE_1G] == 4
    assert used.gpus_free == 0 and used.largest_free is not None and used.largest_free.gpus == 0
    other = cells[1 - vm.host_cells[0]]
    assert other.pcpus_claimed == 0 and other.gpus_free == 1
    assert sum(c.pcpus_reserved for c in cells.values()) == 1


def test_locality_is_full_for_required_gpus_and_drops_for_off_cell_ones() -> None:
    host = make_host(cells=2, cores_per_cell=4, gpus_per_cell=1)
    fleet = Fleet([host])
    _placed(fleet, request("taker", vcpus=8, memory_gib=4, numa_nodes=1))
    (vm,) = _placed(fleet, request("b", vcpus=2, memory_gib=2, gpus=2, gpu_affinity=GpuAffinity.PREFERRED))
    loc = locality(vm, host)
    assert (loc.vcpus_local, loc.memory_local) == (1.0, 1.0)
    assert loc.devices_local == pytest.approx(0.5)
    (full,) = _placed(Fleet([host]), request("c", vcpus=2, memory_gib=2, gpus=1))
    assert locality(full, host).devices_local == 1.0
    assert locality(full, host).vcpus_local == 1.0


def test_locality_counts_vcpus_pinned_outside_their_cell() -> None:
    host = make_host(cells=2, cores_per_cell=4, smt=1)
    (vm,) = _placed(Fleet([host]), request("d", vcpus=4, memory_gib=2))
    other = [c.id for c in host.cell(1 - vm.host_cells[0]).cpus]
    cell = vm.cells[0]
    moved = replace(vm, cells=(replace(cell, pcpus=(*cell.pcpus[:2], *other[:2])),))
    assert locality(moved, host).vcpus_local == pytest.approx(0.5)


@pytest.mark.parametrize("k", [1, 2, 3], ids=["one-cell", "two-cells", "three-cells"])
def test_fragmentation_is_what_the_engine_places_and_no_more(k: int) -> None:
    host = make_host(
        cells=4, cores_per_cell=4, gpus_per_cell=1, memory_gib=16, hugepages_2m_gib=2, hugepages_1g_gib=8
    )
    fleet = Fleet([host])
    _placed(fleet, request("x", vcpus=6, memory_gib=4), request("y", vcpus=2, memory_gib=2, gpus=1))
    shape = largest_vm(fleet, host.name, k)
    assert shape is not None
    base = request(
        "probe",
        vcpus=shape.vcpus,
        memory_gib=None,
        gpus=shape.gpus,
        numa_nodes=k,
        page_size_kib=shape.page_size_kib,
    )
    fits = replace(base, memory_kib=shape.memory_kib)
    assert place(fits, fleet).chosen is not None
    bigger = [
        replace(fits, vcpus=shape.vcpus + k),
        replace(fits, memory_kib=shape.memory_kib + k * shape.page_size_kib),
        replace(fits, gpus=shape.gpus + 1),
    ]
    for req in bigger:
        if req.gpus <= 4:
            assert place(req, fleet).chosen is None, req


def test_full_host_has_no_fragment_and_empty_cells_report_none() -> None:
    host = make_host(cells=2, cores_per_cell=2, smt=1, memory_gib=4, hugepages_2m_gib=1, hugepages_1g_gib=2)
    fleet = Fleet([host])
    _placed(fleet, request("all", vcpus=4, memory_gib=2, numa_nodes=2))
    use = host_use(host, tuple(fleet.placements()), {"t1": Isolation.CORE})
    assert [s for _k, s in use.fragmentation] == [None, None]
    assert all(c.largest_free is None for c in use.cells)
    assert GIB  # the helper's unit, used above through request()


def test_cell_blocks_and_one_cell_fragment_agree_with_the_host_wide_search() -> None:
    """The one-cell row is the largest cell block, and equals the engine's search over the whole host;
    a full cell has no block (it does not claim a VM of 0 vCPUs fits)."""
    host = make_host(cells=3, cores_per_cell=4, gpus_per_cell=1, memory_gib=16, hugepages_1g_gib=8)
    fleet = Fleet([host])
    _placed(fleet, request("full", vcpus=8, memory_gib=2, numa_nodes=1), request("y", vcpus=2, memory_gib=2, gpus=1))
    use = host_use(host, tuple(fleet.placements()), {"t1": Isolation.CORE})
    blocks = {c.cell: c.largest_free for c in use.cells}
    assert sum(b is None for b in blocks.values()) == 1
    assert use.fragmentation[0] == (1, largest_vm(fleet, host.name, 1))
    for cell, block in blocks.items():
        if block is not None:
            probe = request("p", vcpus=block.vcpus, memory_gib=None, gpus=block.gpus, numa_nodes=1,
                            page_size_kib=block.page_size_kib)
            others = frozenset((host.name, c.id) for c in host.cells if c.id != cell)
            on_cell = replace(probe, memory_kib=block.memory_kib, avoid_cells=others)
            assert place(on_cell, fleet).chosen is not None
            assert place(replace(on_cell, vcpus=block.vcpus + 1), fleet).chosen is None


def test_hosts_in_the_same_state_share_their_figures_and_keep_their_names() -> None:
    a, b = make_host("a", cells=2, cores_per_cell=4), make_host("b", cells=2, cores_per_cell=4)
    fleet = Fleet([a, b])
    _placed(fleet, request("v1", vcpus=2, memory_gib=2, host="a"), request("v2", vcpus=2, memory_gib=2, host="b"))
    placements = tuple(fleet.placements())
    iso = {"t1": Isolation.CORE}
    cache = UsageCache(iso)
    for host in (a, b):
        assert cache.host_use(host, placements) == host_use(host, placements, iso)
    assert len(cache._seen) == 1


def test_hosts_alike_but_for_a_state_the_ledger_reads_do_not_share_their_figures() -> None:
    """A tainted GPU, a cordon or a reserved CPU makes two hosts of one shape and the same claims differ."""
    base = make_host("a", cells=2, cores_per_cell=4, gpus_per_cell=1)
    gpu = next(d.address for d in base.devices if d.kind == "gpu")
    states = tainted(base.device_states, gpu, "Xid 79", TaintEffect.NO_SCHEDULE, "test", "2026-12-07T00:00:00Z")
    hosts = [base, replace(base, name="b", device_states=states), replace(base, name="c", cordoned=True),
             replace(base, name="d", reserved_cpus=frozenset({0, 1})), replace(base, name="e", uri="qemu+ssh://e/system")]
    cache = UsageCache({})
    for host in hosts:
        assert cache.host_use(host, ()) == host_use(host, (), {})
    assert len(cache._seen) == 4  # the URI is not the ledger's: "e" shares "a"'s figures


@settings(max_examples=25)
@given(
    cells=st.integers(1, 4),
    smt=st.sampled_from([1, 2]),
    gpus=st.integers(0, 2),
    vms=st.lists(st.tuples(st.sampled_from([1, 2, 3, 4]), st.integers(1, 3), st.integers(0, 1)), max_size=6),
)
def test_one_cell_fragment_is_the_host_wide_search_on_random_hosts(
    cells: int, smt: int, gpus: int, vms: list[tuple[int, int, int]]
) -> None:
    host = make_host(cells=cells, cores_per_cell=3, smt=smt, gpus_per_cell=gpus, memory_gib=8, hugepages_1g_gib=4)
    fleet = Fleet([host])
    for i, (vcpus, memory, want_gpus) in enumerate(vms):
        chosen = place(request(f"v{i}", vcpus=vcpus, memory_gib=memory, gpus=min(want_gpus, gpus)), fleet).chosen
        if chosen is not None:
            fleet.add(chosen)
    use = host_use(host, tuple(fleet.placements()), {"t1": Isolation.CORE})
    assert use.fragmentation[0] == (1, largest_vm(fleet, host.name, 1))
    assert all(s is None or s.vcpus >= 1 for _k, s in use.fragmentation)
