"""Guest cells of their own sizes (``cell_vcpus``/``cell_memory_kib``/``cell_gpus``): each lands on a host cell
that holds it, in whatever guest order makes it fit; its GPUs come from its own host cell; moves keep the sizes;
requests whose lists disagree are refused before any host is looked at."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import EmulatorThreads, Isolation, ThreadPolicy
from vnuma.placement.request import validate_request
from vnuma.topology import KIB_PER_GIB

ISO = {"t1": Isolation.CORE}
GIB = KIB_PER_GIB


HOST = make_host(cells=2, cores_per_cell=8, smt=1, memory_gib=16, hugepages_2m_gib=0, hugepages_1g_gib=8)


def _host(**kw: object) -> Fleet:
    host = make_host(cells=2, cores_per_cell=8, smt=1, memory_gib=16, hugepages_2m_gib=0, hugepages_1g_gib=8, **kw)
    return Fleet([host], (), ISO)


def _asym(name: str, vcpus: tuple[int, ...], memory_gib: tuple[int, ...], gpus: tuple[int, ...] | None = None):
    return request(
        name, vcpus=sum(vcpus), memory_gib=sum(memory_gib), numa_nodes=len(vcpus), gpus=sum(gpus or ()),
        cell_vcpus=vcpus, cell_memory_kib=tuple(m * GIB for m in memory_gib), cell_gpus=gpus,
    )


def test_the_big_guest_cell_goes_where_the_room_is() -> None:
    fleet = _host()
    filler = place(request("filler", vcpus=5, memory_gib=1, numa_nodes=1), fleet).chosen
    assert filler is not None
    fleet.add(filler, Isolation.CORE)  # its cell keeps 3 pCPUs, the other 8
    p = place(_asym("vm", (6, 2), (6, 2)), fleet).chosen
    assert p is not None
    cells = sorted(p.cells, key=lambda c: c.guest_cell)
    assert [(len(c.vcpus), c.memory_kib // GIB) for c in cells] == [(6, 6), (2, 2)]
    assert cells[0].host_cell != filler.cells[0].host_cell  # the 6-vCPU cell took the emptier host cell
    assert [v for c in cells for v in c.vcpus] == list(range(8))
    fleet.add(p, Isolation.CORE)
    check_fleet([HOST], list(fleet.placements()), ISO)
    again = move_request(p, Isolation.CORE)
    assert (again.numa_nodes, again.cell_vcpus, again.cell_memory_kib) == (2, (6, 2), (6 * GIB, 2 * GIB))


def test_each_guest_cell_takes_its_gpus_from_its_own_host_cell() -> None:
    fleet = _host(gpus_per_cell=2)
    p = place(_asym("vm", (2, 6), (2, 6), gpus=(0, 2)), fleet).chosen
    assert p is not None
    big = next(c for c in p.cells if c.guest_cell == 1)
    assert [(d.guest_cell, d.host_cell) for d in p.devices] == [(1, big.host_cell)] * 2
    assert move_request(p, Isolation.CORE).cell_gpus == (0, 2)


def test_no_host_cell_holds_the_big_guest_cell() -> None:
    fleet = _host()
    for cell in (0, 1):
        other = frozenset({("host-a", 1 - cell)})
        filler = place(request(f"f{cell}", vcpus=3, memory_gib=1, numa_nodes=1, avoid_cells=other), fleet).chosen
        assert filler is not None and filler.host_cells == (cell,)
        fleet.add(filler, Isolation.CORE)  # 5 pCPUs left on each cell
    assert place(_asym("vm", (6, 2), (2, 2)), fleet).chosen is None
    assert place(_asym("vm", (5, 2), (2, 2)), fleet).chosen is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"numa_nodes": 3}, "one entry per guest cell"),
        ({"cell_memory_kib": (GIB,)}, "one entry per guest cell"),
        ({"vcpus": 9}, "per-cell vCPUs add up to 8, not the 9 asked for"),
        ({"cell_memory_kib": None}, "need both --cell-vcpus and --cell-memory"),
        ({"gpus": 1, "cell_gpus": (0, 0)}, "per-cell GPUs add up to 0, not the 1 asked for"),
        ({"cell_vcpus": (8, 0)}, "every guest cell needs at least 1 vCPU"),
        ({"thread_policy": ThreadPolicy.REQUIRE, "cell_vcpus": (5, 3)}, "every per-cell vCPU count must be even"),
        ({"emulator_threads": EmulatorThreads.ISOLATE}, "isolated emulator threads are not supported"),
        ({"cell_memory_kib": (GIB + 4, 3 * GIB - 4), "page_size_kib": 2048}, "not a whole number of 2 MiB pages"),
    ],
)
def test_lists_that_disagree_are_refused(change: dict[str, object], message: str) -> None:
    fleet = _host()
    req = replace(_asym("vm", (6, 2), (2, 2)), **change)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        validate_request(req, fleet)


def test_gpus_need_their_cells_said() -> None:
    fleet = _host(gpus_per_cell=1)
    req = replace(_asym("vm", (6, 2), (2, 2)), gpus=1)
    with pytest.raises(InvalidInputError, match="says which cell takes them: --cell-gpus"):
        validate_request(req, fleet)
