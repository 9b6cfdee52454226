"""Memory modes: each guest cell's mode is chosen at place, kept by every move, and an interleaved
cell's pages are claimed on every host cell of the VM (the engine and admission count them alike)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.claim import page_needs, pages_by_cell
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import EmulatorThreads, Isolation, MemoryMode, ThreadPolicy
from vnuma.placement.request import validate_request
from vnuma.topology import PAGE_2M

STRICT, INTERLEAVE, PREFERRED, RESTRICTIVE = (
    MemoryMode.STRICT, MemoryMode.INTERLEAVE, MemoryMode.PREFERRED, MemoryMode.RESTRICTIVE
)
ISO = {"t1": Isolation.CORE}


@given(pages=st.integers(0, 10_000), k=st.integers(2, 8))
def test_equal_interleaved_cells_take_what_strict_cells_take(pages: int, k: int) -> None:
    strict = pages_by_cell([(c, PAGE_2M, pages, STRICT) for c in range(k)])
    interleaved = pages_by_cell([(c, PAGE_2M, pages, INTERLEAVE) for c in range(k)])
    assert interleaved == strict


@given(sizes=st.lists(st.integers(0, 1000), min_size=2, max_size=5), data=st.data())
def test_interleaved_pages_spread_within_one_page_and_add_up(sizes: list[int], data: st.DataObject) -> None:
    modes = [data.draw(st.sampled_from([STRICT, PREFERRED, INTERLEAVE])) for _ in sizes]
    needs = pages_by_cell([(c, PAGE_2M, n, m) for c, (n, m) in enumerate(zip(sizes, modes, strict=True))])
    assert sum(needs.values()) == sum(sizes)
    dealt = sum(n for n, m in zip(sizes, modes, strict=True) if m is INTERLEAVE)
    share = [needs.get((c, PAGE_2M), 0) - (n if m is not INTERLEAVE else 0)
             for c, (n, m) in enumerate(zip(sizes, modes, strict=True))]
    assert max(share) - min(share) <= 1 and sum(share) == dealt


def test_a_strict_and_an_interleaved_cell_load_the_strict_ones_host_cell_more() -> None:
    host = make_host(cells=2, cores_per_cell=4, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=0)
    fleet = Fleet([host], (), ISO)
    req = request("vm", vcpus=4, memory_gib=2, numa_nodes=2, page_size_kib=PAGE_2M,
                  memory_modes=(STRICT, INTERLEAVE))
    p = place(req, fleet).chosen
    assert p is not None
    assert p.memory_modes == (STRICT, INTERLEAVE)
    first, second = (c.host_cell for c in sorted(p.cells, key=lambda c: c.guest_cell))
    assert page_needs(p) == {(first, PAGE_2M): 768, (second, PAGE_2M): 256}
    fleet.add(p, Isolation.CORE)
    check_fleet([host], list(fleet.placements()), ISO)
    free = {c.id: c.pages_free[PAGE_2M] for c in fleet.state(host.name).cells}
    assert free == {first: 1024 - 768, second: 1024 - 256}


def test_the_engine_never_promises_pages_an_interleaved_mix_cannot_take() -> None:
    """Each cell has a guest cell's pages, but not the strict cell's share of the interleaved one too."""
    host = make_host(cells=2, cores_per_cell=4, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=0)
    fleet = Fleet([host], (), ISO)
    filler = place(request("filler", vcpus=1, memory_gib=1, numa_nodes=1, page_size_kib=PAGE_2M), fleet).chosen
    assert filler is not None
    fleet.add(filler, Isolation.CORE)  # one cell keeps 512 pages, the other 1024
    mix = request("mix", vcpus=2, memory_gib=2, numa_nodes=2, page_size_kib=PAGE_2M,
                  memory_modes=(STRICT, INTERLEAVE))
    p = place(mix, fleet).chosen
    assert p is not None  # the strict cell goes where 768 pages are free
    strict_cell = next(c.host_cell for c in p.cells if c.memory_mode is STRICT)
    assert strict_cell != filler.cells[0].host_cell
    assert fleet.admit(p, Isolation.CORE) is None
    fleet.add(p, Isolation.CORE)
    check_fleet([host], list(fleet.placements()), ISO)
    again = place(replace(mix, name="mix2"), fleet)
    assert again.chosen is None  # 256 + 768 pages left: no cell has 768 of its own any more


@pytest.mark.parametrize(
    ("modes", "nodes", "message"),
    [
        ((STRICT, INTERLEAVE), None, "2 per-cell memory modes need as many guest cells"),
        ((STRICT, INTERLEAVE, STRICT), 2, "3 per-cell memory modes need as many guest cells"),
        ((RESTRICTIVE, STRICT), 2, "restrictive applies to every guest cell or to none"),
        ((), 1, "needs a memory mode"),
    ],
)
def test_bad_memory_modes_are_refused_before_any_host(
    modes: tuple[MemoryMode, ...], nodes: int | None, message: str
) -> None:
    fleet = Fleet([make_host()], (), ISO)
    with pytest.raises(InvalidInputError, match=message):
        validate_request(request("vm", vcpus=4, memory_gib=2, numa_nodes=nodes, memory_modes=modes), fleet)


def test_a_move_keeps_each_cells_mode() -> None:
    host = make_host(cells=2, cores_per_cell=4, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=0)
    fleet = Fleet([host], (), ISO)
    p = place(request("vm", vcpus=4, memory_gib=2, numa_nodes=2, memory_modes=(PREFERRED, INTERLEAVE)), fleet)
    assert p.chosen is not None
    again = move_request(p.chosen, Isolation.CORE)
    assert (again.numa_nodes, again.memory_modes) == (2, (PREFERRED, INTERLEAVE))
    auto = place(request("auto", vcpus=2, memory_gib=1, memory_modes=(INTERLEAVE,)), fleet).chosen
    assert auto is not None and move_request(auto, Isolation.CORE).memory_modes == (INTERLEAVE,)


def test_a_reordered_interleaved_mix_keeps_the_isolated_emulator_on_its_anchor_cell() -> None:
    """Found by the property tests: the guest order that makes the pages fit must still put guest cell 0
    (where the isolated emulator pCPU goes) on a cell with room for it."""
    host = make_host(cells=2, cores_per_cell=3, smt=1, memory_gib=4, hugepages_2m_gib=0, hugepages_1g_gib=1,
                     reserved_cpus=frozenset({0}))
    fleet = Fleet([host], (), ISO)
    req = request("vm", vcpus=4, memory_gib=2, numa_nodes=2, thread_policy=ThreadPolicy.ISOLATE,
                  emulator_threads=EmulatorThreads.ISOLATE, memory_modes=(INTERLEAVE, STRICT))
    p = place(req, fleet).chosen  # no IndexError while picking the emulator pCPU
    if p is not None:
        assert fleet.admit(p, Isolation.CORE) is None
        assert set(p.emulator_pcpus) <= {c.id for c in host.cell(p.cells[0].host_cell).cpus}
