"""What the code knows about the inventory schema without importing SQLAlchemy.

The schema revision and the enumerated column values live here so that the
``sqlite3`` path (:mod:`vnuma.inventory.placer`) can check and write
the schema without loading the ORM; :mod:`vnuma.inventory.models` builds its
CHECK constraints on them.
"""

from __future__ import annotations

from enum import StrEnum

# The Alembic head the models correspond to. Commands compare the database's
# alembic_version with it without importing Alembic; tests/inventory checks it
# equals the head of migrations/versions, so a new revision must bump it.
SCHEMA_REVISION = "0028"

# Execution option that makes SQLite begin a transaction with BEGIN IMMEDIATE (see db.make_engine).
WRITE_OPTION = "vnuma_write"


class VmState(StrEnum):
    """Lifecycle of a VM in the inventory: claimed, then defined/running/stopped in libvirt."""

    PLACED = "placed"
    DEFINED = "defined"
    RUNNING = "running"
    STOPPED = "stopped"


class RunStatus(StrEnum):
    """A rebalance run: applying (or interrupted), failed at a step, finished, or rolled back."""

    RUNNING = "running"
    FAILED = "failed"
    DONE = "done"
    ABORTED = "aborted"


class StepStatus(StrEnum):
    """A journaled move: not begun, claims moved and libvirt being changed, finished, being undone, undone."""

    PENDING = "pending"
    STARTED = "started"
    DONE = "done"
    UNDOING = "undoing"
    UNDONE = "undone"
