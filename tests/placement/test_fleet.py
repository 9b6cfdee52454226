"""Fleet bookkeeping: adding and removing placements, conflicts, what a VM holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.placement.helpers import held_by, request
from vnuma.errors import ConflictError, NotFoundError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CellAssignment, Isolation, Placement, ThreadPolicy
from vnuma.topology import PAGE_1G


def _placed(fleet: Fleet, **kw: object) -> Placement:
    chosen = place(request(**kw), fleet).chosen  # type: ignore[arg-type]
    assert chosen is not None
    return chosen


def test_hosts_are_kept_in_name_order_whatever_the_input_order() -> None:
    fleet = Fleet([make_host("c"), make_host("a"), make_host("b")])
    assert fleet.host_names() == ("a", "b", "c")


def test_duplicate_host_names_are_refused() -> None:
    with pytest.raises(ConflictError):
        Fleet([make_host("a"), make_host("a")])


def test_add_then_remove_restores_free_state() -> None:
    fleet = Fleet([make_host("a", gpus_per_cell=1)])
    before = (fleet.free_pcpus("a"), fleet.free_pages("a", 0, PAGE_1G), fleet.free_gpus("a"))
    p = _placed(fleet, vcpus=4, gpus=1)
    fleet.add(p)
    assert fleet.free_pcpus("a") == before[0] - held_by(p, fleet.host("a"))
    assert len(fleet.free_gpus("a")) == len(before[2]) - 1
    assert fleet.remove(p.vm) == p
    assert (fleet.free_pcpus("a"), fleet.free_pages("a", 0, PAGE_1G), fleet.free_gpus("a")) == before


def test_adding_the_same_vm_twice_is_a_conflict() -> None:
    fleet = Fleet([make_host("a")])
    p = _placed(fleet)
    fleet.add(p)
    with pytest.raises(ConflictError, match="already placed"):
        fleet.add(p)


def test_two_vms_claiming_one_pcpu_conflict_and_change_nothing() -> None:
    fleet = Fleet([make_host("a")])
    p = _placed(fleet, name="one")
    fleet.add(p)
    free = fleet.free_pcpus("a")
    with pytest.raises(ConflictError, match="already held by VM 'one'"):
        fleet.add(replace(p, vm="two"))
    assert fleet.free_pcpus("a") == free
    assert fleet.placement("two") is None


def test_overdrawn_page_pool_is_a_conflict() -> None:
    fleet = Fleet([make_host("a", hugepages_1g_gib=2)])
    cell = CellAssignment(0, 0, (0,), (0,), 4 * PAGE_1G, PAGE_1G)
    with pytest.raises(ConflictError, match="free"):
        fleet.add(Placement("big", "t1", "a", (cell,)))


def test_unknown_host_vm_and_pcpu() -> None:
    fleet = Fleet([make_host("a")])
    cell = CellAssignment(0, 0, (0,), (999,), PAGE_1G, PAGE_1G)
    with pytest.raises(NotFoundError):
        fleet.add(Placement("x", "t1", "nowhere", (cell,)))
    with pytest.raises(ConflictError, match="has no CPU"):
        fleet.add(Placement("x", "t1", "a", (cell,)))
    with pytest.raises(NotFoundError):
        fleet.remove("ghost")


def test_isolate_holds_the_siblings_too() -> None:
    host = make_host("a", cells=1, cores_per_cell=4, smt=2)
    fleet = Fleet([host])
    p = _placed(fleet, vcpus=2, thread_policy=ThreadPolicy.ISOLATE)
    held = held_by(p, host)
    assert len(held) == 4
    fleet.add(p)
    assert fleet.free_pcpus("a") == host.cpu_ids - held


def test_fleet_built_from_placements_equals_fleet_built_by_adding() -> None:
    hosts = [make_host("a"), make_host("b")]
    grown = Fleet(hosts)
    for i in range(5):
        grown.add(_placed(grown, name=f"vm{i}", tenant=f"t{i % 2}", vcpus=2 + i))
    rebuilt = Fleet(list(reversed(hosts)), grown.placements(), {"t0": Isolation.CORE, "t1": Isolation.CORE})
    for name in ("a", "b"):
        assert rebuilt.free_pcpus(name) == grown.free_pcpus(name)
        assert rebuilt.free_pages(name, 0, PAGE_1G) == grown.free_pages(name, 0, PAGE_1G)


def test_reserved_cpus_are_never_free() -> None:
    host = make_host("a", cells=1, cores_per_cell=2, smt=2, reserved_cpus=frozenset({0, 2}))
    assert Fleet([host]).free_pcpus("a") == frozenset({1, 3})
