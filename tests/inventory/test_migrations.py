"""Schema: Alembic builds it, it matches the models, and an old or foreign database is refused untouched."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from tests.builders import make_host
from tests.dbdump import dump
from vnuma.errors import InventoryError
from vnuma.inventory import open_inventory, upgrade
from vnuma.inventory.db import alembic_config, current_revision, head_revision, make_engine, writer
from vnuma.inventory.tables import Base

TABLES = {
    "alembic_version", "hosts", "tenants", "vms", "cpu_claims", "page_claims", "device_claims",
    "rebalance_runs", "rebalance_steps", "audit_log", "api_tokens", "resctrl_claims", "bandwidth_samples",
    "gpu_profiles", "replica_groups", "partition_claims", "embedded_domains", "watch_samples", "watch_events",
    "watch_proposals", "watch_readings", "watch_lease", "fleet_marks",
}


def _drift(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(
                compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
            )
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _downgrade(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        with writer(engine).begin() as conn:
            command.downgrade(alembic_config(conn), revision)
    finally:
        engine.dispose()



def _host_rows(db_path: Path, wanted: tuple[str, ...]) -> list[tuple[object, ...]]:
    """The hosts' ``wanted`` columns that the schema at hand has, by name (read with the stdlib)."""
    c = sqlite3.connect(db_path)
    try:
        columns = {row[1] for row in c.execute("PRAGMA table_info(hosts)")}
        chosen = ", ".join(col for col in wanted if col in columns)
        return c.execute(f"SELECT {chosen} FROM hosts ORDER BY name").fetchall()
    finally:
        c.close()

def test_upgrade_creates_every_table_at_head(db_url: str) -> None:
    assert current_revision(db_url) is None
    upgrade(db_url)
    assert _tables(db_url) == TABLES
    assert current_revision(db_url) == head_revision()


def test_models_and_migrations_do_not_drift(db_url: str) -> None:
    upgrade(db_url)
    assert _drift(db_url) == []


def test_drift_check_sees_a_missing_migration(db_url: str) -> None:
    # The drift test above is only worth something if the comparison can fail.
    upgrade(db_url)
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_vms_host_id")
    engine.dispose()
    assert any("ix_vms_host_id" in repr(diff) for diff in _drift(db_url))


def test_upgrade_downgrade_upgrade(url: str) -> None:
    upgrade(url)
    _downgrade(url, "base")
    assert _tables(url) == {"alembic_version"}
    assert current_revision(url) is None
    upgrade(url)
    assert _tables(url) == TABLES
    assert _drift(url) == []


def test_a_new_database_is_created_at_head_on_first_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/dir/inventory.db"
    with open_inventory(url) as inv:
        inv.add_host(make_host())
    assert current_revision(url) == head_revision()
    assert _drift(url) == []


def test_current_revision_does_not_create_a_missing_file(db_path: Path, db_url: str) -> None:
    assert current_revision(db_url) is None
    assert not db_path.exists()


def test_a_database_behind_head_is_refused_and_left_unchanged(db_path: Path, db_url: str) -> None:
    # The only revision before head is base: a real database as Alembic leaves
    # it after `downgrade base` (its alembic_version table, with no row).
    upgrade(db_url)
    _downgrade(db_url, "base")
    before = dump(db_path)
    with pytest.raises(InventoryError) as err:
        open_inventory(db_url)
    assert f"schema is at revision base, this vnuma needs {head_revision()}" in str(err.value)
    assert err.value.hint is not None and "vnuma db upgrade" in err.value.hint
    assert dump(db_path) == before
    upgrade(db_url)
    open_inventory(db_url).close()


def test_a_database_from_a_newer_vnuma_is_refused_and_left_unchanged(db_path: Path, db_url: str) -> None:
    with open_inventory(db_url) as inv:
        inv.add_host(make_host())
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()
    before = dump(db_path)
    with pytest.raises(InventoryError) as err:
        open_inventory(db_url)
    assert "schema is at revision 9999" in str(err.value)
    assert err.value.hint is not None and err.value.hint.startswith("upgrade vnuma: a newer version")
    with pytest.raises(InventoryError, match="9999"):
        upgrade(db_url)
    assert dump(db_path) == before


def test_a_foreign_database_is_refused_and_left_unchanged(db_path: Path, db_url: str) -> None:
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.close()
    before = dump(db_path)
    with pytest.raises(InventoryError, match="is not a vnuma inventory"):
        open_inventory(db_url)
    assert dump(db_path) == before


def test_schema_revision_constant_is_the_migrations_head() -> None:
    from vnuma.inventory.db import head_revision
    from vnuma.inventory.schema import SCHEMA_REVISION

    assert head_revision() == SCHEMA_REVISION


