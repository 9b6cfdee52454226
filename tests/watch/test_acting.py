"""`vnuma watch --act propose|apply` and `vnuma events apply ID` on the recorded fleet (tests/data/watch/fleet):
events become moves within the budget, carried out as journaled rebalance runs, every move withheld said why."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.concurrency.consistency import inconsistencies
from tests.dbdump import dump
from tests.watch.conftest import FLEET, at, copy_rounds

NOISY_B1 = ("L3 domain 0 of rdt carries 7020 MB/s, share 3660 MB/s; b1 measured 6000 MB/s at "
            f"{at(7)}; to cells [1]; excess 3360 -> 2640 MB/s")


def _actions(cli: Cli) -> list[tuple[Any, ...]]:
    return [(e["id"], a["id"], a["status"], a["vm"], a["at"], a["reason"])
            for e in cli.ok("events", "--json").json() for a in e["actions"]]


def _cells(cli: Cli, vm: str) -> tuple[str, list[int]]:
    doc = cli.ok("vm", "show", vm, "--json").json()
    return doc["host"], [c["host_cell"] for c in doc["cells"]]


def _runs(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status, unfinished, options FROM rebalance_runs ORDER BY id").fetchall()


def test_propose_keeps_a_move_per_event_and_the_reason_of_every_move_withheld(fleet: Cli) -> None:
    res = fleet.ok("watch", "--domstats-dir", str(FLEET))
    assert "proposal 1 for event 1 (noisy VM b1): re-pin b1 to rdt cells 1 (bandwidth)" in res.stdout
    assert res.stdout.splitlines()[-1] == ("watch: 48 rounds written over 2 hosts, 3 events opened, 2 closed; "
                                           "1 moves proposed, 0 applied, 2 withheld; stale: rdt2")
    assert _actions(fleet) == [
        (1, 1, "proposed", "b1", at(7), NOISY_B1),
        (2, 2, "withheld", None, at(10), "cell-drift: memory used outside vnuma; no move of a VM remedies it"),
        # b2 turned memory-bound: no re-pin on rdt helps, and the fleet's bandwidth plan would migrate b1
        (3, 3, "withheld", "b2", at(22), "migrate b1 to rdt2 cells 0 (bandwidth): no re-pin on rdt helps; "
                                          "migrating b1 to rdt2 needs --allow-migrate"),
    ]
    assert _cells(fleet, "b1") == ("rdt", [0])  # proposing moves nothing
    assert _runs(fleet.db) == []
    table = fleet.ok("events").stdout
    assert "ACTION  EVENT  AT" in table and "proposed  b1  rdt:0 -> rdt:1" in table


def test_events_apply_carries_a_proposal_out_as_a_journaled_run(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    res = fleet.ok("events", "apply", "1")
    assert res.stdout.splitlines() == ["step 1: b1 (claims) done", "proposal 1: rebalance run 1 done"]
    assert _cells(fleet, "b1") == ("rdt", [1])
    ((run, status, unfinished, options),) = _runs(fleet.db)
    assert (run, status, unfinished) == (1, "done", None) and '"proposal": 1' in options
    assert fleet.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]["status"] == "applied"
    assert fleet.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]["run"] == 1
    assert fleet.ok("events", "--json").json()[0]["actions"][0]["reason"] == NOISY_B1
    # carried out now: the budget of the hour before now holds it
    assert fleet.ok("events").stdout.splitlines()[-1] == (
        "budget: 1 of 10 moves in the last hour on the fleet, rdt 1 of 2 (per host: 2); cooldown 3600s, "
        "no_return 86400s")


def test_events_apply_json_is_the_proposal_and_its_run(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    doc = fleet.ok("events", "apply", "1", "--json").json()
    assert doc == {"proposal": 1, "run": {"id": 1, "status": "done", "steps": [
        {"seq": 1, "vm": "b1", "kind": "claims", "status": "done", "error": None}]}}


def test_events_apply_of_an_unknown_applied_or_withheld_proposal_is_refused(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    before = dump(fleet.db)
    res = fleet("events", "apply", "42")
    assert (res.exit_code, res.stderr.splitlines()[0]) == (3, "error: proposal 42 is not in the inventory")
    res = fleet("events", "apply", "2")
    assert res.exit_code == 9
    assert res.stderr.splitlines()[0] == ("error: proposal 2 is a move withheld, not proposed: cell-drift: memory "
                                          "used outside vnuma; no move of a VM remedies it")
    res = fleet("events", "apply")
    assert res.exit_code == 2
    assert dump(fleet.db) == before
    fleet.ok("events", "apply", "1")
    res = fleet("events", "apply", "1")
    assert res.exit_code == 9
    assert res.stderr.splitlines()[0] == "error: proposal 1 was already carried out: rebalance run 1 (done)"
    assert len(_runs(fleet.db)) == 1


def test_act_apply_moves_within_the_budget_and_never_moves_back(fleet: Cli) -> None:
    res = fleet.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply", "--allow-migrate")
    lines = res.stdout.splitlines()
    assert lines[1:3] == ["proposal 1 for event 1 (noisy VM b1): re-pin b1 to rdt cells 1 (bandwidth)",
                          "proposal 1 applied: rebalance run 1 done"]
    # b2 turns memory-bound at sample 20: the bandwidth plan would now move b1 back to the cells it left, then
    # (that excluded) migrate b1, in its cooldown; the next best, b2 itself to rdt2, goes
    back = (f"b1 would go back to rdt cells 0, which it left at {at(7)}: no swap back within no_return in the "
            "[watch] table")
    cooling = "VM b1 is in its cooldown after a move, until 2026-12-07T01:01:10+00:00 (cooldown in the [watch] table)"
    assert [a[2:] for a in _actions(fleet)[2:]] == [
        ("withheld", "b2", at(22), f"re-pin b1 to rdt cells 0 (bandwidth): {back}"),
        ("withheld", "b2", at(22), f"migrate b1 to rdt2 cells 0 (bandwidth): {cooling}"),
        ("applied", "b2", at(22), "L3 domain 1 of rdt carries 3980 MB/s, share 1300 MB/s; b2 measured 3000 MB/s at "
                                  f"{at(22)}; to host rdt2 cells [0]; excess 2680 -> 1900 MB/s"),
    ]
    assert _cells(fleet, "b1") == ("rdt", [1]) and _cells(fleet, "b2") == ("rdt2", [0])
    assert [r[:3] for r in _runs(fleet.db)] == [(1, "done", None), (2, "done", None)]
    assert lines[-1].endswith("3 events opened, 3 closed; 2 moves proposed, 2 applied, 3 withheld; stale: rdt2")


def test_a_tenant_that_opted_out_is_never_moved_and_the_next_best_move_is_made(fleet: Cli) -> None:
    assert fleet.ok("tenant", "update", "tenant-b", "--no-auto-move").stdout == (
        "updated tenant tenant-b: automatic moves on -> off\n")
    fleet.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply", "--allow-migrate")
    opted = "tenant tenant-b opted out of automatic moves (vnuma tenant update tenant-b --auto-move)"
    acted = [a[2:4] + a[5:] for a in _actions(fleet) if a[3]]
    # b1's re-pin is planned first, withheld; the next best, a1 (tenant-a) off b1's domain, is made
    assert acted[:2] == [("withheld", "b1", f"re-pin b1 to rdt cells 1 (bandwidth): {opted}"),
                         ("applied", "a1", "L3 domain 0 of rdt carries 7020 MB/s, share 3660 MB/s; a1 measured 540 "
                                           f"MB/s at {at(7)}; to cells [1]; excess 3360 -> 2820 MB/s")]
    assert ("withheld", "b2", f"migrate b2 to rdt2 cells 0 (bandwidth): {opted}") in acted
    assert _cells(fleet, "b1") == ("rdt", [0]) and _cells(fleet, "b2") == ("rdt", [1])  # tenant-b never moved
    moved = {vm for status, vm, _ in acted if status == "applied"}
    assert moved and all(fleet.ok("vm", "show", vm, "--json").json()["tenant"] == "tenant-a" for vm in moved)
    doc = fleet.ok("tenant", "update", "tenant-b", "--auto-move", "--json").json()
    assert (doc["auto_move"], doc["before"]["auto_move"]) == (True, False)
    assert fleet("tenant", "update", "nobody", "--no-auto-move").exit_code == 3


def test_nothing_moves_on_a_cordoned_host(fleet: Cli) -> None:
    fleet.ok("host", "cordon", "rdt")
    fleet.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply", "--allow-migrate")
    assert {a[5] for a in _actions(fleet) if a[3]} == {"host rdt is cordoned: nothing moves on it"}
    assert _runs(fleet.db) == []


@pytest.mark.parametrize(("table", "message"), [
    ("moves_per_host_hour = -1", "moves_per_host_hour: -1 is out of range (0 to 1000)"),
    ("moves_per_hour = 2.5", "moves_per_hour: expected a whole number, got 2.5"),
    ('cooldown = "10s"', "cooldown_s: '10s' is out of range (60 to 604800)"),
    ("cooldown = 5", "cooldown: expected a time"),
], ids=["host", "fleet", "cooldown-range", "cooldown-type"])
def test_bad_budget_limits_are_one_clear_error_and_nothing_is_written(
    fleet: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, message: str,
) -> None:
    config = tmp_path / "vnuma.toml"
    config.write_text(f"[watch]\n{table}\n")
    monkeypatch.setenv("VNUMA_CONFIG", str(config))
    before = dump(fleet.db)
    for args in (("watch", "--domstats-dir", str(FLEET), "--act", "apply"), ("events", "apply", "1")):
        res = fleet(*args)
        assert res.exit_code == 4 and res.stderr.startswith(f"error: {config}: [watch] ") and message in res.stderr
        assert len(res.stderr.splitlines()) <= 2
    assert dump(fleet.db) == before


def test_the_budget_in_the_file_limits_the_moves(fleet: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "vnuma.toml"
    config.write_text("[watch]\nmoves_per_host_hour = 0\n")
    monkeypatch.setenv("VNUMA_CONFIG", str(config))
    fleet.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply")
    assert _actions(fleet)[0][2:] == ("withheld", "b1", at(7), "host rdt: 0 moves in the last hour, the most "
                                      "allowed (moves_per_host_hour in the [watch] table)")
    assert _cells(fleet, "b1") == ("rdt", [0])


@pytest.mark.parametrize("point", ["run-opened", "step-started", "libvirt-done"])
@pytest.mark.parametrize("finish", ["--resume", "--abort"])
def test_act_apply_killed_mid_run_leaves_a_run_that_resume_or_abort_finishes(
    fleet: Cli, point: str, finish: str,
) -> None:
    res = fleet.process("watch", "--domstats-dir", str(FLEET), "--act", "apply", env={"VNUMA_FAILPOINT": point})
    assert res.exit_code == -9, res.stderr
    ((run, _, unfinished, options),) = _runs(fleet.db)
    assert unfinished and '"proposal": 1' in options
    assert fleet.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]["status"] == "unfinished"
    fleet.ok("rebalance", finish)
    assert inconsistencies(f"sqlite:///{fleet.db}") == []
    assert [r[:3] for r in _runs(fleet.db)] == [(run, "done" if finish == "--resume" else "aborted", None)]
    assert _cells(fleet, "b1") == ("rdt", [1] if finish == "--resume" else [0])
    action = fleet.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]
    assert (action["status"], action["run"]) == ("applied" if finish == "--resume" else "aborted", run)


def test_act_apply_withholds_every_move_while_a_run_is_unfinished(fleet: Cli, tmp_path: Path) -> None:
    res = fleet.process("watch", "--domstats-dir", str(FLEET), "--act", "apply", env={"VNUMA_FAILPOINT":
                                                                                       "step-started"})
    assert res.exit_code == -9
    fleet.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "rest", lambda s: s > 7)), "--act", "apply")
    (run, *_), = _runs(fleet.db)
    action = _actions(fleet)[-1]
    assert action[2:4] == ("withheld", "b2")
    assert action[5].startswith(f"rebalance run {run} is unfinished (running): carrying this plan out is refused")
    assert sum(1 for a in _actions(fleet) if a[5] == action[5]) == 1  # said once, however many rounds
    fleet.ok("rebalance", "--abort")


def test_a_proposal_refused_when_carried_out_keeps_the_reason(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    fleet.ok("vm", "release", "b1")
    res = fleet("events", "apply", "1")
    assert res.exit_code == 3
    assert _actions(fleet)[1][2:4] == ("withheld", "b1")
    assert _actions(fleet)[1][5].startswith("proposal 1 not carried out: ")
    assert _runs(fleet.db) == []


def test_act_apply_killed_before_its_run_began_leaves_the_proposal_to_apply(fleet: Cli) -> None:
    res = fleet.process("watch", "--domstats-dir", str(FLEET), "--act", "apply", env={"VNUMA_FAILPOINT": "run-planned"})
    assert res.exit_code == -9, res.stderr
    assert _runs(fleet.db) == []
    assert fleet.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]["status"] == "proposed"
    fleet.ok("events", "apply", "1")
    assert _cells(fleet, "b1") == ("rdt", [1])


@pytest.mark.postgres
def test_propose_opt_out_and_events_apply_on_postgresql(pg_url: str) -> None:
    from tests.watch.conftest import make_fleet

    cli = Cli(pg_url)  # type: ignore[arg-type]
    cli.ok("db", "upgrade")
    make_fleet(cli)
    cli.ok("tenant", "update", "tenant-a", "--no-auto-move")
    cli.ok("watch", "--domstats-dir", str(FLEET), "--act", "propose", "--allow-migrate")
    # event 3: b1's migration is in b1's cooldown (from its proposal), then a1's withheld for tenant-a
    assert [a[2:4] for a in _actions(cli)] == [("proposed", "b1"), ("withheld", None), ("withheld", "b2"),
                                               ("withheld", "b2")]
    assert "tenant tenant-a opted out" in _actions(cli)[-1][5]
    cli.ok("events", "apply", "1")
    assert _cells(cli, "b1") == ("rdt", [1])
    action = cli.ok("events", "--vm", "b1", "--json").json()[0]["actions"][0]
    assert (action["status"], action["run"]) == ("applied", 1)
    assert cli("events", "apply", "1").exit_code == 9


def test_events_apply_is_a_sub_command_and_the_listing_keeps_its_options(fleet: Cli) -> None:
    from vnuma.cli import _load

    group = _load("events")
    assert list(group.commands) == ["apply"]  # type: ignore[attr-defined]
    assert [p.name for p in group.commands["apply"].params if p.param_type_name == "argument"] == ["proposal"]  # type: ignore[attr-defined]
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    listed = fleet.ok("events", "--since", "3650d", "--vm", "b1", "--json").json()
    assert [e["id"] for e in listed] == [1]
    res = fleet("events", "repin", "1")
    assert (res.exit_code, res.stdout) == (2, "")
    assert "No such command 'repin'" in res.stderr
    res = fleet("events", "apply", "1", "--allow-migrate", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["proposal"] == 1
