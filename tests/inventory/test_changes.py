"""A warm ledger's read returns the hosts changed since its watermark, on both backends, whatever order the
changes commit in.

The PostgreSQL test holds one writer's transaction open while a second
writer commits and the ledger reads: the open writer's change has the
smaller transaction id and commits last, which a commit-ordered counter read
as "everything below the newest mark seen" would lose for good.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import pytest
from sqlalchemy import text

from tests.builders import make_host
from tests.inventory.conftest import placement
from vnuma.inventory import open_inventory, upgrade
from vnuma.inventory.changes import bump
from vnuma.inventory.db import make_engine
from vnuma.inventory.executor import AlchemyExecutor
from vnuma.inventory.placer import Placer, open_placer
from vnuma.inventory.warm import Mark, Watermark
from vnuma.placement.model import Isolation, Tenant
from vnuma.services.warm import WarmFleet

HOSTS = ("host-a", "host-b", "host-c", "host-d")


def _filled(url: str) -> str:
    upgrade(url)
    with open_inventory(url) as inv:
        for name in HOSTS:
            inv.add_host(make_host(name))
        inv.add_tenant(Tenant("acme", Isolation.CORE))
    return url


@pytest.fixture
def fleet(url: str) -> str:
    return _filled(url)


@pytest.fixture
def placer(fleet: str) -> Iterator[Placer]:
    with open_placer(fleet) as p:
        yield p


def _moved(got_marks: dict[str, Mark], known: dict[str, Mark]) -> set[str]:
    return {name for name, mark in got_marks.items() if known.get(name) != mark}


def test_a_read_returns_the_hosts_changed_since_its_watermark(fleet: str, placer: Placer) -> None:
    since, known, *_ = placer.warm_snapshot()
    with open_inventory(fleet) as inv:
        inv.claim(placement("vm1", (2,), host="host-b"), None)
        inv.set_cordoned("host-d", True)
    got = placer.changes(known, since)
    assert _moved(got.marks, known) == {"host-b", "host-d"}
    assert set(got.placements) == {"host-b", "host-d"}
    assert [p.vm for p in got.placements["host-b"]] == ["vm1"]
    if fleet.startswith("sqlite"):
        # The one writer at a time makes SQLite's marks a counter: exactly the changed hosts come back.
        assert set(got.marks) == {"host-b", "host-d"}
    known = {**known, **got.marks}
    again = placer.changes(known, got.watermark)
    assert _moved(again.marks, known) == set() and again.placements == {}
    assert again.watermark.removed == since.removed


def test_a_removed_host_is_counted_and_the_ledger_reads_everything_again(fleet: str, placer: Placer) -> None:
    warm = WarmFleet()
    with warm.viewing(placer, attempt=0) as (kept, _):
        assert set(kept.host_names()) == set(HOSTS)
    with open_inventory(fleet) as inv:
        inv.remove_host("host-c")
    with warm.viewing(placer, attempt=0) as (kept, _):
        assert set(kept.host_names()) == set(HOSTS) - {"host-c"}
    assert warm.full_reads == 2
    with open_inventory(fleet) as inv:
        inv.claim(placement("vm1", (2,), host="host-a"), None)
    with warm.viewing(placer, attempt=0) as (kept, _):
        assert kept.placement("vm1") is not None
    assert (warm.full_reads, warm.host_reads) == (2, 1)


@pytest.mark.postgres
def test_a_change_that_commits_after_a_newer_one_is_still_read(pg_url: str) -> None:
    _filled(pg_url)
    engine = make_engine(pg_url)
    try:
        with open_placer(pg_url) as placer:
            since, known, *_ = placer.warm_snapshot()
            with engine.connect() as slow:
                x = AlchemyExecutor(slow)
                host_a = x.one("SELECT id FROM hosts WHERE name = 'host-a'")
                assert host_a is not None
                x.run(bump(x), {"host": host_a[0]})  # the older transaction: its id is taken now
                with open_inventory(pg_url) as inv:
                    inv.claim(placement("vm1", (2,), host="host-b"), None)  # the newer one commits first
                first = placer.changes(known, since)
                assert _moved(first.marks, known) == {"host-b"}
                known = {**known, **first.marks}
                slow.commit()
            second = placer.changes(known, first.watermark)
            assert _moved(second.marks, known) == {"host-a"}
            assert second.marks["host-a"][1] == known["host-a"][1] + 1
    finally:
        engine.dispose()


def test_a_watermark_from_nothing_reads_every_host(placer: Placer) -> None:
    got = placer.changes({}, Watermark(0, 0))
    assert set(got.marks) == set(HOSTS)
    assert set(got.placements) == set(HOSTS)


def test_the_change_statements_mark_their_host_and_a_new_host_comes_after(fleet: str) -> None:
    before = _marks(fleet)
    with open_inventory(fleet) as inv:
        inv.reserve_cpus("host-a", frozenset({0}))
        inv.add_host(make_host("host-e"))
    after = _marks(fleet)
    assert {h for h in HOSTS if after[h] != before[h]} == {"host-a"}
    assert min(after["host-a"], after["host-e"]) > max(before.values())


def _marks(url: str) -> dict[str, int]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {str(r[0]): int(r[1]) for r in conn.execute(text("SELECT name, change_mark FROM hosts"))}
    finally:
        engine.dispose()


def test_every_change_to_the_tenants_or_the_mig_geometries_is_counted_whoever_writes_it(
    fleet: str, placer: Placer
) -> None:
    def catalog() -> int:
        return placer.changes({}, Watermark(0, 0)).watermark.catalog

    seen = [catalog()]
    with open_inventory(fleet) as inv:
        inv.claim(placement("vm1", (2,), host="host-a"), None)  # a claim is a host's change, not the catalog's
        seen.append(catalog())
        inv.add_tenant(Tenant("other", Isolation.NONE))
        seen.append(catalog())
        inv.update_tenant(Tenant("other", Isolation.NONE, max_vcpus=8))
        seen.append(catalog())
        inv.remove_tenant("other")
        seen.append(catalog())
    engine = make_engine(fleet)
    try:
        with engine.begin() as conn:  # behind vnuma's back: the triggers count it all the same
            conn.execute(text("INSERT INTO gpu_profiles (model, pci_ids, document, imported_at) "
                              "VALUES ('m', '', '{}', 'now')"))
        seen.append(catalog())
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM gpu_profiles"))
        seen.append(catalog())
    finally:
        engine.dispose()
    assert seen[1] == seen[0]
    assert all(later > earlier for earlier, later in pairwise(seen[1:]))
