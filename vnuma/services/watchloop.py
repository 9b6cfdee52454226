"""``vnuma watch``'s two loops: a replay of recorded rounds, and the live loop over the hosts.

Both hand each host's reading to :class:`vnuma.services.watch.Watch` and say
what happened through ``say`` (events opened and closed) and ``warn`` (notes).
A host is *stale* once it has not been read for three intervals (a replay:
by the recorded times; live: also at once when its call fails or misses the
round's deadline, with the reason); it is said once, and again when the host
answers again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from vnuma.errors import InventoryError, VnumaError
from vnuma.services import Settings
from vnuma.services.watch import RoundResult, Watch, iso
from vnuma.services.watchinput import LiveReader, recorded_rounds
from vnuma.services.watchlease import ttl_s
from vnuma.sources.mbm import parse_cache_occupancy, parse_memory_bandwidth
from vnuma.watch.figures import ClockError, Reading
from vnuma.watch.rules import Thresholds

Say = Callable[[str], None]


class Acting(Protocol):
    """What decides after each round (``watch --act propose|apply``: :class:`vnuma.services.watchact.Actor`), as
    the summary counts it."""

    proposed: int
    applied: int
    withheld: int


STALE_ROUNDS = 3
"""A host not read for this many intervals is stale."""

After = Callable[[Watch, float], None]
"""What runs after each round (the actor's decision), given by the caller: a loop without one (``--act off``,
``serve --watch``) never reaches the acting code."""


@dataclass(slots=True)
class Summary:
    """What a watch did: rounds written and skipped (an unknown host, a clock that went backwards), events
    opened and closed, hosts stale at the end."""

    rounds: int = 0
    refused: int = 0
    opened: int = 0
    closed: int = 0
    hosts: set[str] = field(default_factory=set)
    stale: dict[str, str] = field(default_factory=dict)
    actor: Acting | None = None

    def line(self) -> str:
        stale = f"; stale: {', '.join(sorted(self.stale))}" if self.stale else ""
        refused = f" ({self.refused} skipped)" if self.refused else ""
        a = self.actor
        acted = "" if a is None else (f"; {a.proposed} moves proposed, {a.applied} applied, "
                                      f"{a.withheld} withheld")
        return (f"watch: {self.rounds} rounds written{refused} over {len(self.hosts)} hosts, "
                f"{self.opened} events opened, {self.closed} closed{acted}{stale}")


class _Staleness:
    def __init__(self, interval_s: float, warn: Say, summary: Summary) -> None:
        self.after = STALE_ROUNDS * interval_s
        self.seen: dict[str, float] = {}
        self.warn, self.summary = warn, summary

    def answered(self, host: str, at: float) -> None:
        self.seen[host] = at
        if self.summary.stale.pop(host, None) is not None:
            self.warn(f"host {host} answers again ({iso(at)})")

    def failed(self, host: str, reason: str) -> None:
        if self.summary.stale.get(host) != reason:
            self.summary.stale[host] = reason
            self.warn(f"host {host} is stale: {reason}")

    def tick(self, now: float) -> None:
        for host, at in self.seen.items():
            if now - at > self.after and host not in self.summary.stale:
                self.failed(host, f"no reading since {iso(at)} ({now - at:g}s)")


def _notes(reading: Reading, noted: set[tuple[str, str]], warn: Say) -> None:
    # A real libvirtd reports "memory.bandwidth.monitor.count=0" for a domain without monitors: count them.
    monitored = any(parse_memory_bandwidth(stats) or parse_cache_occupancy(stats) for stats in reading.domains.values())
    if reading.domains and not monitored and (reading.host, "monitors") not in noted:
        noted.add((reading.host, "monitors"))
        warn(f"host {reading.host}: no memory-bandwidth or cache monitors reported (no resctrl monitoring, or VMs "
             "placed without a cache slice or bandwidth cap): CPU use and cell figures only")
    if reading.free is None and (reading.host, "free") not in noted:
        noted.add((reading.host, "free"))
        warn(f"host {reading.host}: no free pages reported: cell-drift is not checked there")


def _account(result: RoundResult, summary: Summary, say: Say, warn: Say) -> None:
    for note in result.notes:
        warn(note)
    for change in result.changes:
        say(change.line())
        if change.what == "opened":
            summary.opened += 1
        else:
            summary.closed += 1
    if result.written:
        summary.rounds += 1
        summary.hosts.add(result.host)
    else:
        summary.refused += 1


def replay(
    settings: Settings, t: Thresholds, directory: Path, hosts: Sequence[str] | None, interval_s: float,
    say: Say, warn: Say, actor: Acting | None = None, after: After | None = None,
) -> Summary:
    """Replay every recorded round of ``directory`` (of ``hosts`` only, when given) as one round per file.

    Raises:
        InvalidInputError: a malformed recording (:func:`recorded_rounds`), or a host's first recorded round
            not later than its last round kept (the clock went backwards): nothing is written.
        NotFoundError: a host of ``hosts`` that the inventory does not hold.
        LeaseError: another watch writes the inventory (:mod:`.watchlease`).
    """
    readings = [r for r in recorded_rounds(directory) if not hosts or r.host in hosts]
    watch = Watch(settings, t, hosts, lease_s=ttl_s(interval_s))
    try:
        first: dict[str, float] = {}
        for r in readings:
            first.setdefault(r.host, r.at)
        for host, at in sorted(first.items()):
            last = watch.last.get(host)
            if last is not None and round(at * 1000) <= last:
                raise ClockError(f"host {host}: the recording starts at {iso(at)}, not later than the last round "
                                 f"kept ({iso(last / 1000)}): the clock went backwards; nothing written",
                                 hint="replay recordings newer than the kept history, or into another inventory")
        summary = Summary(actor=actor)
        stale = _Staleness(interval_s, warn, summary)
        noted: set[tuple[str, str]] = set()
        for reading in readings:
            _notes(reading, noted, warn)
            (result,) = watch.run_round([reading])
            _account(result, summary, say, warn)
            if after is not None:
                after(watch, reading.at)
            if result.written:
                stale.answered(reading.host, reading.at)
            stale.tick(reading.at)
        return summary
    finally:
        watch.close()


def live(
    settings: Settings, t: Thresholds, hosts: Sequence[str] | None, interval_s: float, once: bool,
    say: Say, warn: Say, *, stop: threading.Event | None = None, actor: Acting | None = None,
    after: After | None = None,
) -> Summary:
    """Read every host (of ``hosts``) each ``interval_s`` until interrupted, or ``stop`` is set (one round:
    ``once``).

    Raises:
        NotFoundError: a host of ``hosts`` that the inventory does not hold.
        LeaseError: another watch writes the inventory, or took its lease meanwhile (:mod:`.watchlease`).
    """
    watch = Watch(settings, t, hosts, lease_s=ttl_s(interval_s))
    reader = LiveReader(settings.db_url)
    summary = Summary(actor=actor)
    stale = _Staleness(interval_s, warn, summary)
    noted: set[tuple[str, str]] = set()
    try:
        while True:
            started = time.monotonic()
            watch.refresh()
            targets = {name: (h.uri, sorted(c.id for c in h.cells), sorted({p.size_kib for c in h.cells
                                                                            for p in c.pages} | {4}))
                       for name, h in watch.hosts.items() if h.uri}
            readings = []
            for host, got in reader.read(targets, deadline_s=interval_s).items():
                if isinstance(got, str):
                    stale.failed(host, got)
                    continue
                _notes(got, noted, warn)
                readings.append(got)
            try:
                results = watch.run_round(readings)
            except InventoryError as err:  # a busy or unreachable inventory: this round is lost, not the loop
                warn(f"round not written: {err}")
                results = []
            for result in results:
                _account(result, summary, say, warn)
                if result.written:
                    stale.answered(result.host, result.at)
            if after is not None:
                after(watch, time.time())
            stale.tick(time.time())
            wait = max(0.0, interval_s - (time.monotonic() - started))
            if once or (stop.wait(wait) if stop is not None else time.sleep(wait)):
                return summary
    finally:
        reader.close()
        watch.close()


def watch_in_background(settings: Settings, t: Thresholds, interval_s: float, say: Say) -> Callable[[], None]:
    """Run :func:`live` over every host on a daemon thread (``vnuma serve --watch``), each line it says and
    warns through ``say``; the function that stops it after its current round. A round the loop cannot
    survive (the inventory gone) ends the thread with one line."""
    stop = threading.Event()

    def run() -> None:
        try:
            live(settings, t, None, interval_s, False, say, lambda line: say(f"warning: {line}"), stop=stop)
        except VnumaError as err:
            say(f"error: the watch stopped: {err}")

    threading.Thread(target=run, name="vnuma-watch-loop", daemon=True).start()
    return stop.set
