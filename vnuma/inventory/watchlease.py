"""The watch's lease: which ``vnuma watch`` writes an inventory's rounds (SQL text on any :class:`Executor`,
SQLite and PostgreSQL alike).

One row (``watch_lease``, id 1, made by the migration): the holder's token, its machine and process id, and
until when (Unix ms). A watch takes it when it is free — expired, released, or held by a process its caller
knows is gone — and renews it in each round's own transaction; a watch killed without releasing it leaves a
lease that expires. The row is read with the backend's row lock (``FOR UPDATE`` on PostgreSQL; SQLite's write
transaction locks the inventory), so two watches starting at once cannot both take it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vnuma.inventory.executor import Executor


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the lease, and until when (Unix ms)."""

    machine: str
    pid: int
    until_ms: int


def take(x: Executor, token: str, machine: str, pid: int, now_ms: int, until_ms: int,
         gone: Callable[[Holder], bool]) -> Holder | None:
    """Take the lease for ``token`` (held by ``pid`` on ``machine``) until ``until_ms`` when it is free at
    ``now_ms``, already ``token``'s, or its holder is ``gone``; None when taken, else who holds it."""
    row = x.one("SELECT token, machine, pid, expires_ms FROM watch_lease WHERE id = 1" + x.lock)
    assert row is not None, "the migration made the lease's row"
    held = Holder(str(row[1]), int(row[2]), int(row[3]))
    if row[0] and row[0] != token and held.until_ms > now_ms and not gone(held):
        return held
    x.run("UPDATE watch_lease SET token = :token, machine = :machine, pid = :pid, expires_ms = :until WHERE id = 1",
          {"token": token, "machine": machine, "pid": pid, "until": until_ms})
    return None


def renew(x: Executor, token: str, until_ms: int) -> bool:
    """Extend ``token``'s lease to ``until_ms``; False when it is no longer ``token``'s (it expired and another
    watch took it)."""
    return x.one("UPDATE watch_lease SET expires_ms = :until WHERE id = 1 AND token = :token RETURNING id",
                 {"token": token, "until": until_ms}) is not None


def release(x: Executor, token: str) -> None:
    """Free the lease, when it is still ``token``'s."""
    x.run("UPDATE watch_lease SET token = '', machine = '', pid = 0, expires_ms = 0 WHERE id = 1 AND token = :token",
          {"token": token})
