"""`vnuma watch --domstats-dir` end to end through the CLI on the recorded fleet (tests/data/watch/fleet),
`vnuma events`, a restarted watch, and bad input."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.dbdump import dump
from tests.watch.conftest import FLEET, at, copy_rounds

EXPECTED = [
    ("noisy", "b1", None, at(7), at(17)),  # b1 streams from sample 5 to 14: 3 of 5 at 7, 3 quiet at 17
    ("cell-drift", None, 0, at(10), at(24)),  # 8 GiB gone from sample 8 to 21
    ("remote", "b2", None, at(22), None),  # memory-bound from sample 20, 60 % remote
]


def _events(cli: Cli) -> list[tuple[Any, ...]]:
    return [(e["rule"], e["vm"], e["cell"], e["opened_at"], e["closed_at"]) for e in cli.ok("events", "--json").json()]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_the_replay_opens_and_clears_what_persists_and_reports_what_it_skips(fleet: Cli) -> None:
    res = fleet.ok("watch", "--domstats-dir", str(FLEET), "--act", "off")
    assert _events(fleet) == EXPECTED
    assert res.stdout.splitlines() == [
        "event 1 opened: noisy VM b1 on host rdt", "event 2 opened: cell-drift cell 0 on host rdt",
        "event 1 closed: noisy VM b1 on host rdt", "event 3 opened: remote VM b2 on host rdt",
        "event 2 closed: cell-drift cell 0 on host rdt",
        "watch: 48 rounds written over 2 hosts, 3 events opened, 2 closed; stale: rdt2",
    ]
    assert res.stderr.count("domain 'not-ours' is no VM of the inventory") == 1  # reported once, not fatal
    assert "VM a2's counters went down (restarted): no rate this round" in res.stderr
    assert f"host rdt2 is stale: no reading since {at(17)} (40s)" in res.stderr  # 3 intervals after sample 17
    (noisy,) = fleet.ok("events", "--vm", "b1", "--json").json()
    assert [s["rules"] for s in noisy["evidence"]] == [[], [], ["noisy"], ["noisy"], ["noisy"]]
    assert noisy["evidence"][-1]["local_mb_s"] == 5700.0 and noisy["evidence"][-1]["remote_share"] == 0.05
    log = fleet.ok("log", "--json").json()[-1]
    assert [c["op"] for c in log["changes"]] == ["watch-event-opened"] * 2 + ["watch-event-closed",
                                                                                 "watch-event-opened",
                                                                                 "watch-event-closed"]
    assert log["changes"][2]["vm"] == "b1"


def test_a_counter_reset_gives_no_rate_and_no_rate_is_negative(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    a2 = _rows(fleet.db, "SELECT at_ms FROM watch_samples WHERE kind = 'vm' AND subject = 'a2' ORDER BY at_ms")
    samples = [(ms // 1000 - 1796601600) // 10 for (ms,) in a2]
    assert samples == [s for s in range(1, 30) if s != 12]  # none at the first reading, none at the restart
    assert _rows(fleet.db, "SELECT COUNT(*) FROM watch_samples WHERE local_bps < 0 OR total_bps < 0 OR cpu < 0") == [
        (0,)]
    b2 = _rows(fleet.db, "SELECT local_bps, total_bps FROM watch_samples WHERE kind = 'vm' AND subject = 'b2' "
                         "ORDER BY at_ms DESC LIMIT 1")
    assert b2 == [(1_200_000_000, 3_000_000_000)]


def test_each_vms_last_sample_feeds_the_bandwidth_rebalance(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    kept = _rows(fleet.db, "SELECT v.name, s.taken_at, s.interval_ms FROM bandwidth_samples s "
                           "JOIN vms v ON v.id = s.vm_id ORDER BY v.name")
    assert kept == [(vm, at(29), 10000) for vm in ("a1", "a2", "b1", "b2")] + [("c1", at(17), 10000)]
    plan = fleet.ok("rebalance", "--objective", "bandwidth", "--max-moves", "1", "--json").json()
    assert plan["objective"] == "bandwidth"


def test_a_restarted_watch_continues_where_it_stopped(fleet: Cli, tmp_path: Path) -> None:
    fleet.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "first", lambda s: s <= 15)))
    assert [e[:2] for e in _events(fleet)] == [("noisy", "b1"), ("cell-drift", None)]
    fleet.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "rest", lambda s: s > 15)))
    assert _events(fleet) == EXPECTED  # same times: the tracks and the last readings came from the inventory


def test_replaying_what_the_history_already_holds_is_refused_and_writes_nothing(fleet: Cli) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    before = dump(fleet.db)
    res = fleet("watch", "--domstats-dir", str(FLEET))
    assert res.exit_code == 4 and "the clock went backwards; nothing written" in res.stderr
    assert res.stderr.startswith("error: host rdt: the recording starts at")
    assert dump(fleet.db) == before


@pytest.mark.parametrize(("name", "text", "message"), [
    ("rdt@1796601700.txt", "Domain: 'a1'\n  garbage\n", "rdt@1796601700.txt: line 2: expected"),
    ("rdt@1796601700.freepages.txt", "Node 0:\n4KiB: lots\n", "rdt@1796601700.freepages.txt: line 2: expected"),
    ("rdt-at-noon.txt", "Domain: 'a1'\n", "rdt-at-noon.txt: not a recorded round's name"),
    ("rdt@1796601700.0.txt", "Domain: 'a1'\n", "host rdt has two recordings at 1796601700"),
], ids=["domstats", "freepages", "name", "twice"])
def test_a_malformed_recording_refuses_the_replay_and_nothing_is_written(
    fleet: Cli, tmp_path: Path, name: str, text: str, message: str,
) -> None:
    rounds = copy_rounds(tmp_path / "rounds", lambda s: True)
    (rounds / name).write_text(text)
    before = dump(fleet.db)
    res = fleet("watch", "--domstats-dir", str(rounds))
    assert res.exit_code == 4 and res.stderr.startswith("error: ") and message in res.stderr
    assert "Traceback" not in res.stderr
    assert dump(fleet.db) == before


def test_hosts_the_inventory_does_not_hold_are_reported_not_fatal(fleet: Cli, tmp_path: Path) -> None:
    rounds = copy_rounds(tmp_path / "rounds", lambda s: s < 3)
    (rounds / "elsewhere@1796601600.txt").write_text("Domain: 'x'\n  cpu.time=1\n")
    res = fleet.ok("watch", "--domstats-dir", str(rounds))
    assert "warning: host elsewhere is not in the inventory: its readings are skipped" in res.stderr
    assert "watch: 6 rounds written (1 skipped) over 2 hosts" in res.stdout


def test_only_the_hosts_asked(fleet: Cli) -> None:
    res = fleet.ok("watch", "--domstats-dir", str(FLEET), "--hosts", "rdt2")
    assert "watch: 18 rounds written over 1 hosts, 0 events opened" in res.stdout
    missing = fleet("watch", "--domstats-dir", str(FLEET), "--hosts", "rdt,nope")
    assert missing.exit_code == 3 and "host 'nope' is not in the inventory" in missing.stderr


def test_an_unknown_act_mode_is_refused(fleet: Cli) -> None:
    before = dump(fleet.db)
    res = fleet("watch", "--domstats-dir", str(FLEET), "--act", "sometimes")
    assert res.exit_code == 2 and "--act sometimes: expected one of off, propose, apply" in res.stderr
    assert dump(fleet.db) == before


@pytest.mark.parametrize(("table", "message"), [
    ("remote_share = 1.5", "remote_share: 1.5 is out of range (0 to 0.99)"),
    ("k = 4\nn = 3", "k (4) must not exceed n (3)"),
    ("m = 1", "m (1) must be at least n - k + 1 (3)"),
    ("history = \"soon\"", "history: expected a time"),
    ("cell_drift = 12", "cell_drift: expected a size"),
    ("loudness = 3", "unknown key 'loudness'"),
    ("[watch.tenants.tenant-a]\ncapped = 0", "[watch.tenants.tenant-a] capped: 0 is out of range"),
], ids=["range", "k-over-n", "m-too-small", "time", "size", "unknown", "tenant"])
def test_thresholds_out_of_range_are_one_clear_error_and_nothing_is_written(
    fleet: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, message: str,
) -> None:
    config = tmp_path / "vnuma.toml"
    config.write_text(f"[watch]\n{table}\n")
    monkeypatch.setenv("VNUMA_CONFIG", str(config))
    before = dump(fleet.db)
    res = fleet("watch", "--domstats-dir", str(FLEET))
    assert res.exit_code == 4 and res.stderr.startswith(f"error: {config}: [watch") and message in res.stderr
    assert dump(fleet.db) == before


def test_thresholds_from_the_file_change_what_is_detected(fleet: Cli, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "vnuma.toml"
    config.write_text('[watch]\nk = 1\nn = 1\nm = 1\ncell_drift = "16GiB"\n[watch.tenants.tenant-b]\n'
                      "remote_share = 0.7\n")
    monkeypatch.setenv("VNUMA_CONFIG", str(config))
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    # One sample opens and one clears; the drift (9 GiB) is under 16 GiB; b2's 60 % remote under tenant-b's 70 %.
    assert _events(fleet) == [("noisy", "b1", None, at(5), at(15))]


def test_the_history_prints_and_draws_per_vm_and_per_domain(fleet: Cli, tmp_path: Path) -> None:
    fleet.ok("watch", "--domstats-dir", str(FLEET))
    doc = fleet.ok("stats", "--bandwidth", "--since", "2026-12-06", "--json").json()
    assert [(s["vm"], s["host"], len(s["points"])) for s in doc["vms"]] == [
        ("a1", "rdt", 29), ("a2", "rdt", 28), ("b1", "rdt", 29), ("b2", "rdt", 29), ("c1", "rdt2", 17)]
    b2 = doc["vms"][3]["points"]
    assert (b2[18]["remote_share"], b2[19]["remote_share"]) == (0.05, 0.6)  # samples 19 and 20
    assert b2[19] == {"at": at(20), "mean": False, "local_mb_s": 1200.0, "remote_mb_s": 1800.0,
                      "remote_share": 0.6, "llc_bytes": 3_145_728, "cpu": 1.5, "rss_kib": None,
                      "balloon_kib": None}  # recorded with --memory --cpu-total: no balloon keys
    assert [(s["host"], s["domain"], max(p["total_mb_s"] for p in s["points"])) for s in doc["domains"]] == [
        ("rdt", 0, 7020.0), ("rdt", 1, 3000.0), ("rdt2", 0, 200.0)]
    picture = tmp_path / "b2.svg"
    res = fleet.ok("stats", "--bandwidth", "--since", "2026-12-06", "--vm", "b2", "--svg", str(picture))
    assert f"{at(20)}  1200.0" in res.stdout.replace("       ", "  ")
    svg = picture.read_text()
    assert "VM b2 on rdt" in svg and "VM b1" not in svg and svg.count("<path") + svg.count("<polyline") >= 2
    whole = tmp_path / "all.svg"
    fleet.ok("stats", "--bandwidth", "--since", "2026-12-06", "--svg", str(whole))
    assert "host rdt L3 domain 1" in whole.read_text()


def test_history_bad_input(fleet: Cli) -> None:
    assert fleet("stats", "--since", "1h").exit_code == 2
    gone = fleet("stats", "--bandwidth", "--since", "1h", "--vm", "a1")
    assert gone.exit_code == 3 and "VM 'a1' has no sample in the watch's history" in gone.stderr
    bad = fleet("stats", "--bandwidth", "--since", "yesterday")
    assert bad.exit_code == 4 and "bad --since 'yesterday'" in bad.stderr


@pytest.mark.postgres
def test_the_replay_and_a_restart_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    from tests.watch.conftest import make_fleet

    cli = Cli(pg_url)  # type: ignore[arg-type]
    cli.ok("db", "upgrade")
    make_fleet(cli)
    cli.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "first", lambda s: s <= 15)))
    cli.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "rest", lambda s: s > 15)))
    assert _events(cli) == EXPECTED
    doc = cli.ok("stats", "--bandwidth", "--since", "2026-12-06", "--vm", "b2", "--json").json()
    assert len(doc["vms"][0]["points"]) == 29


def test_an_open_event_of_a_vm_that_left_closes_with_its_hosts_next_round(fleet: Cli, tmp_path: Path) -> None:
    fleet.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "first", lambda s: s <= 25)))
    assert _events(fleet)[-1] == ("remote", "b2", None, at(22), None)
    fleet.ok("vm", "release", "b2")
    res = fleet.ok("watch", "--domstats-dir", str(copy_rounds(tmp_path / "rest", lambda s: s == 26)))
    assert "event 3 closed: remote VM b2 on host rdt" in res.stdout
    assert _events(fleet)[-1] == ("remote", "b2", None, at(22), at(26))


def _with_balloon(dest: Path) -> Path:
    """The recorded fleet as if saved with `virsh domstats --memory --cpu-total --balloon`: VM b2 on rdt
    reports its balloon (2 GiB) and its resident memory (1 GiB + 1 MiB per sample); the other VMs report none."""
    rounds = copy_rounds(dest, lambda s: True)
    for path in rounds.glob("rdt@*.txt"):
        if path.name.endswith(".freepages.txt"):
            continue
        sample = (int(path.name.split("@")[1].split(".")[0]) - 1796601600) // 10
        balloon = f"  balloon.current=2097152\n  balloon.maximum=2097152\n  balloon.rss={1_048_576 + 1024 * sample}\n"
        path.write_text(path.read_text().replace("Domain: 'b2'\n", "Domain: 'b2'\n" + balloon))
    return rounds


def test_balloon_keys_of_a_recording_are_kept_per_vm_and_printed(fleet: Cli, tmp_path: Path) -> None:
    fleet.ok("watch", "--domstats-dir", str(_with_balloon(tmp_path / "balloon")), "--act", "off")
    b2 = _rows(fleet.db, "SELECT at_ms, rss_kib, balloon_kib FROM watch_samples WHERE kind = 'vm' AND subject = 'b2' "
                         "ORDER BY at_ms")
    assert [(rss, size) for _, rss, size in b2] == [(1_048_576 + 1024 * s, 2_097_152) for s in range(1, 30)]
    assert _rows(fleet.db, "SELECT COUNT(*) FROM watch_samples WHERE subject <> 'b2' AND "
                           "(rss_kib IS NOT NULL OR balloon_kib IS NOT NULL)") == [(0,)]
    doc = fleet.ok("stats", "--bandwidth", "--since", "2026-12-06", "--vm", "b2", "--json").json()
    assert doc["vms"][0]["points"][19] | {"rss_kib": 0} == {
        "at": at(20), "mean": False, "local_mb_s": 1200.0, "remote_mb_s": 1800.0, "remote_share": 0.6,
        "llc_bytes": 3_145_728, "cpu": 1.5, "rss_kib": 0, "balloon_kib": 2_097_152}  # the rest as without
    assert doc["vms"][0]["points"][19]["rss_kib"] == 1_048_576 + 1024 * 20
    table = fleet.ok("stats", "--bandwidth", "--since", "2026-12-06", "--vm", "b2").stdout
    (row,) = [line for line in table.splitlines() if line.startswith(at(20))]
    assert "RSS" in table and "BALLOON" in table and row.endswith("1.50  1.0 GiB  2 GiB"), table
    whole = fleet.ok("stats", "--bandwidth", "--since", "2026-12-06").stdout
    (a1,) = [line for line in whole.splitlines() if line.startswith("a1 ")]
    assert a1.rstrip().endswith("-")  # a1 reported no resident memory
