"""Discovery of many hosts at once: ``host add --from-file`` and ``host refresh --all``.

Hosts are read through libvirt concurrently in a bounded thread pool
(libvirt-python releases the GIL while it waits on a host); the inventory
is written only by the calling thread, one transaction per host as each
discovery completes, so one unreachable or broken host never stops, nor
undoes, the others. Every host ends with one :class:`Outcome`:

- ``added`` / ``refreshed``: recorded (a refresh with no change writes nothing), with the parts of the
  host left out (listed in the outcome; ``strict`` makes such a host fail with exit 4 instead);
- ``skipped``: nothing to do: a name already in the inventory with the same
  URI (so rerunning a host file after a partial failure adds only what is
  missing), or, for ``refresh --all``, a host imported from files (no URI;
  one added with ``--demo`` or ``--capabilities`` is read that way again);
- ``failed``: the error a single ``host add``/``host refresh`` would have
  printed, with its exit code (8 for libvirt, 4 for an unreadable topology,
  9 for a name already used by another URI, ...).

The batch's exit code is 0 when nothing failed, else the exit code of the
first failed host in input order (file order; name order for
``refresh --all``), so a one-line host file exits as ``host add`` would.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from vnuma.codec import host_summary, left_out_to_list, summary_text
from vnuma.errors import InvalidInputError, VnumaError
from vnuma.inventory import open_inventory
from vnuma.services import Settings
from vnuma.services.files import read_input
from vnuma.services.hosts import accepted, discover, is_demo, record_refresh, refresh_source
from vnuma.services.names import check_name
from vnuma.services.progress import SILENT, Progress
from vnuma.sources.demo import DEMO_OVERRIDE, demo_capabilities_path
from vnuma.topology import Host, count_of
from vnuma.topology.leftout import Imported, LeftOut

DEFAULT_JOBS = 8
MAX_JOBS = 64


class Result(StrEnum):
    """What happened to one host of a batch."""

    ADDED = "added"
    REFRESHED = "refreshed"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Entry:
    """One host to discover: name, libvirt URI, where it was given; to refresh: its override and capabilities file."""

    name: str
    uri: str
    line: int = 0
    override: str | None = None
    capabilities: Path | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """One host's result; ``exit_code`` and ``hint`` are set for failures only."""

    name: str
    uri: str | None
    result: Result
    detail: str
    exit_code: int = 0
    hint: str | None = None
    host: Host | None = None
    changes: tuple[str, ...] = ()
    left_out: tuple[LeftOut, ...] = ()


