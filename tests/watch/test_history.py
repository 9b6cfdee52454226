"""The watch's history in the inventory, on SQLite and PostgreSQL: one round per transaction, retention that
bounds the table (raw samples for the window, one-minute means for days, older dropped), events."""

from __future__ import annotations

from vnuma.inventory import history, upgrade
from vnuma.inventory.access import open_access
from vnuma.inventory.history import HistoryRow, Opened

RAW_S = 120
DAYS = 1
STEP_MS = 10_000


def _round(x, at_ms: int, total: int) -> None:  # type: ignore[no-untyped-def]
    rows = [HistoryRow(at_ms, "round", "h1"),
            HistoryRow(at_ms, "vm", "h1", "v", -1, total // 2, total, 4096, 1.0, rss_kib=total, balloon_kib=8192),
            HistoryRow(at_ms, "domain", "h1", "", 0, None, total, 4096)]
    history.write_round(x, [("h1", at_ms, {"v": {"cpu.time": at_ms}})], rows, [], [])
    history.prune(x, at_ms, RAW_S, DAYS)


def _counts(x) -> dict[tuple[str, bool], int]:  # type: ignore[no-untyped-def]
    return {(str(k), bool(m)): int(n) for k, m, n in x.rows(
        "SELECT kind, minute, COUNT(*) FROM watch_samples GROUP BY kind, minute")}


def test_retention_bounds_the_table_and_keeps_minute_means(url: str) -> None:
    upgrade(url)
    with open_access(url) as access:
        for i in range(60):  # ten minutes, a round every ten seconds; the VM alternates 1000 and 3000 B/s
            with access.begin(True) as x:
                _round(x, i * STEP_MS, 1000 if i % 2 else 3000)
                raw = _counts(x).get(("vm", False), 0)
                assert raw <= RAW_S * 1000 // STEP_MS + 60_000 // STEP_MS  # the window and one partial minute
        with access.begin(False) as x:
            counts = _counts(x)
            means = x.rows("SELECT at_ms, total_bps, local_bps, cpu, rss_kib, balloon_kib FROM watch_samples "
                           "WHERE minute = :t AND "
                           "kind = 'vm' ORDER BY at_ms", {"t": True})
        # At 590 s the raw window reaches back to 470 s, cut at the minute: raw from 420 s, means before it.
        assert counts[("vm", False)] == 18 and counts[("round", False)] == 18
        assert [m[0] for m in means] == [k * 60_000 for k in range(7)]
        assert all(m[1:] == (2000, 1000, 1.0, 2000, 8192) for m in means)
        assert ("round", True) not in counts  # round marks are not averaged
        with access.begin(True) as x:  # a day and 30 s later: the raw rows are means, the first minute's is gone
            _round(x, 86_400_000 + 30_000, 5000)
            counts = _counts(x)
            kept = x.rows("SELECT at_ms FROM watch_samples WHERE minute = :t AND kind = 'vm' ORDER BY at_ms",
                          {"t": True})
        assert counts[("vm", False)] == 1
        assert [m[0] for m in kept] == [k * 60_000 for k in range(1, 10)]


def test_events_open_close_and_list_with_their_evidence(url: str) -> None:
    upgrade(url)
    with open_access(url) as access:
        with access.begin(True) as x:
            (first,) = history.write_round(
                x, [("h1", 1000, {})], [HistoryRow(1000, "round", "h1")],
                [Opened("remote", "h1", "v", None, 1000, [{"at": "t", "remote_share": 0.6}])], [])
            history.write_round(x, [("h1", 2000, {})], [], [Opened("cell-drift", "h1", None, 1, 2000, [])], [])
        with access.begin(True) as x:
            history.write_round(x, [("h1", 3000, {})], [], [], [(first, 3000)])
        with access.begin(False) as x:
            every = history.events(x)
            still = history.open_events(x)
            mine = history.events(x, vm="v")
            later = history.events(x, since_ms=2500)
            (reading,) = history.last_readings(x).items()
            log = x.rows("SELECT changes FROM audit_log ORDER BY id")
    assert [(e.rule, e.vm, e.cell, e.opened_ms, e.closed_ms) for e in every] == [
        ("remote", "v", None, 1000, 3000), ("cell-drift", None, 1, 2000, None)]
    assert every[0].evidence == [{"at": "t", "remote_share": 0.6}]
    assert [e.rule for e in still] == ["cell-drift"] and [e.rule for e in mine] == ["remote"]
    assert [e.rule for e in later] == ["remote", "cell-drift"]  # closed after, and still open
    assert reading == ("h1", (3000, {}))  # the last reading replaces the one before
    assert ['"op": "watch-event-closed"' in str(c) for (c,) in log] == [False, False, True]
