"""The DB-API path of ``vnuma place`` answers and claims exactly as the ORM inventory does.

Every test runs both paths on the same SQLite file (or on twin files built
the same way) and compares what they return, refuse and write.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_host
from tests.inventory.conftest import dump, placement
from tests.inventory.test_claims import GPU0, GPU1, REFUSALS
from tests.placement.helpers import request
from vnuma.errors import ConflictError, InventoryError, NotFoundError, VnumaError
from vnuma.inventory import Inventory, open_inventory, sqlite_claim
from vnuma.inventory.sqlite_direct import DirectSqlite, open_placing_inventory
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, Strategy, Tenant
from vnuma.services import Settings, placing

REQUESTS = [
    request("r1", "acme", vcpus=4, memory_gib=4),
    request("r2", "acme", vcpus=8, memory_gib=16, gpus=1),
    request("r3", "rival", vcpus=30, memory_gib=8, numa_nodes=2),
    request("r4", "acme", vcpus=None, memory_gib=None, gpus=2),
]


def _fill(inv: Inventory) -> None:
    """Hosts of two shapes (one with reserved CPUs and a URI), three tenants, VMs on three hosts."""
    for name in ("host-c", "host-a", "host-b"):
        inv.add_host(make_host(name, gpus_per_cell=2))
    inv.add_host(make_host("big-1", cells=4, cores_per_cell=4, gpus_per_cell=1, uri="qemu+ssh://big-1/system"))
    inv.reserve_cpus("host-b", frozenset({0, 16}))
    inv.add_tenant(Tenant("acme", Isolation.CORE, max_vcpus=64, max_gpus=8))
    inv.add_tenant(Tenant("rival", Isolation.CELL))
    inv.add_tenant(Tenant("lax", Isolation.NONE))
    inv.claim(placement("vm1", (2, 18), gpus=(GPU0,)), None)
    inv.claim(placement("vm2", (9, 25), tenant="rival", host_cell=1, host="host-b"), None)
    inv.claim(placement("vm3", (1,), tenant="lax", host="big-1"), None)


@pytest.fixture
def both(db_url: str) -> Iterator[tuple[Inventory, DirectSqlite]]:
    orm = open_inventory(db_url)
    _fill(orm)
    direct = open_placing_inventory(db_url)
    assert isinstance(direct, DirectSqlite)
    yield orm, direct
    direct.close()
    orm.close()


def _answers(inv: Any) -> list[Any]:
    return [
        inv.list_hosts(),
        inv.list_hosts(["host-b", "big-1", "nowhere"]),
        inv.get_host("host-b"),
        inv.get_tenant("acme"),
        inv.tenant_isolations(),
        inv.tenant_usage("acme"),
        inv.tenant_usage("nobody"),
        inv.list_vms(),
        inv.list_vms(tenant="rival"),
        inv.list_vms(host="big-1"),
        inv.get_vm("vm2"),
        inv.placements_on(None),
        inv.placements_on(["host-b"]),
    ]


def test_both_paths_read_the_same_dataclasses(both: tuple[Inventory, DirectSqlite]) -> None:
    orm, direct = both
    assert _answers(direct) == _answers(orm)


def _fleet(inv: Any) -> Fleet:
    return Fleet(inv.list_hosts(), inv.placements_on(None), inv.tenant_isolations())


@pytest.mark.parametrize("strategy", list(Strategy))
def test_both_paths_give_the_same_fleet_and_placements(
    both: tuple[Inventory, DirectSqlite], strategy: Strategy
) -> None:
    orm, direct = both
    fleets = _fleet(orm), _fleet(direct)
    for host in fleets[0].host_names():
        assert fleets[1].free_pcpus(host) == fleets[0].free_pcpus(host)
        assert fleets[1].free_gpus(host) == fleets[0].free_gpus(host)
    assert fleets[1].placements() == fleets[0].placements()
    for r in REQUESTS:
        isolated = replace(r, isolation=orm.get_tenant(r.tenant).isolation)
        assert place(isolated, fleets[1], strategy) == place(isolated, fleets[0], strategy)


def test_rows_without_a_digest_are_read_from_their_own_text(
    both: tuple[Inventory, DirectSqlite], db_path: Path
) -> None:
    orm, direct = both
    before = orm.list_hosts()
    conn = sqlite3.connect(db_path)
    with conn:
        # As a row written behind vnuma's back would be; its text must then be the one read.
        conn.execute("UPDATE hosts SET topology_digest = '' WHERE name IN ('host-a', 'big-1')")
    conn.close()
    assert direct.list_hosts() == orm.list_hosts() == before


def test_both_paths_refuse_unknown_names_alike(both: tuple[Inventory, DirectSqlite]) -> None:
    for call, arg in (("get_tenant", "nobody"), ("get_host", "nowhere"), ("get_vm", "ghost")):
        errors = []
        for inv in both:
            with pytest.raises(NotFoundError) as err:
                getattr(inv, call)(arg)
            errors.append((str(err.value), err.value.hint))
        assert errors[0] == errors[1]


# --- which path opens -------------------------------------------------------------------------


def test_a_new_file_is_created_by_the_orm_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/inventory.db"
    with open_placing_inventory(url) as inv:
        assert isinstance(inv, Inventory)
    with open_placing_inventory(url) as inv:
        assert isinstance(inv, DirectSqlite)


def test_urls_with_options_go_to_the_orm_path(db_url: str) -> None:
    open_inventory(db_url).close()
    with open_placing_inventory(db_url + "?timeout=3") as inv:
        assert isinstance(inv, Inventory)


def test_an_older_schema_is_refused_as_the_orm_path_refuses_it(db_path: Path, db_url: str) -> None:
    open_inventory(db_url).close()
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    conn.close()
    with pytest.raises(InventoryError, match="schema is at revision 0002, this vnuma needs 0003") as err:
        open_placing_inventory(db_url)
    assert err.value.hint == "run `vnuma db upgrade`"


def test_place_on_sqlite_does_not_import_sqlalchemy(db_url: str) -> None:
    inv = open_inventory(db_url)
    _fill(inv)
    inv.close()
    code = (
        "import sys; from vnuma.services import make_settings; from vnuma.services.placing import place_vm; "
        "from vnuma.placement.model import Strategy, VmRequest; "
        f"place_vm(make_settings({db_url!r}, {{}}), VmRequest('new', 'acme', 2, 1048576), Strategy.PACK, "
        "dry_run=False); print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
    with open_inventory(db_url) as check:
        assert check.get_vm("new")[0].tenant == "acme"


# --- claims ---------------------------------------------------------------------------------


@pytest.fixture
def hv(db_url: str) -> Iterator[DirectSqlite]:
    """As test_claims' ``hv`` (host-a, 2 GPUs per cell), claimed through the DB-API path."""
    with open_inventory(db_url) as orm:
        orm.add_host(make_host("host-a", gpus_per_cell=2))
    direct = open_placing_inventory(db_url)
    assert isinstance(direct, DirectSqlite)
    yield direct
    direct.close()