class BatchError(VnumaError):
    """Some hosts of a batch failed; the others were recorded. Exit code: the first failure's."""

    def __init__(self, message: str, exit_code: int, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class Batch:
    """Every host's outcome, in input order."""

    outcomes: tuple[Outcome, ...]

    def count(self, result: Result) -> int:
        """How many hosts ended with ``result``."""
        return sum(1 for o in self.outcomes if o.result is result)

    def error(self) -> BatchError | None:
        """The error to report after the summary, None when no host failed."""
        failed = [o for o in self.outcomes if o.result is Result.FAILED]
        if not failed:
            return None
        first = failed[0]
        return BatchError(
            f"{len(failed)} of {len(self.outcomes)} hosts failed; first: {first.name}: {first.detail}",
            first.exit_code,
            hint="the other hosts were recorded; fix the failed ones and run the same command again",
        )


def parse_host_list(text: str, what: str) -> list[Entry]:
    """Parse a host list: ``NAME URI`` or a bare ``URI`` per line; ``#`` comments and blank lines are ignored.

    A bare URI names the host after the URI's host part
    (``qemu+ssh://root@gpu-7/system`` -> ``gpu-7``); a URI without one
    (``qemu:///system``, ``test:///default``) needs an explicit name.

    Raises:
        InvalidInputError: a line with more than two fields, a bad name, a bare
            URI without a host part, a name given twice, or no host at all; the
            message names the line.
    """
    entries: list[Entry] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        entry = _entry(fields, number, what)
        if entry.name in first_line:
            raise InvalidInputError(
                f"{what} line {number}: host {entry.name!r} is already given on line {first_line[entry.name]}"
            )
        first_line[entry.name] = number
        entries.append(entry)
    if not entries:
        raise InvalidInputError(f"{what}: no hosts (expected lines of `NAME URI` or `URI`)")
    return entries


def _entry(fields: list[str], number: int, what: str) -> Entry:
    where = f"{what} line {number}"
    if len(fields) > 2:
        raise InvalidInputError(
            f"{where}: expected `NAME URI` or `URI`, got {len(fields)} fields",
            hint="one host per line; `#` starts a comment",
        )
    if len(fields) == 1:
        uri = fields[0]
        try:
            name = urlsplit(uri).hostname or ""
        except ValueError:
            name = ""
        if not name:
            raise InvalidInputError(
                f"{where}: {uri!r} names no remote host to take the host name from",
                hint="write `NAME URI`, e.g. `node-1 qemu:///system`",
            )
    else:
        name, uri = fields
    try:
        check_name(name, "host")
    except InvalidInputError as err:
        raise InvalidInputError(f"{where}: {err}", hint="a line is `NAME URI` (or a bare URI)") from err
    return Entry(name, uri, number)


def read_host_list(source: str, stdin: TextIO) -> list[Entry]:
    """Read and parse a host list from the file ``source`` (``-``: ``stdin``).

    Raises:
        InvalidInputError: unreadable or not UTF-8, or a malformed line (see :func:`parse_host_list`).
    """
    if source == "-":
        return parse_host_list(stdin.read(), "stdin")
    data = read_input(Path(source), "host list")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{source}: host list is not UTF-8 text (byte {err.start})") from err
    return parse_host_list(text, source)


def add_from_file(
    settings: Settings,
    source: str,
    stdin: TextIO,
    jobs: int = DEFAULT_JOBS,
    progress: Progress = SILENT,
    *,
    clashing: tuple[str, ...] = (),
    strict: bool = False,
) -> Batch:
    """``host add --from-file``: read the whole list first (nothing is contacted if a line is bad), then add.

    Raises:
        InvalidInputError: single-host options given too (``clashing``), or a bad host list.
        InventoryError: the inventory cannot be opened.
    """
    if clashing:
        raise InvalidInputError(
            f"--from-file reads names and URIs from FILE; drop {', '.join(clashing)}",
            hint="lines of FILE are `NAME URI` or a bare `URI`",
        )
    return add_hosts(settings, read_host_list(source, stdin), jobs, progress, strict=strict)


def add_hosts(
    settings: Settings, entries: list[Entry], jobs: int = DEFAULT_JOBS, progress: Progress = SILENT, *,
    strict: bool = False,
) -> Batch:
    """Discover and record many hosts concurrently; each host succeeds or fails on its own (``strict``: one
    with parts left out fails, see :func:`vnuma.services.hosts.accepted`).

    Names already in the inventory are not contacted: skipped when their URI
    is the same, failed (conflict, exit 9) otherwise.

    Raises:
        InventoryError: the inventory cannot be opened (nothing is contacted then).
    """
    with open_inventory(settings.db_url) as inventory:
        known = {s["name"]: s.get("uri") for s in inventory.host_summaries()}
        early: dict[str, Outcome] = {}
        todo: list[Entry] = []
        for e in entries:
            if e.name not in known:
                demo = is_demo(e.uri, e.capabilities)
                todo.append(replace(e, capabilities=demo_capabilities_path(), override=DEMO_OVERRIDE) if demo else e)
            elif known[e.name] == e.uri:
                early[e.name] = Outcome(e.name, e.uri, Result.SKIPPED, "already in the inventory")
            else:
                early[e.name] = _conflict(e, known[e.name])

        def record(entry: Entry, discovered: Imported) -> Outcome:
            imported = accepted(discovered, strict, entry.uri)
            inventory.add_host(imported.host, entry.override, left_out=imported.left_out)
            return Outcome(entry.name, entry.uri, Result.ADDED, _describe(imported), host=imported.host,
                           left_out=imported.left_out)

        done = _run(todo, jobs, record, progress, early)
    return Batch(tuple(done[e.name] for e in entries))


def _conflict(entry: Entry, uri: str | None) -> Outcome:
    where = f"with URI {uri}" if uri else "imported from files"
    return Outcome(
        entry.name, entry.uri, Result.FAILED, f"host {entry.name!r} is already in the inventory {where}",
        exit_code=9, hint=f"vnuma host remove {entry.name}, or give this host another name",
    )


def refresh_all(
    settings: Settings,
    jobs: int = DEFAULT_JOBS,
    progress: Progress = SILENT,
    *,
    clashing: tuple[str, ...] = (),
    strict: bool = False,
) -> Batch:
    """Rediscover every libvirt host concurrently; hosts imported from files are skipped (no URI).

    Each host is read as ``host refresh NAME`` reads it (its recorded
    ``--demo`` or ``--capabilities`` topology included), compared with its
    inventory version when its discovery completes and rewritten only if it
    changed (:func:`record_refresh`).

    Raises:
        InvalidInputError: single-host options given too (``clashing``: a NAME, ``--capabilities``).
        InventoryError: the inventory cannot be opened.
    """
    if clashing:
        raise InvalidInputError(
            f"--all refreshes every libvirt host from its own URI; drop {', '.join(clashing)}",
            hint="vnuma host refresh NAME --capabilities FILE refreshes one host from a file",
        )
    with open_inventory(settings.db_url) as inventory:
        summaries = sorted(inventory.host_summaries(), key=lambda s: s["name"])
        early, todo = _refresh_entries(summaries, inventory.topology_overrides())

        def record(entry: Entry, discovered: Imported) -> Outcome:
            old = inventory.get_host(entry.name)
            imported = accepted(discovered, strict, str(entry.capabilities or entry.uri))
            refresh = record_refresh(inventory, old, imported, entry.override, entry.override)
            changes = refresh.changes
            detail = f"{len(changes)} change(s): {'; '.join(changes)}" if changes else "no change"
            return Outcome(
                entry.name, entry.uri, Result.REFRESHED, detail + _left_out_note(refresh.left_out),
                host=refresh.host, changes=refresh.changes, left_out=refresh.left_out,
            )

        done = _run(todo, jobs, record, progress, early)
    return Batch(tuple(done[s["name"]] for s in summaries))


def _refresh_entries(
    summaries: list[dict[str, Any]], overrides: dict[str, str]
) -> tuple[dict[str, Outcome], list[Entry]]:
    """What ``refresh --all`` decides before contacting anyone: skipped and failed hosts, and those to read."""
    early: dict[str, Outcome] = {}
    todo: list[Entry] = []
    for summary in summaries:
        name, uri = summary["name"], summary.get("uri")
        if not uri:
            early[name] = Outcome(name, None, Result.SKIPPED, "imported from files: no libvirt URI")
            continue
        override = overrides.get(name)
        try:
            uri, capabilities = refresh_source(name, uri, override)
        except InvalidInputError as err:
            early[name] = _failure(Entry(name, uri), err)
            continue
        todo.append(Entry(name, uri, override=override, capabilities=capabilities))
    return early, todo


def _run(
    todo: list[Entry],
    jobs: int,
    record: Callable[[Entry, Imported], Outcome],
    progress: Progress,
    early: dict[str, Outcome],
) -> dict[str, Outcome]:
    """Discover ``todo`` in up to ``jobs`` threads, then ``record`` each in this thread as it completes.

    Raises:
        RuntimeError: ``jobs`` is out of range (the CLI bounds it). Bugs in a
            worker propagate once the running discoveries finish.
    """
    if not 1 <= jobs <= MAX_JOBS:
        raise RuntimeError(f"jobs must be 1..{MAX_JOBS}, got {jobs}")
    progress.start(len(todo) + len(early))
    done = dict(early)
    for outcome in early.values():
        progress.advance(outcome.name, failed=outcome.result is Result.FAILED)
    if not todo:
        return done
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(todo)), thread_name_prefix="vnuma-discover")
    try:
        futures = {pool.submit(discover, e.name, e.uri, e.capabilities): e for e in todo}
        for future in as_completed(futures):
            entry = futures[future]
            done[entry.name] = _finish(entry, future, record)
            progress.advance(entry.name, failed=done[entry.name].result is Result.FAILED)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return done


