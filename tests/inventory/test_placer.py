"""The placing path: one snapshot, one claim, the same queries on both executors, real inputs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.builders import make_host
from tests.dbdump import dump
from tests.inventory.conftest import placement
from vnuma.errors import ConflictError, InventoryError
from vnuma.inventory import Inventory, access, open_inventory, upgrade
from vnuma.inventory.db import make_engine
from vnuma.inventory.embedded import KeptDomain
from vnuma.inventory.placer import open_placer
from vnuma.inventory.schema import SCHEMA_REVISION
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.sources.hwloc import parse_hwloc
from vnuma.topology import KIB_PER_GIB, PAGE_4K

GPU0 = "0000:10:00.0"
UPSTREAM = Path(__file__).parents[1] / "data" / "hwloc" / "upstream"


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
def filled(db_url: str) -> str:
    with open_inventory(db_url) as inv:
        _fill(inv)
    return db_url


class _Traced:
    """Every statement the sqlite3 connections of the placing path run."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self._connect = sqlite3.connect

    def connect(self, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = self._connect(*args, **kwargs)
        conn.set_trace_callback(self.statements.append)
        return conn


def test_a_place_reads_one_snapshot_and_claims_once(filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    traced = _Traced()
    monkeypatch.setattr(access.sqlite3, "connect", traced.connect)
    request = VmRequest("", "acme", vcpus=None, memory_kib=None, gpus=2)
    _request, result = place_vm(Settings(filled), request, Strategy.PACK, dry_run=False)
    assert result.chosen is not None
    begins = [s for s in traced.statements if s.startswith("BEGIN")]
    assert begins == ["BEGIN", "BEGIN IMMEDIATE"], traced.statements
    work = [s for s in traced.statements if not s.startswith(("BEGIN", "COMMIT", "PRAGMA", "SELECT version_num"))]
    # One call inserts all of a claim table's rows (the trace shows each row).
    calls = [s for i, s in enumerate(work) if i == 0 or s.split(" VALUES")[0] != work[i - 1].split(" VALUES")[0]]
    # snapshot: hosts, topologies of rows without a digest, every VM's host, tenants, the kept MIG geometries,
    # the claimed hosts' kept figures, one topology per distinct shape (2), the placements of the VMs on the
    # hosts read (services/placing.Cold, inventory/narrowed.py); claim: host, VM name, tenant, MIG geometries, the
    # host's mark, the host's VMs, the tenant elsewhere, the VM row, its cpu, page and device rows, the host
    # generation, the host's kept figures, its audit log row (the geometries and the mark are batched with the
    # queries beside them: no round trip more).
    assert len(calls) == 9 + 14, calls
    assert sum("FROM gpu_profiles" in c for c in calls) == 2, calls
    assert calls[-1].startswith("INSERT INTO audit_log"), calls
    with open_inventory(filled) as inv:
        assert inv.get_vm(result.chosen.vm)[0] == result.chosen


def test_place_on_sqlite_does_not_import_sqlalchemy(filled: str) -> None:
    code = (
        "import sys; from vnuma.services import make_settings; from vnuma.services.placing import place_vm; "
        "from vnuma.placement.model import VmRequest; from vnuma.placement.objectives import Strategy; "
        f"place_vm(make_settings({filled!r}, {{}}), VmRequest('new', 'acme', 2, 1048576), Strategy.PACK, "
        "dry_run=False); print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
    with open_inventory(filled) as check:
        assert check.get_vm("new")[0].tenant == "acme"


@pytest.mark.parametrize("options", ["", "?timeout=5"], ids=["sqlite3", "sqlalchemy"])
def test_both_executors_read_and_claim_alike(filled: str, db_path: Path, options: str) -> None:
    with open_inventory(filled) as inv:
        expected = inv.snapshot()
    with open_placer(filled + options) as p:
        assert p.snapshot() == expected
        before = dump(db_path)
        with pytest.raises(ConflictError, match=r"pCPU\(s\) 2,18 are already held by VM 'vm1'"):
            p.claim(placement("clash", (2, 18)))
        assert dump(db_path) == before
        p.claim(placement("vm4", (3, 19)))
    with open_inventory(filled) as inv:
        assert [v.vm for v in inv.placements_on(["host-a"])] == ["vm1", "vm4"]


def test_rows_without_a_digest_are_read_from_their_own_text(filled: str, db_path: Path) -> None:
    with open_placer(filled) as p:
        before = p.snapshot().hosts
    with sqlite3.connect(db_path) as conn:
        # As a row written behind vnuma's back would be; its text must then be the one read.
        conn.execute("UPDATE hosts SET topology_digest = '' WHERE name IN ('host-a', 'big-1')")
    with open_placer(filled) as p:
        assert p.snapshot().hosts == before


def test_an_older_schema_is_refused_as_every_command_refuses_it(filled: str, db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    with pytest.raises(InventoryError, match=f"schema is at revision 0002, this vnuma needs {SCHEMA_REVISION}") as err:
        open_placer(filled)
    assert err.value.hint == "run `vnuma db upgrade`"


def test_a_new_file_is_created_then_placed_on_through_sqlite3(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/inventory.db"
    with open_placer(url) as p:
        assert p.snapshot().hosts == []
    assert access.sqlite_file(url) is not None


# The machines hwloc's XML tests carry as they are; the POWER9 one (made from a sysfs snapshot) counts its
# 64 KiB base pages, so it has no 4 KiB pool to place on.
@pytest.fixture(params=sorted(p.name for p in UPSTREAM.glob("*.xml") if b"<page_type" not in p.read_bytes()))
def upstream(request: pytest.FixtureRequest, db_url: str) -> Iterator[str]:
    """A fresh inventory holding one of hwloc's own test machines (no hugepage counts) and a tenant."""
    with open_inventory(db_url) as inv:
        inv.add_host(parse_hwloc((UPSTREAM / request.param).read_bytes(), name="real", what=request.param))
        inv.add_tenant(Tenant("t"))
    yield db_url


def test_hwloc_machines_without_page_counts_are_placed_on_with_4k_pages(upstream: str) -> None:
    # The engine and the claim once saw two different 4 KiB pools on such hosts, and the
    # operator was told about concurrent commands that did not exist.
    req = VmRequest("small", "t", vcpus=2, memory_kib=KIB_PER_GIB, page_size_kib=PAGE_4K)
    _req, result = place_vm(Settings(upstream), req, Strategy.PACK, dry_run=False)
    assert result.chosen is not None, result.rejections
    with open_inventory(upstream) as inv:
        assert inv.get_vm("small")[0] == result.chosen
    # Until the host is full, each further VM is placed or refused for a reason of the host's.
    for i in range(40):
        big = VmRequest(f"big{i}", "t", vcpus=2, memory_kib=16 * KIB_PER_GIB, page_size_kib=PAGE_4K)
        _req, result = place_vm(Settings(upstream), big, Strategy.PACK, dry_run=False)
        if result.chosen is None:
            assert {r.check for r in result.rejections} <= {"cell-cpus", "cell-pages", "numa-nodes"}
            break


def test_the_read_queries_filter_alike_on_every_backend(url: str) -> None:
    """``host list``/``vm list`` (inventory/reading.py) on SQLite and PostgreSQL, directly and through the ORM."""
    from vnuma.errors import NotFoundError
    from vnuma.inventory import upgrade
    from vnuma.inventory.reading import open_reader

    upgrade(url)
    with open_inventory(url) as inv:
        _fill(inv)
    cases = [(None, None, ["vm1", "vm2", "vm3"]), ("acme", None, ["vm1"]), (None, "host-b", ["vm2"]),
             ("rival", "host-b", ["vm2"]), ("acme", "host-b", [])]
    with open_reader(url) as reader, open_inventory(url) as inv:
        assert [h["name"] for h in reader.host_summaries()] == ["big-1", "host-a", "host-b", "host-c"]
        assert reader.host_summaries() == inv.host_summaries()
        for tenant, host, names in cases:
            assert [p.vm for p, _state in reader.list_vms(tenant, host)] == names, (tenant, host)
            assert inv.list_vms(tenant, host) == reader.list_vms(tenant, host)
        for tenant, host in (("nobody", None), (None, "nowhere")):
            with pytest.raises(NotFoundError, match="is not in the inventory"):
                reader.list_vms(tenant, host)


def test_host_vm_view_and_kept_domains_read_alike_on_every_backend(url: str) -> None:
    """``host show``/``vm show``/stats' view and the embedded hypervisor's kept domains (reading.py) on SQLite
    and PostgreSQL, through the reader and through the ORM repository."""
    from vnuma.errors import NotFoundError
    from vnuma.inventory import upgrade
    from vnuma.inventory.reading import open_reader

    upgrade(url)
    with open_inventory(url) as inv:
        _fill(inv)
        inv.set_vm_state("vm2", "running")
    with open_reader(url) as reader, open_inventory(url) as inv:
        assert reader.host("host-b") == inv.get_host("host-b")
        assert reader.vm("vm2") == inv.get_vm("vm2") and str(reader.vm("vm2")[1]) == "running"
        view = reader.fleet_view()
        assert [p.vm for p in view.snapshot.placements] == ["vm1", "vm2", "vm3"]
        assert {name: str(s) for name, s in view.states.items()} == {"vm1": "placed", "vm2": "running", "vm3": "placed"}
        assert view.snapshot == inv.snapshot()
        assert reader.embedded_domains("host-a") is None
        stock, v1 = KeptDomain("stock", "<domain/>", True), KeptDomain("v1", "<domain>1</domain>", False)
        reader.keep_embedded_domain("host-a", "v1", v1, [stock, v1])  # the first keep keeps all it holds
        assert inv.embedded_domains("host-a") == {"stock": stock, "v1": v1}
        inv.keep_embedded_domain("host-a", "stock", None, [])
        inv.keep_embedded_domain("host-a", "v1", replace(v1, running=True), [stock])  # only v1's row
        assert reader.embedded_domains("host-a") == {"v1": replace(v1, running=True)}
        inv.keep_embedded_domain("host-a", "v1", None, [])
        assert reader.embedded_domains("host-a") == {}  # kept, with none: the node file's own stay away
        for call in (lambda: reader.host("nowhere"), lambda: reader.vm("nothing"),
                     lambda: reader.keep_embedded_domain("nowhere", "v1", None, []),
                     lambda: inv.embedded_domains("nowhere")):
            with pytest.raises(NotFoundError, match="is not in the inventory"):
                call()


def test_hosts_added_without_the_orm_read_back_alike_on_every_backend(url: str) -> None:
    """``host add|import`` (inventory/hostwrite.py, no ORM) and the repository insert the same row."""
    from vnuma.errors import ConflictError
    from vnuma.inventory import upgrade
    from vnuma.inventory.hostwrite import open_registrar

    upgrade(url)
    host = make_host("r1", cells=2, gpus_per_cell=1, reserved_cpus=frozenset({0}))
    with open_registrar(url) as registrar:
        assert not registrar.has_host("r1")
        registrar.add_host(host, "/some/caps.xml")
        assert registrar.has_host("r1")
        with pytest.raises(ConflictError, match="already in the inventory"):
            registrar.add_host(host)
    with open_inventory(url) as inv:
        assert inv.get_host("r1") == host
        assert inv.topology_overrides() == {"r1": "/some/caps.xml"}
        inv.add_host(make_host("r2"))
        assert [h["name"] for h in inv.host_summaries()] == ["r1", "r2"]


@pytest.mark.postgres
def test_a_kept_postgres_connection_is_checked_again_once_its_check_is_old(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrade(pg_url)
    monkeypatch.setattr(access, "RECHECK_S", 3600.0)
    with open_placer(pg_url) as p:  # a checked connection, kept for the next opening
        assert p.snapshot().hosts == []
    engine = make_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0002'"))
        with open_placer(pg_url) as p:  # within RECHECK_S of its check: the kept connection is trusted
            assert p.snapshot().hosts == []
        monkeypatch.setattr(access, "RECHECK_S", 0.0)
        with pytest.raises(InventoryError, match=f"schema is at revision 0002, this vnuma needs {SCHEMA_REVISION}"):
            open_placer(pg_url)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_statement_alone_runs_outside_a_transaction_and_leaves_the_connection_transactional(pg_url: str) -> None:
    upgrade(pg_url)
    with access.open_access(pg_url) as opened:
        with opened.alone() as x:
            assert x.one("SELECT txid_current_if_assigned() IS NULL, now() = statement_timestamp()") == (True, True)
        with pytest.raises(InventoryError, match="no_such_table"), opened.alone() as x:
            x.one("SELECT * FROM no_such_table")
        with opened.begin(False) as x:  # a transaction again: its statements share one snapshot and clock
            first = x.one("SELECT now()")
            assert x.one("SELECT now() = :first", {"first": first[0] if first else None}) == (True,)
