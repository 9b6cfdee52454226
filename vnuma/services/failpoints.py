"""Named points where a test stops or kills the process, to prove a change survives a crash or an interrupt.

``VNUMA_FAILPOINT=NAME`` (or ``NAME:N``, the N-th time it is reached) in the
environment makes the process send itself SIGKILL at that point: no cleanup,
no ``finally``, exactly what ``kill -9`` or a power cut does.
``NAME:stop`` (or ``NAME:N:stop``) sends SIGSTOP instead: the process
halts right there until a SIGCONT, so a test can act at that moment (let a
racer go first, send SIGINT as a Ctrl-C would) and then let it carry on.
Unset, as everywhere outside these tests, a point costs one environment lookup.
Points are placed between the journal's writes and libvirt's actions, where
a crash is hardest to recover from (see :mod:`vnuma.services.rebalance_apply`),
and right after the commits a command reports:

``run-planned``     a run's steps are decided (libvirt asked), nothing journaled yet
``run-opened``      the run is journaled, no claim has moved
``step-started``    a step's claims moved to its new placement, libvirt not yet changed
``defined-there``   a move between hypervisors defined the domain on the destination,
                    the source still holds it
``libvirt-done``    libvirt holds the new placement, the step is not yet marked done
``claimed``         ``place`` committed the VM's claim, nothing printed yet
``cordoned``        ``host drain`` committed the cordon, nothing planned yet
``tainted``         ``device taint --effect drain`` committed the taint, nothing planned yet
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "VNUMA_FAILPOINT"
POINTS = (
    "run-planned", "run-opened", "step-started", "defined-there", "libvirt-done", "claimed", "cordoned", "tainted",
)
_seen: Counter[str] = Counter()


def reached(name: str) -> None:
    """Kill (or stop) this process when ``VNUMA_FAILPOINT`` names this point (and this time)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    _seen[name] += 1
    point, *rest = wanted.split(":")
    stop = rest[-1:] == ["stop"]
    nth = int(rest[0]) if rest and rest[0] != "stop" else 1
    if point == name and _seen[name] == nth:
        os.kill(os.getpid(), signal.SIGSTOP if stop else signal.SIGKILL)
