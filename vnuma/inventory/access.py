"""Opening the inventory without the ORM: an executor per transaction, on either backend.

:func:`open_access` picks the executor (:mod:`.executor`) for a URL:

* an SQLite file at :data:`SCHEMA_REVISION` (a plain ``sqlite:///PATH``):
  the stdlib ``sqlite3`` module, set up as ``db.make_engine`` sets up
  SQLite (busy timeout, foreign keys, WAL, ``BEGIN`` issued by us, writers
  ``BEGIN IMMEDIATE``), and SQLAlchemy is never imported (it costs
  0.3-0.5 s, more than deciding on 1,000 hosts);
* a PostgreSQL database at head given by a plain ``postgresql[+psycopg]://``
  URL: psycopg 3 directly (no SQLAlchemy either); reads run in
  ``REPEATABLE READ`` transactions, and a closed access's connection stays
  open for the process's next opening (one access, so one thread, at a time);
* anything else (URL options, a new file to create, a schema to refuse, a
  server that cannot be reached): a SQLAlchemy Core engine after the schema check every command
  makes; the ORM is not loaded. A server database's engine and its pool of
  connections stay for the next opening in the same process (a worker or a
  long-running caller stays warm, see ``db.open_engine``).

``vnuma place`` (:mod:`.placer`) and the read commands (:mod:`.reading`) go
through it; what they run is SQL text written once, the same on every executor.
"""

from __future__ import annotations

import functools
import os
import select
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from vnuma.errors import ConflictError, InventoryError
from vnuma.inventory.executor import AlchemyExecutor, Executor, PsycopgExecutor, SqliteExecutor
from vnuma.inventory.guard import cause_of, hint_for_text
from vnuma.inventory.schema import SCHEMA_REVISION

DEFAULT_BUSY_TIMEOUT_MS = 5000
_PREFIX = "sqlite:///"

Begin = Callable[[bool], AbstractContextManager[Executor]]


