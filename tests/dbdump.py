"""Before/after comparisons of an SQLite inventory, read with the stdlib (not vnuma)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

AUDIT_ROW = 'INSERT INTO "audit_log"'


def dump(path: Path, *, audit: bool = False) -> list[str]:
    """Every schema statement and row as SQL text; the audit log's rows only when ``audit`` (a refused
    command adds one there and changes nothing else: the state the tests compare is the rest)."""
    conn = sqlite3.connect(path)
    try:
        return [line for line in conn.iterdump() if audit or not line.startswith(AUDIT_ROW)]
    finally:
        conn.close()


def audit_rows(path: Path) -> list[tuple[object, ...]]:
    """The audit log's rows: (invocation, command, outcome, changes JSON), in order."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT invocation, command, outcome, changes FROM audit_log ORDER BY id").fetchall()
    finally:
        conn.close()
