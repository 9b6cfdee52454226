"""Named points where a test kills the process, to prove a journaled change survives SIGKILL anywhere.

``VNUMA_FAILPOINT=NAME`` (or ``NAME:N``, the N-th time it is reached) in the
environment makes the process send itself SIGKILL at that point: no cleanup,
no ``finally``, exactly what ``kill -9`` or a power cut does. Unset, as
everywhere outside the crash tests, a point costs one environment lookup.
Points are placed between the journal's writes and libvirt's actions, where
a crash is hardest to recover from (see :mod:`vnuma.services.rebalance_apply`):

``run-opened``      the run is journaled, no claim has moved
``step-started``    a step's claims moved to its new placement, libvirt not yet changed
``defined-there``   a move between hypervisors defined the domain on the destination,
                    the source still holds it
``libvirt-done``    libvirt holds the new placement, the step is not yet marked done
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "VNUMA_FAILPOINT"
POINTS = ("run-opened", "step-started", "defined-there", "libvirt-done")
_seen: Counter[str] = Counter()


def reached(name: str) -> None:
    """Kill this process with SIGKILL when ``VNUMA_FAILPOINT`` names this point (and this time)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    _seen[name] += 1
    point, _, nth = wanted.partition(":")
    if point == name and _seen[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
