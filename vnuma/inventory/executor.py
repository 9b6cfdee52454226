"""Run the placing queries on either backend: SQL text with named parameters, one small executor each.

The placing queries (:mod:`.placing`) are written once as SQL text with
``:name`` parameters, which the stdlib ``sqlite3`` module and SQLAlchemy's
``text()`` both accept. An executor runs them inside a transaction that its
opener began (:mod:`.placer`):

* :class:`SqliteExecutor` on a ``sqlite3`` connection: ``vnuma place`` on an
  SQLite file, with no SQLAlchemy import. Its writer began with
  ``BEGIN IMMEDIATE``, SQLite's lock of the whole inventory (so of the host);
* :class:`AlchemyExecutor` on a SQLAlchemy connection: PostgreSQL, SQLite
  URLs with options, and the transactions of the ORM inventory (reconcile's
  adoption, the rebalance journal). ``lock`` is `` FOR UPDATE`` on
  PostgreSQL: appended to a host or tenant read, it takes that row's lock.

A constraint the database enforces comes out as :class:`Refused`, with the
driver's message, whatever the backend.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from vnuma.inventory.guard import cause_of

if TYPE_CHECKING:
    from sqlalchemy import Connection

Params = Mapping[str, Any]
Row = tuple[Any, ...]


class Refused(Exception):
    """The database refused a write (a unique index, a check, a foreign key); ``cause`` is its message."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Executor(Protocol):
    """Runs SQL text with ``:name`` parameters in its opener's transaction."""

    lock: str
    """Appended to a ``SELECT`` of one row to lock it for the transaction ('' where the transaction locks)."""

    def rows(self, sql: str, params: Params | None = None) -> list[Row]:
        """Every row of a query."""
        ...

    def one(self, sql: str, params: Params | None = None) -> Row | None:
        """The first row of a query, None when there is none."""
        ...

    def run(self, sql: str, params: Params | None = None) -> None:
        """A statement (Refused on a constraint)."""
        ...

    def many(self, sql: str, params: Sequence[Params]) -> None:
        """A statement once per parameter set (Refused on a constraint)."""
        ...


class SqliteExecutor:
    """An :class:`Executor` on a ``sqlite3`` connection."""

    lock = ""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _cursor(self, sql: str, params: Params | None) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params or {})
        except sqlite3.IntegrityError as err:
            raise Refused(cause_of(err)) from err

    def rows(self, sql: str, params: Params | None = None) -> list[Row]:
        """Every row of a query."""
        return self._cursor(sql, params).fetchall()

    def one(self, sql: str, params: Params | None = None) -> Row | None:
        """The first row of a query (``INSERT ... RETURNING`` too), None when there is none."""
        row: Row | None = self._cursor(sql, params).fetchone()
        return row

    def run(self, sql: str, params: Params | None = None) -> None:
        """A statement (Refused on a constraint)."""
        self._cursor(sql, params)

    def many(self, sql: str, params: Sequence[Params]) -> None:
        """A statement once per parameter set (Refused on a constraint)."""
        if not params:
            return
        try:
            self._conn.executemany(sql, params)
        except sqlite3.IntegrityError as err:
            raise Refused(cause_of(err)) from err


class AlchemyExecutor:
    """An :class:`Executor` on a SQLAlchemy connection (any dialect)."""

    def __init__(self, conn: Connection) -> None:
        from sqlalchemy import exc, text

        self._conn = conn
        self._text = text
        self._integrity = exc.IntegrityError
        self.lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""

    def _result(self, sql: str, params: Any) -> Any:
        try:
            return self._conn.execute(self._text(sql), params)
        except self._integrity as err:
            raise Refused(cause_of(err)) from err

    def rows(self, sql: str, params: Params | None = None) -> list[Row]:
        """Every row of a query."""
        return [tuple(r) for r in self._result(sql, dict(params or {}))]

    def one(self, sql: str, params: Params | None = None) -> Row | None:
        """The first row of a query (``INSERT ... RETURNING`` too), None when there is none."""
        row = self._result(sql, dict(params or {})).first()
        return tuple(row) if row is not None else None

    def run(self, sql: str, params: Params | None = None) -> None:
        """A statement (Refused on a constraint)."""
        self._result(sql, dict(params or {}))

    def many(self, sql: str, params: Sequence[Params]) -> None:
        """A statement once per parameter set (Refused on a constraint)."""
        if params:
            self._result(sql, [dict(p) for p in params])