def _seeded_at(db_path: Path, db_url: str, revision: str) -> sqlite3.Connection:
    """The inventory upgraded to ``revision``, with host 1 ('h') and tenant 1 ('t'); an open connection."""
    engine = make_engine(db_url)
    with writer(engine).begin() as conn:
        command.upgrade(alembic_config(conn), revision)
    engine.dispose()
    db = sqlite3.connect(db_path)
    with db:
        db.execute(
            "INSERT INTO hosts (id, name, source, topology, n_cells, n_cpus, n_gpus, memory_kib) "
            "VALUES (1, 'h', 'files', '{}', 1, 2, 0, 1024)"
        )
        db.execute("INSERT INTO tenants (id, name, isolation) VALUES (1, 't', 'core')")
    return db


def test_claims_survive_upgrade_from_0001_and_downgrade_back(db_path: Path, db_url: str) -> None:
    # Adding vms.rendering must not rebuild vms in a way that cascades to its claims.
    conn = _seeded_at(db_path, db_url, "0001")
    with conn:
        conn.execute(
            "INSERT INTO vms (id, name, tenant_id, host_id, vcpus, gpus, placement) VALUES (1, 'v', 1, 1, 1, 0, '{}')"
        )
        conn.execute("INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (1, 1, 0, 1)")
    conn.close()

    def claims() -> list[tuple[int, int]]:
        c = sqlite3.connect(db_path)
        try:
            return c.execute("SELECT vm_id, cpu_id FROM cpu_claims").fetchall()
        finally:
            c.close()

    upgrade(db_url)
    assert current_revision(db_url) == head_revision() and claims() == [(1, 0)]
    _downgrade(db_url, "0001")
    assert current_revision(db_url) == "0001" and claims() == [(1, 0)]


def test_topology_override_is_added_empty_and_dropped_again_keeping_the_hosts(db_path: Path, db_url: str) -> None:
    engine = make_engine(db_url)
    with writer(engine).begin() as conn:
        command.upgrade(alembic_config(conn), "0003")
    engine.dispose()
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute(
            "INSERT INTO hosts (id, name, uri, source, topology, n_cells, n_cpus, n_gpus, memory_kib) "
            "VALUES (1, 'h', 'test:///default', 'libvirt', '{}', 1, 2, 0, 1024)"
        )
    conn.close()

    def hosts() -> list[tuple[object, ...]]:
        return _host_rows(db_path, ("name", "uri", "topology_override"))

    upgrade(db_url)
    assert hosts() == [("h", "test:///default", None)]  # NULL: libvirt's capabilities, as refresh read them
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("UPDATE hosts SET topology_override = 'demo'")
    conn.close()
    _downgrade(db_url, "0003")
    assert current_revision(db_url) == "0003" and hosts() == [("h", "test:///default")]
    upgrade(db_url)
    assert hosts() == [("h", "test:///default", None)]
    assert _drift(db_url) == []


def test_0006_keeps_no_checkout_path_in_the_demo_hosts_uri(db_path: Path, db_url: str) -> None:
    engine = make_engine(db_url)
    with writer(engine).begin() as conn:
        command.upgrade(alembic_config(conn), "0005")
    engine.dispose()
    conn = sqlite3.connect(db_path)
    with conn:
        conn.executemany(
            "INSERT INTO hosts (id, name, uri, source, topology, topology_override, n_cells, n_cpus, n_gpus, "
            "memory_kib) VALUES (?, ?, ?, 'libvirt', '{}', ?, 1, 2, 0, 1024)",
            [
                (1, "demo", "test:///old/checkout/vnuma/data/demo-node.xml", "demo"),
                (2, "lab", "test:///default", None),
            ],
        )
    conn.close()

    def hosts() -> list[tuple[object, ...]]:
        return _host_rows(db_path, ("name", "uri", "embedded_domains"))

    upgrade(db_url, "0006")
    assert hosts() == [("demo", "test:///vnuma-demo", None), ("lab", "test:///default", None)]
    _downgrade(db_url, "0005")
    assert hosts() == [("demo", "test:///vnuma-demo"), ("lab", "test:///default")]
    upgrade(db_url)
    assert _drift(db_url) == []