@pytest.mark.parametrize(("p", "error", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_refused_claim_leaves_every_table_unchanged(
    hv: DirectSqlite, db_url: str, db_path: Path, p: Placement, error: type[VnumaError], message: str
) -> None:
    with open_inventory(db_url) as orm:
        orm.reserve_cpus("host-a", frozenset({1}))
    hv.claim(placement("vm1", (2, 3), gpus=(GPU0,)), Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(error, match=re.escape(message)):
        hv.claim(p, Isolation.CORE)
    assert dump(db_path) == before


_ROWS = [
    "SELECT id, name, tenant_id, host_id, state, vcpus, gpus, placement, rendering FROM vms ORDER BY id",
    "SELECT vm_id, host_id, cpu_id, exclusive FROM cpu_claims ORDER BY id",
    "SELECT vm_id, host_id, cell_id, page_size_kib, count FROM page_claims ORDER BY id",
    "SELECT vm_id, host_id, address FROM device_claims ORDER BY id",
    "SELECT id, name, isolation, max_vcpus, max_gpus FROM tenants ORDER BY id",
    "SELECT name, host_generation FROM hosts ORDER BY id",
]


def _rows(path: Path) -> list[list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return [conn.execute(sql).fetchall() for sql in _ROWS]
    finally:
        conn.close()


def test_both_paths_write_the_same_rows(tmp_path: Path) -> None:
    claims = [
        (placement("vm1", (2, 18), memory_gib=4, gpus=(GPU0,), emulator_pcpus=(3,)), Isolation.CORE),
        (placement("vm2", (9,), tenant="lax", host_cell=1, gpus=(GPU1,)), Isolation.NONE),
        (placement("vm3", (10, 11), tenant="lax", host_cell=1), Isolation.NONE),
    ]
    paths = []
    for label in ("orm", "direct"):
        path = tmp_path / f"{label}.db"
        with open_inventory(f"sqlite:///{path}") as orm:
            orm.add_host(make_host("host-a", gpus_per_cell=2))
        with open_placing_inventory(f"sqlite:///{path}") if label == "direct" else open_inventory(
            f"sqlite:///{path}"
        ) as inv:
            assert isinstance(inv, DirectSqlite if label == "direct" else Inventory)
            for p, isolation in claims:
                inv.claim(p, isolation)
        paths.append(path)
    assert _rows(paths[1]) == _rows(paths[0])
    with open_inventory(f"sqlite:///{paths[1]}") as orm:
        assert [p for p, _ in orm.list_vms()] == [p for p, _ in claims]


def test_without_the_python_checks_the_database_still_refuses_double_booking(
    hv: DirectSqlite, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hv.claim(placement("vm1", (2, 3), gpus=(GPU0,)), Isolation.CORE)
    before = dump(db_path)
    monkeypatch.setattr(sqlite_claim, "check_claim", lambda *args: None)
    for clash in (placement("vm3", (3,)), placement("vm3", (9,), gpus=(GPU0,))):
        with pytest.raises(ConflictError, match="the inventory refused VM 'vm3'"):
            hv.claim(clash, Isolation.CORE)
        assert dump(db_path) == before


def test_quotas_and_tenants_are_checked_inside_the_claim(hv: DirectSqlite, db_url: str, db_path: Path) -> None:
    with open_inventory(db_url) as orm:
        orm.add_tenant(Tenant("q", Isolation.NONE, max_vcpus=3, max_gpus=1))
    hv.claim(placement("vm1", (0, 1), tenant="q", gpus=(GPU0,)))
    with pytest.raises(ConflictError, match="holds 2 vCPUs; VM 'vm2' would take it to 4, over its quota of 3"):
        hv.claim(placement("vm2", (2, 3), tenant="q"))
    before = dump(db_path)
    with pytest.raises(NotFoundError, match="tenant 'nobody' is not in the inventory"):
        hv.claim(placement("vm2", (2,), tenant="nobody"))
    assert dump(db_path) == before
    hv.claim(placement("vm2", (9,), tenant="new", host_cell=1), Isolation.CELL)
    assert hv.get_tenant("new") == Tenant("new", Isolation.CELL)
    assert hv.tenant_usage("q") == (2, 1)


def test_a_claim_waits_for_the_write_lock_then_reports_a_busy_inventory(db_url: str, db_path: Path) -> None:
    open_inventory(db_url).close()
    with open_placing_inventory(db_url, busy_timeout_ms=50) as direct:
        holder = sqlite3.connect(db_path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(InventoryError, match="database is locked") as err:
                direct.claim(placement("vm1", (2,)), Isolation.CORE)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert err.value.hint is not None and "another vnuma command is writing" in err.value.hint
        assert direct.list_hosts() == []  # the connection is usable again


def test_place_vm_plans_again_after_a_lost_direct_claim(
    both: tuple[Inventory, DirectSqlite], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = DirectSqlite.claim
    calls: list[Placement] = []

    def losing(self: DirectSqlite, p: Placement, isolation: Isolation | None = None) -> None:
        calls.append(p)
        if len(calls) == 1:
            # A racer takes exactly what this command chose, then this claim loses.
            real(self, replace(p, vm="racer"), isolation)
            raise ConflictError("lost")
        real(self, p, isolation)

    monkeypatch.setattr(DirectSqlite, "claim", losing)
    monkeypatch.setattr(placing, "RETRY_PAUSE_S", 0.0)
    _req, result = placing.place_vm(Settings(db_url), request("again", "acme"), Strategy.PACK, dry_run=False)
    assert len(calls) == 2 and calls[1] != calls[0]
    with open_inventory(db_url) as orm:
        assert orm.get_vm("again")[0] == result.chosen