class Access:
    """Transactions on one inventory: ``begin(write)`` yields an executor and commits at the end; ``alone()``
    one for a single read statement (on PostgreSQL outside a transaction: one round trip, not three)."""

    def __init__(
        self, url: str, begin: Begin, close: Callable[[], None],
        alone: Callable[[], AbstractContextManager[Executor]] | None = None,
    ) -> None:
        self.url = url
        self.begin = begin
        self._close = close
        self._alone = alone

    def alone(self) -> AbstractContextManager[Executor]:
        """An executor for one read statement, which is its own snapshot (a read transaction where the
        backend gains nothing from leaving it out)."""
        return self._alone() if self._alone is not None else self.begin(False)

    def close(self) -> None:
        """Close the connection(s)."""
        self._close()

    def __enter__(self) -> Access:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class OverAccess:
    """Base of what runs its queries over an :class:`Access` (:class:`.placer.Placer`,
    :class:`.reading.Reader`): closing and the ``with`` statement."""

    def __init__(self, access: Access) -> None:
        self.url = access.url
        self._access = access

    def close(self) -> None:
        """Close the connection(s)."""
        self._access.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_access(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Access:
    """The inventory at ``url``, its transactions on the executor the module docstring names.

    Raises:
        InventoryError: as ``open_inventory`` raises it (unreachable, not a vnuma
            inventory, a schema other than head).
    """
    path = sqlite_file(url)
    if path is not None:
        conn = _sqlite_at_head(path, busy_timeout_ms)
        if conn is not None:
            return Access(url, _sqlite_begin(conn, url), conn.close)
    conninfo = postgres_conninfo(url)
    if conninfo is not None:
        at_head = _postgres_at_head(conninfo)
        if at_head is not None:
            pg, checked = at_head
            return Access(url, _postgres_begin(pg, url), lambda: _check_in(conninfo, pg, checked),
                          _postgres_alone(pg, url))
    from vnuma.inventory.db import open_engine, writer
    from vnuma.inventory.guard import guarded

    engine, shared = open_engine(url, busy_timeout_ms=busy_timeout_ms)
    # On PostgreSQL the snapshot's statements see one state (SQLite's BEGIN gives that already).
    reader = engine.execution_options(isolation_level="REPEATABLE READ") if shared else engine

    @contextmanager
    def begin(write: bool) -> Iterator[Executor]:
        with guarded(url), (writer(engine) if write else reader).begin() as conn:
            yield AlchemyExecutor(conn)

    return Access(url, begin, (lambda: None) if shared else engine.dispose)


def sqlite_file(url: str) -> str | None:
    """The file of a plain ``sqlite:///PATH`` URL naming an existing file, else None."""
    if not url.startswith(_PREFIX):
        return None
    path = url[len(_PREFIX) :]
    # Query options, %-escapes, URI filenames and in-memory databases: leave them to SQLAlchemy.
    if not path or path == ":memory:" or path.startswith("file:") or any(ch in path for ch in "?%"):
        return None
    return path if os.path.isfile(path) else None


@functools.lru_cache(maxsize=64)
def postgres_conninfo(url: str) -> str | None:
    """The psycopg connection string of a plain ``postgresql[+psycopg]://`` URL (no query options), else None
    (kept per URL: a serving process opens its one inventory at every request)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgresql+psycopg") or parts.query or parts.fragment:
        return None
    from psycopg.conninfo import make_conninfo

    fields = {
        "host": parts.hostname,
        "port": parts.port,
        "user": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
        "dbname": unquote(parts.path.lstrip("/")) or None,
    }
    return make_conninfo(**{k: v for k, v in fields.items() if v is not None})


RECHECK_S = 1.0
"""How long a kept connection's schema check holds: a process that opens the inventory again within it (a
serving worker, at every request) skips the check's round trip unless the server has sent something since (a
terminated session: checked, then replaced); an upgrade is made with the services stopped
(docs/operations.md), and one that is not is refused at the next check."""


def _postgres_at_head(conninfo: str) -> tuple[Any, float] | None:
    """A psycopg connection when the database is a vnuma inventory at :data:`SCHEMA_REVISION`, and when it was
    found so, else None (the SQLAlchemy path then says what is wrong: unreachable, never upgraded, behind)."""
    import psycopg

    kept = _check_out(conninfo)
    conn, checked = kept if kept is not None else (None, 0.0)
    now = time.monotonic()
    if conn is not None and not conn.closed and now - checked < RECHECK_S and not _heard_from(conn):
        return conn, checked
    try:
        if conn is None or conn.closed:
            conn = psycopg.connect(conninfo)
        conn.autocommit = True
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        # From here transactions begin with their first statement, BEGIN sent along with it.
        conn.autocommit = False
    except (psycopg.Error, ValueError):
        rows = []
    if conn is not None and rows == [(SCHEMA_REVISION,)]:
        return conn, now
    if conn is not None:
        conn.close()
    return None


def _heard_from(conn: Any) -> bool:
    """Has an idle connection's server sent anything (a terminated session's last message, or its end)?
    Such a connection is checked again, and given up when the check fails."""
    return bool(select.select([conn.fileno()], [], [], 0)[0])


_IDLE: dict[str, list[tuple[Any, float]]] = {}
"""Open psycopg connections no :class:`Access` is using, each with when its schema was last checked, kept for
the next opening of this process: each thread of a serving process opens its own access, so a connection is
only ever used by one at a time."""
_IDLE_LOCK = threading.Lock()
_IDLE_MAX = 32


def _check_out(conninfo: str) -> tuple[Any, float] | None:
    with _IDLE_LOCK:
        idle = _IDLE.get(conninfo)
        return idle.pop() if idle else None


def _check_in(conninfo: str, conn: Any, checked: float) -> None:
    """An access is closed: its connection waits for the next opening (closed when too many wait)."""
    if conn.closed:
        return
    with _IDLE_LOCK:
        idle = _IDLE.setdefault(conninfo, [])
        if len(idle) < _IDLE_MAX:
            idle.append((conn, checked))
            return
    conn.close()


def _forget_connections() -> None:
    # A forked child must not use its parent's connections (the parent still does).
    _IDLE.clear()


os.register_at_fork(after_in_child=_forget_connections)


def _postgres_begin(conn: Any, url: str) -> Begin:
    import psycopg

    @contextmanager
    def begin(write: bool) -> Iterator[Executor]:
        try:
            # Set before the transaction: psycopg sends its BEGIN with them, and with the first query. Writes
            # are READ COMMITTED whatever the server's default (see db.make_engine).
            level = psycopg.IsolationLevel
            conn.isolation_level = level.READ_COMMITTED if write else level.REPEATABLE_READ
            conn.read_only = None if write else True
            try:
                yield PsycopgExecutor(conn)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        except psycopg.Error as err:
            raise _translated(mask(url), err, psycopg.errors.IntegrityError) from err

    return begin


def _postgres_alone(conn: Any, url: str) -> Callable[[], AbstractContextManager[Executor]]:
    import psycopg

    @contextmanager
    def alone() -> Iterator[Executor]:
        try:
            conn.autocommit = True  # no BEGIN and COMMIT around the statement
            try:
                yield PsycopgExecutor(conn)
            finally:
                conn.autocommit = False
        except psycopg.Error as err:
            raise _translated(mask(url), err, psycopg.errors.IntegrityError) from err

    return alone


def _translated(shown_url: str, err: Exception, integrity: type[Exception]) -> ConflictError | InventoryError:
    """A driver's error as the vnuma error to raise: a refused change (a constraint) or database trouble."""
    if isinstance(err, integrity):
        return ConflictError(
            f"inventory {shown_url} refused a conflicting change: {cause_of(err)}",
            hint="another command claimed the same resource first; run the command again",
        )
    return InventoryError(f"inventory {shown_url}: {cause_of(err)}", hint=hint_for_text(cause_of(err)))


def mask(url: str) -> str:
    """The URL with its password replaced by ``***``, for messages (no SQLAlchemy needed)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _sqlite_at_head(path: str, busy_timeout_ms: int) -> sqlite3.Connection | None:
    """A connection to ``path`` when it is a vnuma inventory at :data:`SCHEMA_REVISION`, else None."""
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        rows = []
    if conn is not None and rows == [(SCHEMA_REVISION,)]:
        return conn
    if conn is not None:
        conn.close()
    return None


def _sqlite_begin(conn: sqlite3.Connection, url: str) -> Begin:
    @contextmanager
    def begin(write: bool) -> Iterator[Executor]:
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield SqliteExecutor(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise _translated(url, err, sqlite3.IntegrityError) from err

    return begin
