"""``vnuma watch``'s history: its samples with bounded retention, and its events (SQL text on any
:class:`Executor`, SQLite and PostgreSQL alike).

A round is written inside its caller's one transaction: :func:`write_round`
(every host's samples and last reading, the events the round opens and
closes, each also an audit log entry), then :func:`prune`, the retention: raw samples older than the raw window (cut at
a whole minute) become one-minute means per subject and are deleted, and
means older than their days are deleted. A killed writer leaves the round
whole or absent, never half: the transaction is the round.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from vnuma.inventory import audit
from vnuma.inventory.executor import Executor


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One sample (see :class:`vnuma.inventory.models.WatchSample`)."""

    at_ms: int
    kind: str
    host: str
    subject: str = ""
    item: int = -1
    local_bps: int | None = None
    total_bps: int | None = None
    llc_bytes: int | None = None
    cpu: float | None = None
    free_kib: int | None = None
    drift_kib: int | None = None
    flags: str = ""
    minute: bool = False
    rss_kib: int | None = None
    balloon_kib: int | None = None


@dataclass(frozen=True, slots=True)
class Opened:
    """An event to open: its rule and subject, when, and its evidence."""

    rule: str
    host: str
    vm: str | None
    cell: int | None
    at_ms: int
    evidence: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Event:
    """A stored event."""

    id: int
    rule: str
    host: str
    vm: str | None
    cell: int | None
    opened_ms: int
    closed_ms: int | None
    evidence: list[dict[str, Any]]


_COLUMNS = ("at_ms", "minute", "kind", "host", "subject", "item", "local_bps", "total_bps", "llc_bytes", "cpu",
            "free_kib", "drift_kib", "flags", "rss_kib", "balloon_kib")
_MEANS = (
    f"INSERT INTO watch_samples ({', '.join(_COLUMNS)}) "
    "SELECT (at_ms / 60000) * 60000, :t, kind, host, subject, item, CAST(AVG(local_bps) AS BIGINT), "
    "CAST(AVG(total_bps) AS BIGINT), CAST(AVG(llc_bytes) AS BIGINT), AVG(cpu), CAST(AVG(free_kib) AS BIGINT), "
    "CAST(AVG(drift_kib) AS BIGINT), '', CAST(AVG(rss_kib) AS BIGINT), CAST(AVG(balloon_kib) AS BIGINT) "
    "FROM watch_samples "
    "WHERE minute = :f AND at_ms < :cut AND kind <> 'round' GROUP BY at_ms / 60000, kind, host, subject, item"
)
_DROP_RAW = "DELETE FROM watch_samples WHERE minute = :f AND at_ms < :cut"
_DROP_MEANS = "DELETE FROM watch_samples WHERE minute = :t AND at_ms < :cut"
_OPEN = ("INSERT INTO watch_events (rule, host, vm, cell, opened_ms, closed_ms, evidence) "
         "VALUES (:rule, :host, :vm, :cell, :at, NULL, :evidence) RETURNING id")
_MOMENT = ("INSERT INTO watch_events (rule, host, vm, cell, opened_ms, closed_ms, evidence) "
           "VALUES (:rule, :host, :vm, :cell, :at, :at, :evidence) RETURNING id")
_CLOSE = "UPDATE watch_events SET closed_ms = :at WHERE id = :id AND closed_ms IS NULL"
_EVENT_COLUMNS = "id, rule, host, vm, cell, opened_ms, closed_ms, evidence"


_VALUES = attrgetter(*_COLUMNS)


