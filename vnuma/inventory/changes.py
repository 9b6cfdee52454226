"""Which hosts changed since a reader last looked: a mark each change writes, a watermark each read takes.

Every statement that counts a change to a host or to the VMs on it (a claim,
a release, a move, a refresh, a reservation, a cordon, a device state: the
ones that bump ``host_generation``) also sets the host's ``change_mark``
(:func:`bump`, :func:`mark`). A reader keeps the watermark its last read took
(:func:`watermark`, first in the same transaction as the read) and asks only for
the hosts whose mark is at or above it (:data:`CHANGED_SINCE`, an index
range): its cost grows with what changed, not with the fleet.

Marks need not follow commit order; they only need every change a read did
not see to carry a mark at or above the watermark that read took:

* PostgreSQL: the mark is the writing transaction's id
  (``pg_current_xact_id()``), the watermark the ``xmin`` of the reader's
  snapshot. Every transaction with a smaller id had ended when the snapshot
  was taken, so the read saw its changes; one still running has an id at or
  above ``xmin`` and is read again next time. A transaction left open
  anywhere on the server holds ``xmin`` back: reads then return more hosts
  (whose marks the reader compares and skips), never fewer.
* SQLite: a writer holds the database's one write lock, so the mark is a
  counter, the largest mark plus one taken inside the writing statement; the
  watermark is that same expression in the reader's transaction.

A removed host leaves no row to mark: its removal counts one more in
``fleet_marks.hosts_removed`` (:data:`HOST_REMOVED`), which a reader compares
whole. The tenants and the kept MIG geometries carry no mark either: every
statement that changes either table counts one more in
``fleet_marks.catalog_changes`` (triggers, migration 0028: whatever writes
them, the count follows), which a reader compares whole too.
"""

from __future__ import annotations

from typing import Protocol

from vnuma.inventory.figures import CLEARED

_MARK = {
    "postgresql": "pg_current_xact_id()::text::bigint",
    "sqlite": "(SELECT COALESCE(MAX(change_mark), 0) + 1 FROM hosts)",
}
_WATERMARK = {
    "postgresql": (
        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, hosts_removed, catalog_changes FROM fleet_marks"
    ),
    "sqlite": (
        "SELECT (SELECT COALESCE(MAX(change_mark), 0) + 1 FROM hosts), hosts_removed, catalog_changes FROM fleet_marks"
    ),
}
_BUMP = (
    "UPDATE hosts SET host_generation = host_generation + 1, change_mark = {mark}, updated_at = CURRENT_TIMESTAMP, "
    f"{CLEARED} WHERE id = :host"
)
"""A change clears the host's kept figures too (a claim sets them again after it: :mod:`.figures`)."""
CHANGED_SINCE = "SELECT name, id, host_generation FROM hosts WHERE change_mark >= :since"
"""Every host changed at or after a watermark: its name, id and generation."""
HOST_REMOVED = "UPDATE fleet_marks SET hosts_removed = hosts_removed + 1 WHERE id = 1"


class Backend(Protocol):
    """Anything that names its SQL dialect (an executor)."""

    dialect: str


def mark(dialect: str) -> str:
    """The SQL expression of a change's mark on ``dialect`` (``postgresql`` or ``sqlite``)."""
    return _MARK[dialect]


def bump(x: Backend) -> str:
    """The statement that counts one more change to host ``:host`` (its generation and its mark)."""
    return _BUMP.format(mark=_MARK[x.dialect])


def watermark(x: Backend) -> str:
    """The query of a read's watermark, the count of removed hosts and that of changes to the tenants and the
    MIG geometries, run first in the read's transaction."""
    return _WATERMARK[x.dialect]
