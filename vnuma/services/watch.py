"""``vnuma watch``: every round, each host's reading becomes figures, verdicts, events and history.

Per host reading (:mod:`.watchinput`): the pure figures and rules
(:mod:`vnuma.watch`) against the host's previous reading and the inventory's
view (placements, each cell's free pages), the hysteresis steps; then **one
transaction** writes the round (every host read in it; a replayed file is a
round of its host): per host its samples (a ``round`` mark, each VM, each
L3 domain, each cell), the events opened and closed (each in the audit log),
each VM's last sample for ``rebalance --objective bandwidth``, and the
retention. The in-memory state (tracks, peaks, open events, the previous
reading) moves on only once that transaction committed, and it is rebuilt
from the stored history when a watch starts (each host's last reading is kept
too): a restarted watch continues as if it had not stopped, its first rates
over the time since the last reading kept.

A reading that cannot be used (a host that does not answer, a clock that went
backwards) writes nothing for that host that round and is a note; the loop
goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vnuma.errors import NotFoundError
from vnuma.inventory import history
from vnuma.inventory.access import Access, open_access
from vnuma.inventory.history import HistoryRow, Opened
from vnuma.inventory.reading import fleet_view
from vnuma.inventory.samples import Sample, record_samples
from vnuma.inventory.warm import read_marks
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement
from vnuma.report.usage import cell_use
from vnuma.services import Settings
from vnuma.services.watchlease import LEASE_MIN_S, Lease
from vnuma.topology import Host, gc_paused
from vnuma.watch.figures import ClockError, Reading, RoundFigures, figures, remote
from vnuma.watch.hysteresis import Track, rebuilt, step
from vnuma.watch.peaks import Peaks
from vnuma.watch.rules import RULES, Signal, Thresholds, peaks_with, signals

Key = tuple[str, str, str, int]


@dataclass(frozen=True, slots=True)
class Change:
    """An event a round opened or closed."""

    what: str  # "opened" | "closed"
    event: int
    rule: str
    host: str
    vm: str | None
    cell: int | None

    def line(self) -> str:
        subject = f"VM {self.vm}" if self.vm else f"cell {self.cell}"
        return f"event {self.event} {self.what}: {self.rule} {subject} on host {self.host}"


@dataclass(slots=True)
class RoundResult:
    """What one host's round did: written or not, the events it changed, notes for the operator."""

    host: str
    at: float
    written: bool
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Ready:
    """A host's round, decided and ready to write: what the transaction writes and the state it moves to."""

    reading: Reading
    fig: RoundFigures
    result: RoundResult
    tracks: dict[tuple[str, str, str, int], Track]
    rows: list[HistoryRow]
    opened: list[tuple[str, str, str, int]]
    closed: list[tuple[str, str, str, int]]
    at_ms: int
    kept: dict[str, Any]


_COUNTERS = ("cpu.time", "memory.bandwidth.monitor.")


def _counted(stats: Any) -> dict[str, object]:
    """What the next round's rates need of a domain's stats (its counters), as a host's last reading keeps it."""
    return {k: v for k, v in stats.items() if k.startswith(_COUNTERS)}  # (libvirt has no other cpu.time* key)