def write_round(
    x: Executor, readings: Sequence[tuple[str, int, Mapping[str, Any]]], rows: Iterable[HistoryRow],
    opened: Sequence[Opened], closed: Sequence[tuple[int, int]],
) -> list[int]:
    """Write a round: each host's reading (host, at ms, stats by VM) replacing its last, the samples, the
    events opened and closed (``closed``: (event id, at ms)); the ids of the opened events, in order. A few
    statements whatever the number of hosts; the caller then applies the retention (:func:`prune`) in the
    same transaction."""
    x.many("DELETE FROM watch_readings WHERE host = :host", [{"host": host} for host, _, _ in readings])
    x.many("INSERT INTO watch_readings (host, at_ms, domains) VALUES (:host, :at, :domains)",
           [{"host": host, "at": at_ms, "domains": json.dumps(domains, separators=(",", ":"))}
            for host, at_ms, domains in readings])
    x.insert("watch_samples", _COLUMNS, [_VALUES(r) for r in rows])
    ids = []
    for e in opened:
        found = x.one(_OPEN, {"rule": e.rule, "host": e.host, "vm": e.vm, "cell": e.cell, "at": e.at_ms,
                              "evidence": json.dumps(list(e.evidence), separators=(",", ":"))})
        assert found is not None
        ids.append(int(found[0]))
        audit.record(x, "watch-event-opened", event=ids[-1], rule=e.rule, host=e.host, vm=e.vm, cell=e.cell)
    for event_id, at_ms in closed:
        x.run(_CLOSE, {"id": event_id, "at": at_ms})
        rule, host, vm, cell = x.one("SELECT rule, host, vm, cell FROM watch_events WHERE id = :id",
                                     {"id": event_id}) or (None, None, None, None)
        audit.record(x, "watch-event-closed", event=event_id, rule=rule, host=host, vm=vm, cell=cell)
    return ids


def record_moment(x: Executor, e: Opened) -> int:
    """Write an event that opens and closes at once (the watch's ``device-health``: a taint it gave, a fact
    and not a condition that clears), each in the audit log; its id."""
    found = x.one(_MOMENT, {"rule": e.rule, "host": e.host, "vm": e.vm, "cell": e.cell,
                                                 "at": e.at_ms,
                                                 "evidence": json.dumps(list(e.evidence), separators=(",", ":"))})
    assert found is not None
    event_id = int(found[0])
    audit.record(x, "watch-event-opened", event=event_id, rule=e.rule, host=e.host, vm=e.vm, cell=e.cell)
    audit.record(x, "watch-event-closed", event=event_id, rule=e.rule, host=e.host, vm=e.vm, cell=e.cell)
    return event_id


def cuts(now_ms: int, raw_s: int, minutes_days: int) -> tuple[int, int]:
    """The retention's two cuts at ``now_ms``: raw samples before the first become one-minute means (the raw
    window, cut at a whole minute), means before the second are dropped."""
    return (now_ms - raw_s * 1000) // 60000 * 60000, now_ms - minutes_days * 86_400_000


def prune(x: Executor, now_ms: int, raw_s: int, minutes_days: int) -> tuple[int, int]:
    """Raw samples older than ``raw_s`` (cut at a whole minute) to one-minute means, means older than
    ``minutes_days`` dropped; the two cuts (:func:`cuts`)."""
    cut, old = cuts(now_ms, raw_s, minutes_days)
    flags = {"t": True, "f": False}
    x.run(_MEANS, {**flags, "cut": cut})
    x.run(_DROP_RAW, {**flags, "cut": cut})
    x.run(_DROP_MEANS, {**flags, "cut": old})
    return cut, old


def domain_means(x: Executor, from_ms: int) -> list[tuple[str, int, int, int, bool]]:
    """The L3 domains' one-minute means from ``from_ms`` on (host, domain, at ms, total, True), in time order:
    what the retention just wrote, for :class:`vnuma.watch.peaks.Peaks`."""
    rows = x.rows("SELECT host, item, at_ms, total_bps FROM watch_samples WHERE minute = :t AND at_ms >= :at "
                  "AND kind = 'domain' ORDER BY at_ms, host, item", {"t": True, "at": from_ms})
    return [(str(h), int(i), int(at), int(bps or 0), True) for h, i, at, bps in rows]


def peak_rows(x: Executor) -> tuple[list[tuple[str, int, int, int, bool]], int]:
    """The L3 domains' kept rows that a domain's peak can still come from (host, domain, at ms, total,
    minute): per domain and kind, each higher than every later one (:class:`vnuma.watch.peaks.Peaks` keeps no
    other), in time order; and where the next minute's means start (ms: after the last mean kept, 0: none)."""
    rows = x.rows(
        "SELECT host, item, at_ms, total, minute FROM (SELECT host, item, at_ms, COALESCE(total_bps, 0) AS total, "
        "minute, MAX(COALESCE(total_bps, 0)) OVER (PARTITION BY host, item, minute ORDER BY at_ms DESC, id DESC "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS later FROM watch_samples WHERE kind = 'domain') s "
        "WHERE later IS NULL OR total > later ORDER BY at_ms, host, item")
    last = x.one("SELECT MAX(at_ms) FROM watch_samples WHERE minute = :t", {"t": True})
    after = int(last[0]) + 60000 if last is not None and last[0] is not None else 0
    return [(str(h), int(i), int(at), int(t), bool(m)) for h, i, at, t, m in rows], after


