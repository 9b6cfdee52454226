"""The same schema and claim guarantees on SQLite and PostgreSQL, including racing claims.

PostgreSQL cases need a server: ``VNUMA_TEST_PG`` is a SQLAlchemy URL of a
database the tests may create and drop other databases from (marker ``postgres``).
"""

from __future__ import annotations

import threading

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import select

from tests.builders import make_host
from tests.inventory.conftest import placement
from vnuma.errors import ConflictError
from vnuma.inventory import head_revision, make_engine, open_inventory, upgrade
from vnuma.inventory.claimtables import CpuClaim
from vnuma.inventory.db import alembic_config, current_revision, writer
from vnuma.inventory.models import VmRow
from vnuma.inventory.tables import Base
from vnuma.placement.model import Isolation, Tenant


def test_migrations_round_trip_without_drift(url: str) -> None:
    upgrade(url)
    assert current_revision(url) == head_revision()
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert (
                compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
                == []
            )
        with writer(engine).begin() as conn:
            command.downgrade(alembic_config(conn), "base")
    finally:
        engine.dispose()
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == head_revision()


def test_the_partial_unique_index_refuses_two_pinned_claims(url: str) -> None:
    upgrade(url)  # a PostgreSQL database is never created implicitly
    with open_inventory(url) as inv:
        inv.add_host(make_host("host-a"))
        inv.claim(placement("vm1", (2,)), Isolation.CORE)
        inv.claim(placement("vm2", (3,)), Isolation.CORE)
        with inv._session() as s:
            vm2, host = s.execute(select(VmRow.id, VmRow.host_id).where(VmRow.name == "vm2")).one()
        with inv._session(write=True) as s:
            s.add(CpuClaim(vm_id=vm2, host_id=host, cpu_id=8, exclusive=False))
        with pytest.raises(ConflictError), inv._session(write=True) as s:
            s.add(CpuClaim(vm_id=vm2, host_id=host, cpu_id=2, exclusive=True))


def test_racing_claims_for_one_cpu_have_exactly_one_winner(url: str) -> None:
    upgrade(url)  # a PostgreSQL database is never created implicitly
    with open_inventory(url) as inv:
        inv.add_host(make_host("host-a"))
        inv.add_tenant(Tenant("acme"))
    racers = 6
    start = threading.Barrier(racers)
    outcomes: list[str] = []

    def race(i: int) -> None:
        with open_inventory(url) as mine:
            start.wait()
            try:
                mine.claim(placement(f"vm{i}", (4, 20 + i % 4)), Isolation.CORE)
                outcomes.append("won")
            except ConflictError:
                outcomes.append("refused")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * (racers - 1) + ["won"]
    with open_inventory(url) as inv:
        assert len(inv.list_vms()) == 1