def iso(at: float) -> str:
    """``at`` (Unix seconds) as an ISO time, UTC."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _free(hosts: Sequence[Host], placements: Sequence[Placement], tenants: Any) -> dict[str, dict[int, dict[int, int]]]:
    fleet = Fleet(hosts, placements, tenants)
    return {h.name: {c.cell: {p.size_kib: p.total - p.claimed for p in c.pools}
                     for c in cell_use(fleet, h.name, largest=False)} for h in hosts}


def _vm_row(at_ms: int, host: str, v: Any, flags: str) -> HistoryRow:
    return HistoryRow(at_ms, "vm", host, v.vm, -1, v.rate.local_bps, v.rate.total_bps, v.llc_bytes,
                      None if v.cpu is None else round(v.cpu, 4), flags=flags, rss_kib=v.rss_kib,
                      balloon_kib=v.balloon_kib)


def rows_of(fig: RoundFigures, verdicts: Iterable[Signal]) -> list[HistoryRow]:
    """The samples of a round: its mark, each VM (with the rules true for it), each domain, each cell."""
    at_ms = round(fig.at * 1000)
    true: dict[tuple[str, int], list[str]] = {}
    for s in verdicts:
        if s.true:
            true.setdefault((s.vm or "", -1 if s.cell is None else s.cell), []).append(s.rule)
    rows = [HistoryRow(at_ms, "round", fig.host, cpu=fig.elapsed_s)]
    rows += [_vm_row(at_ms, fig.host, v, ",".join(true.get((v.vm, -1), []))) for v in fig.vms]
    rows += [HistoryRow(at_ms, "domain", fig.host, "", d.domain, total_bps=d.total_bps, llc_bytes=d.llc_bytes)
             for d in fig.domains]
    rows += [HistoryRow(at_ms, "cell", fig.host, "", c.cell, free_kib=c.host_free_kib, drift_kib=c.drift_kib,
                        flags=",".join(true.get(("", c.cell), []))) for c in fig.cells]
    return rows


def vm_point(row: HistoryRow) -> dict[str, Any]:
    """A VM's stored sample as events and the history print it (MB/s: 10^6 bytes/s; memory in KiB, None: not
    reported)."""
    local = row.local_bps or 0
    far, share = remote(local, row.total_bps or 0)
    return {"local_mb_s": round(local / 1e6, 1), "remote_mb_s": round(far / 1e6, 1),
            "remote_share": None if share is None else round(share, 3), "llc_bytes": row.llc_bytes, "cpu": row.cpu,
            "rss_kib": row.rss_kib, "balloon_kib": row.balloon_kib}


def evidence(row: HistoryRow) -> dict[str, Any]:
    """A sample as an event's evidence keeps it."""
    out: dict[str, Any] = {"at": iso(row.at_ms / 1000)}
    if row.kind == "vm":
        out |= vm_point(row)
    else:
        out |= {"host_free_kib": row.free_kib, "drift_kib": row.drift_kib}
    return out | {"rules": [r for r in row.flags.split(",") if r]}