def _finish(entry: Entry, future: Future[Imported], record: Callable[[Entry, Imported], Outcome]) -> Outcome:
    try:
        return record(entry, future.result())
    except VnumaError as err:
        return _failure(entry, err)


def _failure(entry: Entry, err: VnumaError) -> Outcome:
    message = " ".join(str(err).split())
    return Outcome(entry.name, entry.uri, Result.FAILED, message, exit_code=err.exit_code, hint=err.hint)


def _describe(imported: Imported) -> str:
    return summary_text(host_summary(imported.host)) + _left_out_note(imported.left_out)


def _left_out_note(left_out: tuple[LeftOut, ...]) -> str:
    return f"; {count_of(len(left_out), 'part')} left out" if left_out else ""


def outcome_to_dict(outcome: Outcome) -> dict[str, object]:
    """One host of ``--json``: name, uri, result, detail, exit_code, hint, changes, left_out."""
    return {
        "name": outcome.name,
        "uri": outcome.uri,
        "result": outcome.result.value,
        "detail": outcome.detail,
        "exit_code": outcome.exit_code,
        "hint": outcome.hint,
        "changes": list(outcome.changes),
        "left_out": left_out_to_list(outcome.left_out),
    }


def batch_to_dict(batch: Batch) -> dict[str, object]:
    """The ``--json`` document of a batch: per-host results plus counts and the batch's exit code."""
    err = batch.error()
    return {
        "hosts": [outcome_to_dict(o) for o in batch.outcomes],
        **{r.value: batch.count(r) for r in Result},
        "exit_code": err.exit_code if err else 0,
    }
