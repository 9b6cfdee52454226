"""One watch per inventory: ``vnuma watch`` (and ``serve --watch``) takes the inventory's lease before its first
round, renews it in each round's transaction, and frees it when it stops (:mod:`vnuma.inventory.watchlease`).

A second watch is refused with one line and exit 13 (:class:`~vnuma.errors.LeaseError`), naming the holder
and when its lease runs out; it does not wait. A watch killed without freeing it leaves a lease that expires
``ttl`` after its last round (:func:`ttl_s`: six intervals, at least a minute), or at once for a watch on the
same machine whose process is gone. A watch whose lease another took meanwhile (it was stopped longer than
its lease) writes no further round: it stops with the same error.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime

from vnuma.errors import LeaseError, VnumaError
from vnuma.inventory import watchlease
from vnuma.inventory.access import Access
from vnuma.inventory.executor import Executor
from vnuma.inventory.watchlease import Holder

LEASE_MIN_S = 60


def ttl_s(interval_s: float) -> float:
    """How long a lease lasts after the round that renewed it: six intervals, at least :data:`LEASE_MIN_S`."""
    return max(LEASE_MIN_S, 6 * interval_s)


def _gone(holder: Holder) -> bool:
    """Is ``holder`` a process of this machine that no longer runs?"""
    if holder.machine != socket.gethostname() or holder.pid <= 0:
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


class Lease:
    """This process's hold on the inventory's watch lease (see the module docstring)."""

    def __init__(self, access: Access, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self._access, self._ttl, self._clock = access, ttl, clock
        self.token = secrets.token_hex(16)

    def _until(self) -> int:
        return round((self._clock() + self._ttl) * 1000)

    def take(self) -> None:
        """Take the lease. Raises LeaseError: another watch holds it."""
        now = round(self._clock() * 1000)
        with self._access.begin(True) as x:
            held = watchlease.take(x, self.token, socket.gethostname(), os.getpid(), now, self._until(), _gone)
        if held is not None:
            raise LeaseError(
                f"another vnuma watch writes this inventory (process {held.pid} on {held.machine}; its lease runs "
                f"until {_iso(held.until_ms)})",
                hint="run one watch per inventory; a watch killed without stopping frees it when its lease expires")

    def renew(self, x: Executor) -> None:
        """Renew the lease in the caller's transaction (a round's). Raises LeaseError: another watch took it."""
        if not watchlease.renew(x, self.token, self._until()):
            raise LeaseError("this watch's lease expired and another vnuma watch took it: no further round written",
                             hint="run one watch per inventory")

    def release(self) -> None:
        """Free the lease (best effort: an inventory gone leaves it to expire)."""
        try:
            with self._access.begin(True) as x:
                watchlease.release(x, self.token)
        except VnumaError:  # stopping anyway: the lease expires
            pass