class Watch:
    """The loop's state between rounds, rebuilt from the inventory (see the module docstring)."""

    def __init__(self, settings: Settings, thresholds: Thresholds, hosts: Sequence[str] | None = None, *,
                 lease_s: float = LEASE_MIN_S) -> None:
        """Take the inventory's watch lease for ``lease_s`` after each round (:mod:`.watchlease`).

        Raises:
            NotFoundError: a host of ``hosts`` the inventory does not hold.
            LeaseError: another watch holds the lease.
        """
        self.t = thresholds
        self._access: Access = open_access(settings.db_url)
        self._lease = Lease(self._access, lease_s)
        try:
            self._lease.take()
        except BaseException:
            self._access.close()
            raise
        self._only = set(hosts) if hosts else None
        self.reported: set[tuple[str, str]] = set()
        self._mark: dict[str, tuple[int, int]] | None = None
        self.refresh()
        unknown = sorted((self._only or set()) - set(self.hosts))
        if unknown:
            self.close()
            raise NotFoundError(f"host {unknown[0]!r} is not in the inventory", hint="see `vnuma host list`")
        with self._access.begin(False) as x:
            opened = history.open_events(x)
            flags = history.recent_flags(x, max(self.t.n, self.t.m))
            self.peaks = Peaks()
            rows, self._means_from = history.peak_rows(x)
            self.peaks.load(rows)
            kept = history.last_readings(x)
        self.last = {host: at for host, (at, _) in kept.items()}
        self.previous = {host: Reading(host, at / 1000, stats) for host, (at, stats) in kept.items()}
        self.events: dict[Key, int] = {(e.rule, e.host, e.vm or "", -1 if e.cell is None else e.cell): e.id
                                       for e in opened}
        self.tracks: dict[Key, Track] = {}
        for (kind, host, subject, item), seq in flags.items():
            rules = ("cell-drift",) if kind == "cell" else tuple(r for r in RULES if r != "cell-drift")
            for rule in rules:
                key = (rule, host, subject, item)
                self.tracks[key] = rebuilt([rule in f.split(",") for f in seq], key in self.events, self.t)

    def refresh(self, *, force: bool = False) -> None:
        """Read the inventory's placements, hosts and cells' free pages again, when a host or its VMs changed
        since they were read (a host's generation moved, as for a serving process's warm ledger), or ``force``."""
        with self._access.begin(False) as x:
            mark = read_marks(x)
            if mark == self._mark and not force:
                return
            snap = fleet_view(x).snapshot
        self._mark = mark
        self.placements = {p.vm: p for p in snap.placements}
        self.on_host: dict[str, dict[str, Placement]] = {}
        for p in snap.placements:
            self.on_host.setdefault(p.host, {})[p.vm] = p
        self.hosts = {h.name: h for h in snap.hosts if self._only is None or h.name in self._only}
        self.free = _free(list(self.hosts.values()), [p for p in snap.placements if p.host in self.hosts],
                          snap.tenants)

    def hold(self, x: Any) -> None:
        """Renew this watch's lease in the caller's transaction, as each round does: what the watch writes outside
        its rounds (``--health-dir``'s taints and events) is written only while it holds the lease.

        Raises:
            LeaseError: another watch took the lease (the transaction writes nothing).
        """
        self._lease.renew(x)

    def close(self) -> None:
        """Free the lease and the inventory."""
        self._lease.release()
        self._access.close()

    def run_round(self, readings: Sequence[Reading]) -> list[RoundResult]:
        """One round of the hosts of ``readings`` (see the module docstring), written in one transaction; a
        reading that cannot be used is a note, and the others are written."""
        with gc_paused():  # the round's many small objects live until it is written: no cycle scans of the fleet
            return self._round(readings)

    def _round(self, readings: Sequence[Reading]) -> list[RoundResult]:
        results: list[RoundResult] = []
        ready: list[_Ready] = []
        open_vms: dict[str, list[Key]] = {}
        for key in self.events:
            if key[2]:
                open_vms.setdefault(key[1], []).append(key)
        for reading in readings:
            result = RoundResult(reading.host, reading.at, False)
            results.append(result)
            prepared = self._prepare(reading, result, open_vms.get(reading.host, []))
            if prepared is not None:
                ready.append(prepared)
        with self._access.begin(True) as x:
            self._lease.renew(x)  # the round is written only while this watch holds the lease
            if not ready:
                return results
            new = [Opened(*self._subject(k), r.at_ms, self._evidence(x, k, r.rows)) for r in ready for k in r.opened]
            ids = iter(history.write_round(
                x, [(r.result.host, r.at_ms, r.kept) for r in ready], [row for r in ready for row in r.rows], new,
                [(self.events[k], r.at_ms) for r in ready for k in r.closed]))
            record_samples(x, [s for r in ready for s in self._samples(r.fig)], audited=False)
            cuts = history.prune(x, max(r.at_ms for r in ready), self.t.history_s, self.t.minutes_days)
            means = history.domain_means(x, self._means_from)
        for r in ready:
            self._commit(r, [next(ids) for _ in r.opened])
        self.peaks.load(means)  # the peaks follow what the retention kept (vnuma.watch.peaks)
        self.peaks.expire(*cuts)
        self._means_from = max(self._means_from, cuts[0])
        return results

    def _prepare(self, reading: Reading, result: RoundResult, open_vms: list[Key]) -> _Ready | None:
        if reading.host not in self.hosts:
            if ("", reading.host) not in self.reported:
                self.reported.add(("", reading.host))
                result.notes.append(f"host {reading.host} is not in the inventory: its readings are skipped")
            return None
        try:
            fig = self._figures(reading)
        except ClockError as err:
            result.notes.append(str(err))
            return None
        for vm in fig.unknown:
            if (reading.host, vm) not in self.reported:
                self.reported.add((reading.host, vm))
                result.notes.append(f"host {reading.host}: domain {vm!r} is no VM of the inventory on this host: "
                                    "not measured")
        for vm in fig.resets:
            result.notes.append(f"host {reading.host}: VM {vm}'s counters went down (restarted): no rate this round")
        peaks = peaks_with({(reading.host, d.domain): self.peaks.peak((reading.host, d.domain)) for d in fig.domains},
                           (fig,))
        verdicts = signals(fig, self.placements, self.t, peaks)
        tracks, changes = self._steps(verdicts)
        return _Ready(
            reading, fig, result, tracks,
            rows_of(fig, verdicts), [k for k, c in changes if c == "open" and k not in self.events],
            [k for k, c in changes if c == "close" and k in self.events] + self._left(reading.host, open_vms),
            round(fig.at * 1000),
            {vm: _counted(stats) for vm, stats in reading.domains.items() if vm in self.placements},
        )

    def _left(self, host: str, open_here: list[Key]) -> list[Key]:
        """The open events of VMs no longer on ``host`` in the inventory (released, moved), of ``open_here`` (the
        host's open events of VMs): closed with the host's round, as nothing will sample them there again."""
        here = self.on_host.get(host, {})
        return [k for k in open_here if k[2] not in here]

    def _commit(self, r: _Ready, opened_ids: list[int]) -> None:
        """Move the state on once the round is written."""
        self.tracks.update(r.tracks)
        for d in r.fig.domains:
            self.peaks.add((r.result.host, d.domain), r.at_ms, d.total_bps)
        self.previous[r.result.host] = r.reading
        self.last[r.result.host] = r.at_ms
        for key in r.closed:
            r.result.changes.append(Change("closed", self.events.pop(key), *self._subject(key)))
        for key, event_id in zip(r.opened, opened_ids, strict=True):
            self.events[key] = event_id
            r.result.changes.append(Change("opened", event_id, *self._subject(key)))
        r.result.written = True

    def _figures(self, reading: Reading) -> RoundFigures:
        previous = self.previous.get(reading.host)
        if previous is not None and reading.at <= previous.at:
            raise ClockError(f"host {reading.host}: reading at {iso(reading.at)} is not later than the last one "
                             f"({iso(previous.at)}): the clock went backwards; nothing written for this round")
        return figures(previous, reading, self.on_host.get(reading.host, {}), self.free.get(reading.host, {}))

    def _steps(self, verdicts: list[Signal]) -> tuple[dict[Key, Track], list[tuple[Key, str]]]:
        tracks: dict[Key, Track] = {}
        changes: list[tuple[Key, str]] = []
        for s in verdicts:
            track, change = step(self.tracks.get(s.key, Track()), s.true, self.t)
            tracks[s.key] = track
            if change is not None:
                changes.append((s.key, change))
        return tracks, changes

    def _evidence(self, x: Any, key: Key, rows: list[HistoryRow]) -> list[dict[str, Any]]:
        rule, host, subject, item = key
        kind = "cell" if rule == "cell-drift" else "vm"
        now = next(r for r in rows if r.kind == kind and r.subject == subject and r.item == item)
        before = history.subject_samples(x, kind, host, subject, item, self.t.n - 1)
        return [evidence(r) for r in [*before, now]]

    @staticmethod
    def _subject(key: Key) -> tuple[str, str, str | None, int | None]:
        return key[0], key[1], key[2] or None, None if key[3] < 0 else key[3]

    @staticmethod
    def _samples(fig: RoundFigures) -> list[Sample]:
        taken = iso(fig.at)
        ms = round((fig.elapsed_s or 0) * 1000)
        return [Sample(v.vm, fig.host, taken, ms, tuple((d.domain, d.local_bps, d.total_bps) for d in v.rate.domains),
                       v.rate.llc) for v in fig.vms]