def test_0014_records_each_vms_group_and_forgets_it_on_downgrade(db_path: Path, db_url: str) -> None:
    """VMs placed before 0014 get ``vms.group_name`` from their placement documents (and their groups a row
    in ``replica_groups``), so a claim finds them; downgrading drops both and keeps the VMs and claims."""
    conn = _seeded_at(db_path, db_url, "0013")
    with conn:
        conn.executemany(
            "INSERT INTO vms (id, name, tenant_id, host_id, vcpus, gpus, placement) VALUES (?, ?, 1, 1, 1, 0, ?)",
            [
                (1, "r1", '{"vm": "r1", "group": {"name": "web", "anti_affinity": "host"}}'),
                (2, "r2", '{"vm": "r2", "group": {"name": "web", "anti_affinity": "host"}}'),
                (3, "plain", '{"vm": "plain", "group": null}'),
                (4, "old", "{}"),
            ],
        )
        conn.execute("INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (1, 1, 0, 1)")
    conn.close()

    def read(sql: str) -> list[tuple[object, ...]]:
        c = sqlite3.connect(db_path)
        try:
            return c.execute(sql).fetchall()
        finally:
            c.close()

    upgrade(db_url)
    assert read("SELECT name, group_name FROM vms ORDER BY id") == [
        ("r1", "web"), ("r2", "web"), ("plain", None), ("old", None)
    ]
    assert read("SELECT name FROM replica_groups") == [("web",)]
    _downgrade(db_url, "0013")
    assert "group_name" not in {row[1] for row in read("PRAGMA table_info(vms)")}
    assert "replica_groups" not in _tables(db_url)
    assert read("SELECT vm_id, cpu_id FROM cpu_claims") == [(1, 0)]
    upgrade(db_url)
    assert _drift(db_url) == []


def test_0016_adds_an_empty_left_out_list_to_every_host_and_drops_it_keeping_them(db_path: Path, db_url: str) -> None:
    """Hosts recorded before 0016 get ``left_out`` '' (none known), which `host show` reads as []; a downgrade
    drops the column and keeps the hosts and their VMs' claims."""
    conn = _seeded_at(db_path, db_url, "0015")
    with conn:
        conn.execute(
            "INSERT INTO vms (id, name, tenant_id, host_id, vcpus, gpus, placement) VALUES (1, 'v', 1, 1, 1, 0, '{}')"
        )
        conn.execute("INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (1, 1, 0, 1)")
    conn.close()

    def read(sql: str) -> list[tuple[object, ...]]:
        c = sqlite3.connect(db_path)
        try:
            return c.execute(sql).fetchall()
        finally:
            c.close()

    upgrade(db_url)
    assert _host_rows(db_path, ("name", "left_out")) == [("h", "")]
    from vnuma.inventory.topologies import decode_left_out

    assert decode_left_out("h", "") == ()
    c = sqlite3.connect(db_path)
    with c:
        c.execute("""UPDATE hosts SET left_out = '[{"what":"PU 0","why":"in no NUMA node"}]'""")
    c.close()
    _downgrade(db_url, "0015")
    assert current_revision(db_url) == "0015"
    assert _host_rows(db_path, ("name", "left_out")) == [("h",)]
    assert read("SELECT vm_id, cpu_id FROM cpu_claims") == [(1, 0)]
    upgrade(db_url)
    assert _host_rows(db_path, ("name", "left_out")) == [("h", "")]
    assert _drift(db_url) == []


KEPT_DOC = [
    {"name": "vm2", "xml": "<domain><name>vm2</name></domain>", "running": True},
    {"name": "vm1", "xml": "<domain><name>vm1</name></domain>", "running": False},
]


def test_0017_keeps_each_embedded_domain_as_a_row_and_back(db_path: Path, db_url: str) -> None:
    """Each host's document of kept domains becomes one row per domain (a host kept with none stays kept; an
    unreadable document, which vnuma refused to open, becomes nothing kept), and downgrading writes the
    documents back; the hosts' VMs and claims are untouched (no copy of hosts cascades to them)."""
    conn = _seeded_at(db_path, db_url, "0015")
    with conn:
        conn.executemany(
            "INSERT INTO hosts (id, name, source, topology, n_cells, n_cpus, n_gpus, memory_kib, embedded_domains) "
            "VALUES (?, ?, 'files', '{}', 1, 2, 0, 1024, ?)",
            [(2, "demo", json.dumps(KEPT_DOC)), (3, "empty", "[]"), (4, "odd", '{"not": "a list"}')],
        )
        conn.execute(
            "INSERT INTO vms (id, name, tenant_id, host_id, vcpus, gpus, placement) VALUES (1, 'v', 1, 2, 1, 0, '{}')"
        )
        conn.execute("INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (1, 2, 0, 1)")
    conn.close()

    def read(sql: str) -> list[tuple[object, ...]]:
        c = sqlite3.connect(db_path)
        try:
            return c.execute(sql).fetchall()
        finally:
            c.close()

    upgrade(db_url)
    assert read("SELECT name, embedded_kept FROM hosts ORDER BY name") == [
        ("demo", 1), ("empty", 1), ("h", 0), ("odd", 0)
    ]
    assert read("SELECT host_id, name, xml, running FROM embedded_domains ORDER BY name") == [
        (2, d["name"], d["xml"], int(d["running"])) for d in sorted(KEPT_DOC, key=lambda d: d["name"])
    ]
    assert read("SELECT vm_id, host_id, cpu_id FROM cpu_claims") == [(1, 2, 0)]
    assert _drift(db_url) == []

    _downgrade(db_url, "0015")
    assert read("SELECT name, embedded_domains FROM hosts ORDER BY name") == [
        ("demo", json.dumps(sorted(KEPT_DOC, key=lambda d: d["name"]), sort_keys=True)), ("empty", "[]"),
        ("h", None), ("odd", None),
    ]
    assert "embedded_domains" not in _tables(db_url)
    assert read("SELECT vm_id, host_id, cpu_id FROM cpu_claims") == [(1, 2, 0)]
    upgrade(db_url)
    assert read("SELECT count(*) FROM embedded_domains") == [(2,)]
    assert _drift(db_url) == []



