"""The audit log: every change logged in its own transaction, refusals logged, `vnuma log` filters."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.cli.conftest import Cli
from tests.dbdump import audit_rows, dump
from vnuma.inventory import open_inventory
from vnuma.placement.model import Isolation, Tenant

SCENARIO = [
    ["host", "add", "a", "--demo"],
    ["host", "add", "b", "--demo"],
    ["tenant", "create", "t"],
    ["tenant", "update", "t", "--max-vcpus", "200"],
    ["host", "reserve", "a", "--cpus", "0"],
    ["place", "t", "--gpus", "1", "--name", "v1", "--host", "a"],
    ["place", "t", "--vcpus", "2", "--memory", "2GiB", "--name", "v2", "--host", "a"],
    ["apply", "v1"],
    ["vm", "start", "v1"],
    ["vm", "stop", "v1"],
    ["vm", "migrate", "v2", "--to", "b"],
    ["host", "cordon", "b"],
    ["host", "uncordon", "b"],
    ["vm", "release", "v1", "--undefine"],
    ["vm", "release", "v2"],
    ["tenant", "remove", "t"],
    ["host", "remove", "b"],
]


def test_no_command_changes_the_inventory_without_logging_it(cli: Cli) -> None:
    for args in SCENARIO:
        before, logged = dump(cli.db) if cli.db.exists() else [], len(audit_rows(cli.db)) if cli.db.exists() else 0
        cli.ok(*args)
        rows = audit_rows(cli.db)[logged:]
        if dump(cli.db) != before:
            assert rows, f"vnuma {' '.join(args)} changed the inventory and logged nothing"
        assert {r[2] for r in rows} <= {"ok"} and len({r[0] for r in rows}) <= 1, args
        assert all(r[1] == f"vnuma --db {cli.db} --create " + " ".join(args) for r in rows), (args, rows)


def test_a_refused_change_adds_one_refused_row_and_nothing_else(cli: Cli) -> None:
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "t")
    before, logged = dump(cli.db), len(audit_rows(cli.db))
    assert cli("place", "t", "--gpus", "99", "--name", "big").exit_code == 4
    assert dump(cli.db) == before
    (row,) = audit_rows(cli.db)[logged:]
    assert row[2] == "refused" and "99 GPUs" in json.loads(row[3])["error"]
    entry = cli.ok("log", "--vm", "big", "--json").json()
    assert [e["outcome"] for e in entry] == ["refused"] and entry[0]["changes"] == []
    cli.ok("host", "list")  # a read is not logged, even when it is refused
    assert cli("host", "show", "nope").exit_code == 3
    assert cli("place", "t", "--gpus", "99", "--dry-run").exit_code == 4
    assert len(audit_rows(cli.db)) == logged + 1


def test_the_log_row_is_in_the_changes_transaction(cli: Cli) -> None:
    """Without its audit table a change cannot commit: the claim is refused and the VM is not there."""
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "t")
    con = sqlite3.connect(cli.db)
    con.execute("ALTER TABLE audit_log RENAME TO audit_log_gone")
    con.commit()
    con.close()
    res = cli("place", "t", "--vcpus", "2", "--memory", "2GiB", "--name", "lost")
    assert res.exit_code != 0 and "Traceback" not in res.stderr
    con = sqlite3.connect(cli.db)
    assert con.execute("SELECT count(*) FROM vms").fetchone() == (0,)
    con.close()


def test_log_filters_by_name_and_time_and_masks_passwords(cli: Cli) -> None:
    for args in SCENARIO[:7]:
        cli.ok(*args)
    by_vm = cli.ok("log", "--vm", "v1", "--json").json()
    assert [c["op"] for e in by_vm for c in e["changes"]] == ["claim"]
    assert by_vm[0]["changes"][0]["host"] == "a" and by_vm[0]["user"] and by_vm[0]["machine"]
    by_host = cli.ok("log", "--host", "b", "--json").json()
    assert [e["command"] for e in by_host] == [f"vnuma --db {cli.db} --create host add b --demo"]
    by_tenant = cli.ok("log", "--tenant", "t", "--json").json()
    assert len(by_tenant) == 4  # create, update, two claims
    assert cli.ok("log", "--since", "1h", "--json").json() == cli.ok("log", "--json").json()
    assert cli.ok("log", "--since", "2999-01-01", "--json").json() == []
    assert len(cli.ok("log", "--limit", "2", "--json").json()) == 2
    assert cli("log", "--since", "yesterday").exit_code == 4
    assert cli("log", "--limit", "0").exit_code == 4
    from vnuma.services.audit import command_line

    assert command_line(["--db", "postgresql://u:secret@db/x", "host", "list"]) == (
        "vnuma --db 'postgresql://u:***@db/x' host list")


def test_a_library_callers_changes_are_logged_too(cli: Cli) -> None:
    cli.ok("host", "list")
    with open_inventory(f"sqlite:///{cli.db}") as inv:
        inv.add_tenant(Tenant("lib", Isolation.CORE))
    (row,) = [r for r in audit_rows(cli.db) if "lib" in r[3]]
    assert row[1:3] == ("(library)", "ok")


@pytest.mark.postgres
def test_postgres_logs_a_claim_with_its_change(pg_url: str, tmp_path: object) -> None:
    pg = Cli(tmp_path / "unused.db")  # type: ignore[operator]
    pg.options = ["--db", pg_url]
    pg.ok("db", "upgrade")
    pg.ok("host", "add", "pa", "--demo")
    pg.ok("tenant", "create", "pt")
    pg.ok("place", "pt", "--vcpus", "2", "--memory", "2GiB", "--name", "pv")
    entries = pg.ok("log", "--vm", "pv", "--json").json()
    assert [c["op"] for e in entries for c in e["changes"]] == ["claim"]


def test_an_absurd_vcpu_count_is_a_refusal_not_an_engine_overflow(cli: Cli) -> None:
    """Found by the options fuzzer: 10**30 vCPUs overflowed the engine's arrays (exit 70) and was logged
    as a failure; it is a refusal of the request, logged as one."""
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "acme")
    res = cli("place", "acme", "--memory", "4K", "--vcpus", "9" * 30)
    assert res.exit_code == 4 and "a libvirt domain has at most 4096" in res.stderr
    assert [r[2] for r in audit_rows(cli.db)][-1] == "refused"
    assert cli("place", "acme", "--memory", "1GiB", "--vcpus", "4097").exit_code == 4
