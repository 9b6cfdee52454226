"""Where ``vnuma watch``'s readings come from: recorded rounds in a directory, or the hosts themselves.

**Recorded** (``--domstats-dir DIR``): each ``HOST@UNIXSECONDS.txt`` is the
output of ``virsh domstats --memory --cpu-total`` for one host at one time (saved
with ``--balloon`` too, it carries the VMs' ``balloon.*`` keys, and they are read); a
``HOST@UNIXSECONDS.freepages.txt`` beside it, the output of ``virsh freepages
--all`` at that time, gives the host's cells' free pages (without one, that
round has no cell figures). Every file is read and checked before the first
round: a malformed file, a name that is not ``HOST@UNIXSECONDS``, or two files
of one host at one time refuse the whole replay (nothing written). Files
not ending in ``.txt`` are ignored. Rounds come in time order (then host name).

**Live**: per host and round, one ``getAllDomainStats`` over its running
domains (memory, CPU and balloon stats) and one ``getFreePages`` over its cells, on a bounded pool of threads.
A host that fails answers with its reason; one that has not answered by the
round's deadline is left to finish in the background (no second call is
started on it meanwhile) and counts as not answering: no host waits for
another. The workers are daemon threads, so a call that never returns (a
host that accepts and never answers) does not keep the process from ending.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnuma.errors import HypervisorError, InvalidInputError, VnumaError
from vnuma.hypervisor.base import Hypervisor
from vnuma.inventory.reading import open_reader
from vnuma.services.hypervisors import open_hypervisor
from vnuma.sources.domstats import parse_domstats
from vnuma.sources.freepages import parse_freepages
from vnuma.watch.figures import Reading

_NAME = re.compile(r"^(?P<host>[^@/]+)@(?P<at>\d+(?:\.\d+)?)(?P<pages>\.freepages)?\.txt$")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"cannot read {path}: {err}") from err


def recorded_rounds(directory: Path) -> list[Reading]:
    """Every recorded round of ``directory``, in time order then host name.

    Raises:
        InvalidInputError: no such directory, no round in it, a ``.txt`` file named otherwise, a malformed
            file, two files of one host at one time, free pages without their round.
    """
    if not directory.is_dir():
        raise InvalidInputError(f"{directory}: no such directory", hint="give the directory of the recorded rounds")
    rounds: dict[tuple[str, float], Path] = {}
    pages: dict[tuple[str, float], Path] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix != ".txt":
            continue
        found = _NAME.match(path.name)
        if found is None:
            raise InvalidInputError(f"{path}: not a recorded round's name",
                                    hint="name each file HOST@UNIXSECONDS.txt (or HOST@UNIXSECONDS.freepages.txt)")
        key = (found["host"], float(found["at"]))
        into = pages if found["pages"] else rounds
        if key in into:
            raise InvalidInputError(f"{path}: host {key[0]} has two recordings at {key[1]:.15g} ({into[key].name})")
        into[key] = path
    orphans = sorted(set(pages) - set(rounds))
    if orphans:
        host, at = orphans[0]
        raise InvalidInputError(f"{pages[orphans[0]]}: free pages without their round ({host}@{at:.15g}.txt)")
    if not rounds:
        raise InvalidInputError(f"{directory}: no recorded round (HOST@UNIXSECONDS.txt) in it")
    return [
        Reading(host, at, parse_domstats(_text(path), str(path)),
                parse_freepages(_text(pages[(host, at)]), str(pages[(host, at)])) if (host, at) in pages else None)
        for (host, at), path in sorted(rounds.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]


class _Workers:
    """At most ``count`` calls at once, on daemon threads started as they are first needed."""

    def __init__(self, count: int) -> None:
        self.count = max(1, count)
        self.jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []

    def _work(self) -> None:
        while True:
            future, call = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as err:  # handed to the waiting round, which decides
                future.set_exception(err)

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.put((future, call))
        if len(self.threads) < self.count:
            thread = threading.Thread(target=self._work, name=f"vnuma-watch-{len(self.threads)}", daemon=True)
            thread.start()
            self.threads.append(thread)
        return future


@dataclass(slots=True)
class LiveReader:
    """Reads hosts concurrently (at most ``workers`` at once), keeping one connection per host."""

    db_url: str
    workers: int = 16
    clock: Callable[[], float] = time.time
    _pool: _Workers | None = None
    _conns: dict[str, Hypervisor] = field(default_factory=dict)
    _busy: dict[str, Future[Reading]] = field(default_factory=dict)

    def _read(self, host: str, uri: str, cells: list[int], sizes: list[int]) -> Reading:
        hv = self._conns.get(host)
        if hv is None:
            with open_reader(self.db_url) as keeper:
                hv = self._conns[host] = open_hypervisor(keeper, host, uri)
        try:
            stats = hv.running_stats()
            at = self.clock()
            free = hv.free_pages(cells, sizes)
        except HypervisorError:
            self._conns.pop(host, None)
            hv.close()
            raise
        return Reading(host, at, stats, free or None)

    def read(
        self, hosts: Mapping[str, tuple[str, list[int], list[int]]], deadline_s: float,
    ) -> dict[str, Reading | str]:
        """Per host (name -> URI, cell ids, page sizes): its reading, or why there is none."""
        if self._pool is None:
            self._pool = _Workers(self.workers)
        out: dict[str, Reading | str] = {}
        started: dict[str, Future[Reading]] = {}
        for host, (uri, cells, sizes) in sorted(hosts.items()):
            if host in self._busy and not self._busy[host].done():
                out[host] = "still answering the previous round's call"
                continue
            started[host] = self._busy[host] = self._pool.submit(
                lambda h=host, u=uri, c=cells, z=sizes: self._read(h, u, c, z))
        wait(started.values(), timeout=deadline_s)
        for host, future in started.items():
            if not future.done():
                out[host] = f"no answer within {deadline_s:g}s"
                continue
            err = future.exception()
            if err is None:
                out[host] = future.result()
            elif isinstance(err, VnumaError):
                out[host] = str(err)
            else:
                raise err
        return out

    def close(self) -> None:
        """Close the connections no call is using; calls still running are left to end (daemon threads)."""
        for host, hv in list(self._conns.items()):
            if host not in self._busy or self._busy[host].done():
                hv.close()
        self._conns.clear()