def test_0018_rebuilds_the_request_of_every_placement_kept_before_and_drops_it_back(tmp_path: Path) -> None:
    """Placements stored before 0018 keep no request: the upgrade writes the one they amount to (the cell
    count and sizes they have, their policies; GPUs ``required``), marked reconstructed, in the VMs' documents
    and in the journal's steps; a move then asks it; a downgrade takes the requests out again."""
    from tests.cli.conftest import Cli

    db = tmp_path / "inventory.db"
    url = f"sqlite:///{db}"
    cli = Cli(db)
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--gpus", "1", "--gpu-affinity", "preferred",
           "--numa-nodes", "2", "--memory-mode", "interleave", "--page-size", "2M", "--name", "v")
    cli.ok("place", "t", "--cell-vcpus", "6,2", "--cell-memory", "6GiB,2GiB", "--page-size", "1G", "--name", "u")
    cli.ok("vm", "repin", "u", "--cells", "2,3")  # a journaled step holds placements too
    asked = cli.ok("vm", "show", "v", "--json").json()["request"]
    _downgrade(url, "0017")

    def documents() -> list[dict[str, object]]:
        c = sqlite3.connect(db)
        try:
            rows = [r[0] for r in c.execute("SELECT placement FROM vms ORDER BY name")]
            rows += [r[0] for s in c.execute('SELECT "before", "after" FROM rebalance_steps') for r in (s[:1], s[1:])]
            return [json.loads(r) for r in rows]
        finally:
            c.close()

    assert all("request" not in d for d in documents())
    upgrade(url)
    assert all(d["request"]["reconstructed"] is True for d in documents())  # type: ignore[index]
    v = cli.ok("vm", "show", "v", "--json").json()["request"]
    # As it was asked, but for what no placement recorded: the GPUs' affinity and --host; sizes by unit.
    assert v == {**asked, "gpu_affinity": "required", "reconstructed": True}
    u = cli.ok("vm", "show", "u", "--json").json()["request"]
    assert (u["cell_vcpus"], u["cell_memory"], u["numa_nodes"], u["page_size"]) == ("6,2", "6GiB,2GiB", 2, "1G")
    cli.ok("vm", "repin", "u", "--cells", "0,1")
    assert cli.ok("vm", "show", "u", "--json").json()["request"] == u  # the move kept the rebuilt request
    assert _drift(url) == []
    _downgrade(url, "0017")
    assert all("request" not in d for d in documents())


def test_0021_adds_empty_memory_columns_to_the_watch_samples_and_drops_them_keeping_the_samples(
    db_path: Path, db_url: str,
) -> None:
    _seeded_at(db_path, db_url, "0020").close()
    db = sqlite3.connect(db_path)
    with db:
        db.execute("INSERT INTO watch_samples (at_ms, minute, kind, host, subject, item, cpu, flags) "
                   "VALUES (1000, 0, 'vm', 'h', 'v', -1, 1.5, '')")
    db.close()

    def samples() -> list[tuple[object, ...]]:
        c = sqlite3.connect(db_path)
        try:
            columns = [row[1] for row in c.execute("PRAGMA table_info(watch_samples)")]
            chosen = [col for col in ("subject", "cpu", "rss_kib", "balloon_kib") if col in columns]
            return c.execute(f"SELECT {', '.join(chosen)} FROM watch_samples").fetchall()
        finally:
            c.close()

    upgrade(db_url)
    assert samples() == [("v", 1.5, None, None)]  # NULL: not reported (taken before)
    _downgrade(db_url, "0020")
    assert current_revision(db_url) == "0020" and samples() == [("v", 1.5)]
    upgrade(db_url)
    assert samples() == [("v", 1.5, None, None)]
    assert _drift(db_url) == []
