"""``vnuma watch --health-dir DIR``: after each round, the newest saved GPU health files of each host taint its
GPUs as ``vnuma device health`` does (:mod:`.devicehealth`), and each taint given is a ``device-health`` event.

Files are named ``HOST@UNIXSECONDS.xml`` (a saved ``nvidia-smi -q -x``) and ``HOST@UNIXSECONDS.log`` (a kernel
log), as ``--domstats-dir`` names its rounds; per host the newest of each kind (by the time in the name) is
read, and read again only when a newer file arrives, so a GPU an operator untainted is not tainted again by
the file that tainted it. Other files are ignored. A file that cannot be read, is malformed, or was saved on
another host, a host the watch does not watch: a warning, and the round goes on (the host's other files are
not read that round; a newer file is).

A ``device-health`` event opens and closes at once (a taint given is a fact, not a condition that clears):
subject the host, evidence ``[{"at", "address", "effect", "reason", "conditions"}]``; ``vnuma events``
lists it, and it is in the audit log.

Each taint is written in one transaction with its event, which renews the watch's lease first
(:meth:`vnuma.services.watch.Watch.hold`), as a round does: a watch whose lease another took writes neither,
and stops with the round's :class:`~vnuma.errors.LeaseError`; a taint is never kept without its event.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnuma.errors import InvalidInputError, LeaseError, VnumaError
from vnuma.inventory import history, open_inventory
from vnuma.inventory.executor import Executor
from vnuma.services import Settings
from vnuma.services.devicehealth import TAINTED, apply_health, conditions
from vnuma.services.devices import Guard
from vnuma.services.files import read_input
from vnuma.services.watch import iso
from vnuma.sources.gpuhealth import Effects, GpuVerdict, host_health
from vnuma.sources.healthfile import read_health_file
from vnuma.topology.devstates import TaintEffect

RULE = "device-health"
WHO = "vnuma watch"
"""Who the watch's taints are by (``device list``'s BY)."""

_NAME = re.compile(r"^(?P<host>[^@/]+)@(?P<at>\d+(?:\.\d+)?)\.(?P<ext>xml|log)$")

Say = Callable[[str], None]


def newest_files(directory: Path) -> dict[str, tuple[Path, ...]]:
    """Per host, its newest ``HOST@UNIXSECONDS.xml`` and ``.log`` of ``directory`` (by the time in the name).

    Raises:
        InvalidInputError: no such directory, or it cannot be listed.
    """
    try:
        names = sorted(directory.iterdir())
    except OSError as err:
        raise InvalidInputError(f"{directory}: cannot list the health directory: {err.strerror}",
                                hint="give --health-dir a directory of HOST@UNIXSECONDS.xml|.log files") from err
    newest: dict[tuple[str, str], tuple[float, Path]] = {}
    for path in names:
        found = _NAME.match(path.name)
        if found is None:
            continue
        key, at = (found["host"], found["ext"]), float(found["at"])
        if key not in newest or at > newest[key][0]:
            newest[key] = (at, path)
    out: dict[str, tuple[Path, ...]] = {}
    for (host, _), (_, path) in sorted(newest.items()):
        out[host] = (*out.get(host, ()), path)
    return out


class HealthWatch:
    """The watch's health pass, run after each round (:meth:`after_round`); remembers the files it read."""

    def __init__(self, settings: Settings, directory: Path, effects: Effects, say: Say, warn: Say) -> None:
        self.settings, self.directory, self.effects = settings, directory, effects
        self.say, self.warn = say, warn
        self.read: dict[str, tuple[Path, ...]] = {}
        self.events = 0

    def after_round(self, watch: Any, at: float) -> None:
        """Read each watched host's newer health files and taint as they say, while ``watch`` holds its lease.

        Raises:
            LeaseError: another watch took the lease (nothing of this host written); any other VnumaError is a
                warning.
        """
        try:
            files = newest_files(self.directory)
        except VnumaError as err:
            self.warn(f"health: {err}")
            return
        for host, paths in files.items():
            if self.read.get(host) == paths:
                continue
            self.read[host] = paths
            if host not in watch.hosts:
                self.warn(f"health: {', '.join(p.name for p in paths)}: host {host} is not watched "
                          "(not in the inventory or not of --hosts): skipped")
                continue
            try:
                self._host(host, paths, at, watch.hold)
            except LeaseError:
                del self.read[host]  # not acted on
                raise
            except VnumaError as err:
                self.warn(f"health: host {host}: {err}")

    def _host(self, host: str, paths: tuple[Path, ...], at: float, hold: Guard) -> None:
        reports = [read_health_file(read_input(p, "health"), source=str(p)) for p in paths]
        with open_inventory(self.settings.db_url) as inventory:
            found = inventory.get_host(host)
        events: dict[str, int] = {}

        def noted(x: Executor, v: GpuVerdict, effect: TaintEffect) -> None:
            evidence = [{"at": iso(at), "address": v.address, "effect": effect.value, "reason": v.reason,
                         "conditions": conditions(v)}]
            events[v.address] = history.record_moment(
                x, history.Opened(RULE, host, None, None, round(at * 1000), evidence))

        outcome = apply_health(self.settings, found, host_health(found, reports, self.effects), who=WHO, guard=hold,
                               noted=noted)
        if outcome.unknown:
            self.warn(f"health: host {host}: not its GPUs (reported, not tainted): {', '.join(outcome.unknown)}")
        for g in outcome.gpus:
            if g.status == TAINTED:
                self.events += 1
                self.say(f"event {events[g.verdict.address]} opened and closed: {RULE} GPU {g.verdict.address} on "
                         f"host {host}: tainted {g.effect}: {g.verdict.reason}")
