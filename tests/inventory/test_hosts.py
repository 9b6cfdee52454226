"""Hosts in the inventory: exact round trips, summaries, refresh, reserve, remove."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from sqlalchemy import select, update

from tests.builders import kept, make_host
from tests.dbdump import dump
from tests.inventory.conftest import placement
from tests.inventory.strategies import hosts
from vnuma.codec import host_summary
from vnuma.errors import ConflictError, InvalidInputError, InventoryError, NotFoundError
from vnuma.inventory import Inventory, open_inventory
from vnuma.inventory.models import HostRow
from vnuma.placement.model import CellAssignment, Isolation, Placement
from vnuma.topology import PAGE_4K, Host, Source


@pytest.fixture(scope="module")
def shared_inv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inventory]:
    inventory = open_inventory(f"sqlite:///{tmp_path_factory.mktemp('hosts')}/inventory.db")
    yield inventory
    inventory.close()


@settings(max_examples=60)
@given(host=hosts())
def test_host_round_trips_through_the_database(shared_inv: Inventory, host: Host) -> None:
    shared_inv.add_host(host)
    try:
        assert shared_inv.get_host(host.name) == host
        assert [h for h in shared_inv.list_hosts() if h.name == host.name] == [host]
        assert [s for s in shared_inv.host_summaries() if s["name"] == host.name] == [host_summary(host)]
    finally:
        shared_inv.remove_host(host.name)
    with pytest.raises(NotFoundError):
        shared_inv.get_host(host.name)


def test_list_hosts_is_sorted_and_summaries_match(inv: Inventory) -> None:
    added = [make_host("b", gpus_per_cell=1), make_host("a", cells=4), make_host("c", uri="qemu:///system")]
    for host in added:
        inv.add_host(host)
    assert inv.list_hosts() == sorted(added, key=lambda h: h.name)
    assert inv.host_summaries() == [host_summary(h) for h in sorted(added, key=lambda h: h.name)]


def test_adding_a_host_twice_is_a_conflict(inv: Inventory) -> None:
    inv.add_host(make_host("hv1"))
    with pytest.raises(ConflictError) as err:
        inv.add_host(make_host("hv1", cells=4))
    assert err.value.hint is not None and "vnuma host refresh hv1" in err.value.hint
    assert inv.get_host("hv1") == make_host("hv1")


def test_an_inconsistent_host_is_refused(inv: Inventory) -> None:
    host = make_host("hv1", gpus_per_cell=1)
    bad = replace(host, devices=(replace(host.devices[0], numa_node=7),))
    with pytest.raises(InvalidInputError, match="missing NUMA cell 7"):
        inv.add_host(bad)
    assert inv.list_hosts() == []


def test_unknown_hosts_are_not_found(inv: Inventory) -> None:
    for action in (inv.get_host, inv.remove_host, lambda n: inv.reserve_cpus(n, frozenset()), inv.topology_override):
        with pytest.raises(NotFoundError) as err:
            action("ghost")
        assert err.value.hint == "see `vnuma host list`"
    with pytest.raises(NotFoundError):
        inv.replace_host(make_host("ghost"))


def test_the_topology_override_is_recorded_by_add_and_by_refresh(inv: Inventory) -> None:
    inv.add_host(make_host("lab", uri="test:///default"), "demo")
    inv.add_host(make_host("plain", uri="test:///default"))
    assert (inv.topology_override("lab"), inv.topology_override("plain")) == ("demo", None)
    assert inv.topology_overrides() == {"lab": "demo"}
    generation = inv.host_generation("plain")
    inv.replace_host(make_host("plain", uri="test:///default"), "/srv/caps/plain.xml")
    inv.replace_host(make_host("lab", uri="test:///default"))  # read from libvirt: no override any more
    assert inv.topology_overrides() == {"plain": "/srv/caps/plain.xml"}
    assert inv.host_generation("plain") == generation + 1
    assert inv.get_host("plain") == make_host("plain", uri="test:///default")


def test_reserve_sets_and_clears_the_reservation(inv: Inventory) -> None:
    inv.add_host(make_host("hv1"))
    inv.reserve_cpus("hv1", frozenset({0, 16}))
    assert inv.get_host("hv1").reserved_cpus == {0, 16}
    inv.reserve_cpus("hv1", frozenset({1}))
    assert inv.get_host("hv1").reserved_cpus == {1}
    inv.reserve_cpus("hv1", frozenset())
    assert inv.get_host("hv1") == make_host("hv1")


def test_reserving_cpus_the_host_lacks_is_invalid(inv: Inventory) -> None:
    inv.add_host(make_host("hv1"))
    with pytest.raises(InvalidInputError, match=re.escape("host 'hv1' has no CPU(s) 32,40-41")):
        inv.reserve_cpus("hv1", frozenset({0, 32, 40, 41}))
    assert inv.get_host("hv1").reserved_cpus == frozenset()


def test_reserving_a_claimed_cpu_is_a_conflict(inv: Inventory, db_path: Path) -> None:
    inv.add_host(make_host("host-a"))
    inv.claim(placement("vm1", (2, 3)), Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(ConflictError, match=r"CPU\(s\) 3 are claimed by VM\(s\) vm1"):
        inv.reserve_cpus("host-a", frozenset({3, 4}))
    assert dump(db_path) == before


def test_refresh_replaces_the_topology_and_keeps_the_reservation(inv: Inventory) -> None:
    inv.add_host(make_host("hv1", uri="qemu:///system"))
    inv.reserve_cpus("hv1", frozenset({0}))
    bigger = make_host("hv1", cells=4, gpus_per_cell=1, uri="qemu+ssh://hv1/system")
    inv.replace_host(bigger)
    assert inv.get_host("hv1") == replace(bigger, reserved_cpus=frozenset({0}))
    assert inv.host_summaries()[0]["cells"] == 4


def test_refresh_must_keep_reserved_cpus(inv: Inventory) -> None:
    inv.add_host(make_host("hv1", cells=2))
    inv.reserve_cpus("hv1", frozenset({31}))
    with pytest.raises(ConflictError, match=re.escape("lacks reserved CPU(s) 31")):
        inv.replace_host(make_host("hv1", cells=1))


REFRESH_REFUSALS = [
    ("lost-cpu", make_host("host-a", cells=1, cores_per_cell=2), r"lacks CPU\(s\) 4-5 claimed by VM\(s\) vm"),
    (
        "lost-device",
        make_host("host-a", gpus_per_cell=0),
        r"lacks claimed device\(s\) 0000:10:00.0 \(VM vm1\)",
    ),
    (
        "fewer-pages",
        make_host("host-a", gpus_per_cell=1, hugepages_1g_gib=2),
        r"has 2 pages of 1048576 KiB on cell 0",
    ),
]


@pytest.mark.parametrize(
    ("new", "message"), [r[1:] for r in REFRESH_REFUSALS], ids=[r[0] for r in REFRESH_REFUSALS]
)
def test_refresh_that_drops_claimed_resources_is_refused(
    inv: Inventory, db_path: Path, new: Host, message: str
) -> None:
    inv.add_host(make_host("host-a", gpus_per_cell=1))
    inv.claim(placement("vm1", (4, 5), memory_gib=3, gpus=("0000:10:00.0",)), Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(ConflictError, match=message):
        inv.replace_host(new)
    assert dump(db_path) == before


def test_refresh_that_drops_a_claimed_cell_is_refused(inv: Inventory, db_path: Path) -> None:
    inv.add_host(make_host("host-a", cells=1, memory_only_cells=1))
    cpu_cell = CellAssignment(0, 0, (0,), (0,), 1024 * 1024, PAGE_4K)
    inv.claim(kept(Placement("vm1", "acme", "host-a", (cpu_cell,))), Isolation.CORE)
    # Pages on a memory-only cell, as an older vnuma could record them (admission never
    # makes one a guest cell): the CPU check cannot catch a refresh that drops the cell.
    with sqlite3.connect(db_path) as db:
        db.execute(
            "INSERT INTO page_claims (vm_id, host_id, cell_id, page_size_kib, count) "
            "SELECT id, host_id, 1, 4, 2048 FROM vms WHERE name = 'vm1'"
        )
    with pytest.raises(ConflictError, match="lacks NUMA cell 1"):
        inv.replace_host(make_host("host-a", cells=1))


def test_removing_a_host_with_vms_is_a_conflict(inv: Inventory) -> None:
    inv.add_host(make_host("host-a"))
    inv.claim(placement("vm1", (2,)), Isolation.CORE)
    with pytest.raises(ConflictError, match=re.escape("host 'host-a' still has 1 VM(s): vm1")):
        inv.remove_host("host-a")
    inv.release("vm1")
    inv.remove_host("host-a")
    assert inv.list_hosts() == []


def test_generation_counts_every_change(inv: Inventory) -> None:
    inv.add_host(make_host("host-a"))
    assert inv.host_generation("host-a") == 0
    inv.claim(placement("vm1", (2,)), Isolation.CORE)
    inv.reserve_cpus("host-a", frozenset({0}))
    inv.release("vm1")
    inv.replace_host(make_host("host-a"))
    assert inv.host_generation("host-a") == 4
    with pytest.raises(ConflictError):
        inv.claim(placement("vm2", (0,)), Isolation.CORE)
    assert inv.host_generation("host-a") == 4


def test_hosts_of_one_shape_share_the_stored_text_but_keep_their_own_fields(inv: Inventory) -> None:
    a = make_host("a", uri="qemu+ssh://a/system", reserved_cpus=frozenset({0, 16}))
    b = replace(make_host("b"), source=Source.HWLOC)
    inv.add_host(a)
    inv.add_host(b)
    with inv._session() as s:
        texts = s.scalars(select(HostRow.topology).order_by(HostRow.name)).all()
    assert texts[0] == texts[1] and '"name"' not in texts[0]
    assert inv.list_hosts() == [a, b]


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("topology", "{not json", "Expecting property name"),
        ("topology", "[]", "not a JSON object"),
        ("topology", '{"cells": [{"id": 0}]}', "cells[0]: missing key 'memory_kib'"),
        ("reserved_cpuset", "0-3,999", "reserved CPU(s) 999 do not exist"),
        ("source", "carrier-pigeon", "'carrier-pigeon' is not a valid Source"),
    ],
    ids=["bad-json", "not-an-object", "missing-key", "stray-reserved", "bad-source"],
)
def test_a_corrupt_row_is_an_inventory_error(inv: Inventory, column: str, value: str, problem: str) -> None:
    inv.add_host(make_host("hv1"))
    with inv._session(write=True) as s:
        s.execute(update(HostRow).values({column: value}))
    for load in (lambda: inv.get_host("hv1"), inv.list_hosts):
        with pytest.raises(InventoryError, match=re.escape(problem)) as err:
            load()
        assert "stored topology of host 'hv1' is unreadable" in str(err.value)
        assert err.value.hint == "re-discover it with `vnuma host refresh hv1`"
