"""Run the placing queries on either backend: SQL text with named parameters, one small executor each.

The placing queries (:mod:`.placing`) are written once as SQL text with
``:name`` parameters, which the stdlib ``sqlite3`` module and SQLAlchemy's
``text()`` both accept. An executor runs them inside a transaction that its
opener began (:mod:`.placer`):

* :class:`SqliteExecutor` on a ``sqlite3`` connection: ``vnuma place`` on an
  SQLite file, with no SQLAlchemy import. Its writer began with
  ``BEGIN IMMEDIATE``, SQLite's lock of the whole inventory (so of the host);
* :class:`PsycopgExecutor` on a psycopg 3 connection: ``vnuma place`` on a
  PostgreSQL inventory at head given by a plain URL, with no SQLAlchemy import;
* :class:`AlchemyExecutor` on a SQLAlchemy connection: any other URL, and the
  transactions of the ORM inventory (reconcile's adoption, the rebalance
  journal).

``lock`` is `` FOR UPDATE`` on PostgreSQL: appended to a host or tenant
read, it takes that row's lock for the transaction.

A constraint the database enforces comes out as :class:`Refused`, with the
driver's message, whatever the backend.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from vnuma.inventory.guard import cause_of

if TYPE_CHECKING:
    from sqlalchemy import Connection

Params = Mapping[str, Any]
Row = tuple[Any, ...]
Query = tuple[str, Params | None]


class Refused(Exception):
    """The database refused a write (a unique index, a check, a foreign key); ``cause`` is its message."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Executor(Protocol):
    """Runs SQL text with ``:name`` parameters in its opener's transaction."""

    lock: str
    """Appended to a ``SELECT`` of one row to lock it for the transaction ('' where the transaction locks)."""
    dialect: str
    """``sqlite`` or ``postgresql``: the few statements written per backend (:mod:`.changes`) pick by it."""

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

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
        """Insert ``rows`` (values in ``columns`` order) into ``table`` (Refused on a constraint)."""
        ...

    def batch(self, queries: Sequence[Query]) -> list[list[Row]]:
        """The rows of several queries run in order; a backend may send them together."""
        ...

    def write_batch(self, statements: Sequence[tuple[str, Sequence[Params]]]) -> None:
        """Several statements, each once per parameter set, in order (Refused on a constraint)."""
        ...


class _OneByOne:
    """``batch`` and ``write_batch`` as one statement after another (SQLite in-process: no round trips);
    ``insert`` as :meth:`Executor.many` with named parameters."""

    def insert(self: Executor, table: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
        """Insert ``rows`` (values in ``columns`` order) into ``table`` (Refused on a constraint)."""
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
        self.many(sql, [dict(zip(columns, r, strict=True)) for r in rows])

    def batch(self: Executor, queries: Sequence[Query]) -> list[list[Row]]:
        """The rows of several queries run in order."""
        return [self.rows(sql, params) for sql, params in queries]

    def write_batch(self: Executor, statements: Sequence[tuple[str, Sequence[Params]]]) -> None:
        """Several statements, each once per parameter set, in order (Refused on a constraint)."""
        for sql, params in statements:
            self.many(sql, params)


class _Cursors(_OneByOne):
    """``rows``, ``one`` and ``run`` over the DB-API cursor a subclass's ``_cursor`` gives."""

    def _cursor(self, sql: str, params: Params | None) -> Any:
        raise NotImplementedError

    def rows(self, sql: str, params: Params | None = None) -> list[Row]:
        """Every row of a query."""
        return list(self._cursor(sql, params).fetchall())

    def one(self, sql: str, params: Params | None = None) -> Row | None:
        """The first row of a query (``INSERT ... RETURNING`` too), None when there is none."""
        row: Row | None = self._cursor(sql, params).fetchone()
        return row

    def run(self, sql: str, params: Params | None = None) -> None:
        """A statement (Refused on a constraint)."""
        self._cursor(sql, params)


class SqliteExecutor(_Cursors):
    """An :class:`Executor` on a ``sqlite3`` connection."""

    lock = ""
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _cursor(self, sql: str, params: Params | None) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params or {})
        except sqlite3.IntegrityError as err:
            raise Refused(cause_of(err)) from err

    def many(self, sql: str, params: Sequence[Params]) -> None:
        """A statement once per parameter set (Refused on a constraint)."""
        if not params:
            return
        try:
            self._conn.executemany(sql, params)
        except sqlite3.IntegrityError as err:
            raise Refused(cause_of(err)) from err

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
        """Insert ``rows`` (values in ``columns`` order) into ``table``: positional parameters, which
        ``sqlite3`` binds faster than names (a watch round writes thousands)."""
        if not rows:
            return
        try:
            self._conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
        except sqlite3.IntegrityError as err:
            raise Refused(cause_of(err)) from err


class AlchemyExecutor(_OneByOne):
    """An :class:`Executor` on a SQLAlchemy connection (any dialect)."""

    def __init__(self, conn: Connection) -> None:
        from sqlalchemy import exc, text

        self._conn = conn
        self._text = text
        self._integrity = exc.IntegrityError
        self.dialect = conn.dialect.name
        self.lock = " FOR UPDATE" if self.dialect == "postgresql" else ""

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


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class PsycopgExecutor(_Cursors):
    """An :class:`Executor` on a psycopg 3 connection (PostgreSQL without SQLAlchemy)."""

    lock = " FOR UPDATE"
    dialect = "postgresql"
    _translated: dict[str, str] = {}  # noqa: RUF012 - a cache shared by every instance

    def __init__(self, conn: Any) -> None:
        import psycopg

        self._conn = conn
        self._integrity = psycopg.errors.IntegrityError

    def _sql(self, sql: str) -> str:
        """``:name`` parameters as psycopg's ``%(name)s``."""
        found = self._translated.get(sql)
        if found is None:
            found = self._translated[sql] = _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))
        return found

    def _cursor(self, sql: str, params: Params | None) -> Any:
        try:
            return self._conn.execute(self._sql(sql), params or {})
        except self._integrity as err:
            raise Refused(cause_of(err)) from err

    def many(self, sql: str, params: Sequence[Params]) -> None:
        """A statement once per parameter set (Refused on a constraint)."""
        self.write_batch([(sql, params)])

    def batch(self, queries: Sequence[Query]) -> list[list[Row]]:
        """The rows of several queries, sent together in one pipeline (one round trip)."""
        try:
            with self._conn.pipeline():
                cursors = [self._conn.execute(self._sql(sql), params or {}) for sql, params in queries]
        except self._integrity as err:
            raise Refused(cause_of(err)) from err
        return [list(c.fetchall()) for c in cursors]

    def write_batch(self, statements: Sequence[tuple[str, Sequence[Params]]]) -> None:
        """Several statements, each once per parameter set, sent together in one pipeline."""
        try:
            with self._conn.pipeline(), self._conn.cursor() as cur:
                for sql, params in statements:
                    if params:
                        cur.executemany(self._sql(sql), params)
        except self._integrity as err:
            raise Refused(cause_of(err)) from err