def recent_flags(x: Executor, last: int) -> dict[tuple[str, str, str, int], list[str]]:
    """Per VM or cell subject (kind, host, subject, item): the flags of its ``last`` raw samples, oldest
    first."""
    rows = x.rows(
        "SELECT kind, host, subject, item, flags FROM (SELECT kind, host, subject, item, flags, at_ms, "
        "ROW_NUMBER() OVER (PARTITION BY kind, host, subject, item ORDER BY at_ms DESC) AS back "
        "FROM watch_samples WHERE minute = :f AND kind IN ('vm', 'cell')) AS r WHERE back <= :last "
        "ORDER BY kind, host, subject, item, at_ms",
        {"f": False, "last": last},
    )
    out: dict[tuple[str, str, str, int], list[str]] = {}
    for kind, host, subject, item, flags in rows:
        out.setdefault((str(kind), str(host), str(subject), int(item)), []).append(str(flags))
    return out


def subject_samples(x: Executor, kind: str, host: str, subject: str, item: int, last: int) -> list[HistoryRow]:
    """A subject's ``last`` raw samples, oldest first."""
    rows = x.rows(
        f"SELECT {', '.join(_COLUMNS)} FROM watch_samples WHERE minute = :f AND kind = :kind AND host = :host "
        "AND subject = :subject AND item = :item ORDER BY at_ms DESC LIMIT :last",
        {"f": False, "kind": kind, "host": host, "subject": subject, "item": item, "last": last},
    )
    return [_row(r) for r in reversed(rows)]


def _row(r: Sequence[Any]) -> HistoryRow:
    d = dict(zip(_COLUMNS, r, strict=True))
    d["minute"] = bool(d["minute"])
    return HistoryRow(**d)


def samples_since(x: Executor, since_ms: int, vm: str | None = None) -> list[HistoryRow]:
    """Every VM and L3 domain sample (raw and minute means) from ``since_ms``, or ``vm``'s only, by time."""
    where = "at_ms >= :since AND kind IN ('vm', 'domain')" + (" AND kind = 'vm' AND subject = :vm" if vm else "")
    rows = x.rows(f"SELECT {', '.join(_COLUMNS)} FROM watch_samples WHERE {where} ORDER BY at_ms, kind, host, "
                  "subject, item", {"since": since_ms, "vm": vm})
    return [_row(r) for r in rows]


def last_readings(x: Executor) -> dict[str, tuple[int, dict[str, dict[str, object]]]]:
    """Each host's last reading written: when (ms), and its VMs' stats by name."""
    return {str(h): (int(at), json.loads(str(d))) for h, at, d in x.rows(
        "SELECT host, at_ms, domains FROM watch_readings")}


def _event(r: Sequence[Any]) -> Event:
    return Event(int(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3]),
                 None if r[4] is None else int(r[4]), int(r[5]), None if r[6] is None else int(r[6]),
                 json.loads(str(r[7])))


def open_events(x: Executor) -> list[Event]:
    """Every event not closed, by id."""
    return [_event(r) for r in x.rows(
        f"SELECT {_EVENT_COLUMNS} FROM watch_events WHERE closed_ms IS NULL ORDER BY id")]


def events(x: Executor, since_ms: int | None = None, vm: str | None = None) -> list[Event]:
    """Events open at or after ``since_ms`` (or still open), ``vm``'s only when given, by id."""
    where, params = [], {}
    if since_ms is not None:
        where.append("(opened_ms >= :since OR closed_ms IS NULL OR closed_ms >= :since)")
        params["since"] = since_ms
    if vm is not None:
        where.append("vm = :vm")
        params["vm"] = vm
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return [_event(r) for r in x.rows(f"SELECT {_EVENT_COLUMNS} FROM watch_events{clause} ORDER BY id", params)]
