"""Inventory database: URL resolution, engine set-up, and Alembic migrations run from code.

Settings arrive as arguments (the CLI reads the environment once and passes
it down); nothing here reads ``os.environ`` or builds an engine at import
time. A new, empty SQLite file is created at the head revision on first
use. Any other database is never migrated implicitly, not even an empty
PostgreSQL one: only :func:`upgrade` (``vnuma db upgrade``, run once by the
operator) creates or changes its schema, and until then every command
refuses it as behind.

Importing this module is cheap: SQLAlchemy (~0.3 s) and Alembic are imported
by the functions that use them, so that ``resolve_url`` and the ``sqlite3``
path of ``vnuma place`` (:mod:`vnuma.inventory.placer`) never load them.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vnuma.errors import ConfigError, InventoryError
from vnuma.inventory.schema import SCHEMA_REVISION, WRITE_OPTION
from vnuma.paths import migrations_dir

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection, Engine


# Alembic is imported only where a migration is read or run: importing it
# costs ~0.3 s, and every command checks the schema. The fast path compares
# the database's alembic_version row with SCHEMA_REVISION (a test keeps that
# constant equal to the migrations' head).

DEFAULT_BUSY_TIMEOUT_MS = 5000
_UPGRADE_HINT = "run `vnuma db upgrade`"
_NEWER_HINT = (
    "upgrade vnuma: a newer version migrated this inventory "
    "(`vnuma db upgrade` only moves forward to revisions it knows)"
)


def masked_url(url: str) -> str:
    """The URL for display: its password replaced by ``***``."""
    from vnuma.inventory.guard import mask_url

    return mask_url(url)


def resolve_url(value: str | None, env: Mapping[str, str]) -> str:
    """The inventory URL of ``value`` (the configured ``database``: see :mod:`vnuma.services.config`), or
    of ``$XDG_DATA_HOME/vnuma/inventory.db`` when None.

    A value containing ``://`` is a SQLAlchemy URL; anything else is a file
    path, made absolute, for SQLite.
    """
    value = value or str(_default_path(env))
    if "://" in value:
        return value
    return f"sqlite:///{_absolute(value, env)}"


def missing_sqlite_file(url: str) -> str | None:
    """The file of a ``sqlite:///PATH`` URL when it does not exist (None for other URLs and existing files)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = url[len(prefix) :].split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return None if os.path.exists(path) else path


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path(pwd.getpwuid(os.getuid()).pw_dir)


def _default_path(env: Mapping[str, str]) -> Path:
    data_home = env.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    base = Path(data_home) if os.path.isabs(data_home) else _home(env) / ".local" / "share"
    return base / "vnuma" / "inventory.db"


def _absolute(path: str, env: Mapping[str, str]) -> str:
    if path == "~" or path.startswith("~/"):
        path = str(_home(env) / path[2:])
    return os.path.abspath(path)


def make_engine(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Engine:
    """An engine for ``url``; for SQLite: parent directory created, foreign keys, WAL, busy timeout.

    Raises:
        ConfigError: an unreadable URL or a driver that is not installed.
        InventoryError: the SQLite file's directory cannot be created.
    """
    from sqlalchemy import create_engine

    from vnuma.inventory.guard import guarded, mask_url, parse_url

    parsed = parse_url(url)
    with guarded(url):
        is_sqlite = parsed.get_backend_name() == "sqlite"
        if is_sqlite:
            _make_parent_dir(url, parsed.database)
        # Writes rely on READ COMMITTED (a claim reads, after taking its host's row lock, what the lock's previous
        # holder committed), so it is set here whatever the server's default_transaction_isolation says.
        options = {"isolation_level": "READ COMMITTED"} if parsed.get_backend_name() == "postgresql" else {}
        try:
            engine = create_engine(parsed, **options)
        except ModuleNotFoundError as err:
            raise ConfigError(
                f"database URL {mask_url(url)} needs the Python package {err.name!r}",
                hint="for PostgreSQL install vnuma[postgres] (psycopg 3)",
            ) from err
    if is_sqlite:
        _install_sqlite_hooks(engine, busy_timeout_ms)
    return engine


def _make_parent_dir(url: str, database: str | None) -> None:
    from vnuma.inventory.guard import mask_url

    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InventoryError(f"inventory {mask_url(url)}: cannot create its directory: {err}") from err


def _install_sqlite_hooks(engine: Engine, busy_timeout_ms: int) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: object, _record: object) -> None:
        # pysqlite would defer BEGIN until the first write, so a transaction's
        # reads and its writes would not be atomic; we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None  # type: ignore[attr-defined]
        cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # A writer takes the write lock up front (waiting up to busy_timeout)
        # instead of failing when it upgrades a stale read snapshot.
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def writer(engine: Engine) -> Engine:
    """The same engine, marked so that SQLite transactions start with ``BEGIN IMMEDIATE``."""
    return engine.execution_options(**{WRITE_OPTION: True})


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic config for ``migrations/`` (no alembic.ini), bound to a connection or a URL."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    cfg.set_main_option("file_template", "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s")
    if connection is not None:
        cfg.attributes["connection"] = connection
    if url is not None:
        cfg.attributes["url"] = url
    return cfg


def head_revision() -> str:
    """The newest schema revision this vnuma knows."""
    from alembic.script import ScriptDirectory

    from vnuma.inventory.guard import guarded

    with guarded("migrations"):
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "migrations/versions holds no revision"
    return head


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def current_revision(url: str) -> str | None:
    """The database's schema revision; None for a new or empty database (a missing file is not created)."""
    from vnuma.inventory.guard import guarded, parse_url

    parsed = parse_url(url)
    database = parsed.database
    is_file = bool(database) and database != ":memory:" and not str(database).startswith("file:")
    if parsed.get_backend_name() == "sqlite" and is_file and not Path(str(database)).exists():
        return None
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with guarded(url), engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (default: head) in one transaction."""
    from alembic import command

    from vnuma.inventory.guard import guarded

    engine = make_engine(url)
    try:
        with guarded(url), writer(engine).begin() as conn:
            command.upgrade(alembic_config(conn), revision)
    finally:
        engine.dispose()


_SHARED: dict[tuple[str, int], Engine] = {}


def _forget_shared_engines() -> None:
    # A forked child must not use (or close) its parent's connections.
    for engine in _SHARED.values():
        engine.dispose(close=False)
    _SHARED.clear()


os.register_at_fork(after_in_child=_forget_shared_engines)


def open_engine(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> tuple[Engine, bool]:
    """An engine for the inventory at ``url`` after the schema check (a new SQLite file is created at head),
    and whether it is shared.

    A server database's engine (PostgreSQL) is shared by every opening in
    this process, so a process that opens the inventory again (a worker, a
    long-running caller) reuses its pool of warm connections; the schema is
    checked on every opening all the same. SQLite files get an engine each.

    Raises:
        InventoryError: as :func:`open_inventory`.
    """
    from vnuma.inventory.guard import guarded, parse_url

    key = (url, busy_timeout_ms)
    engine = _SHARED.get(key)
    shared = engine is not None or parse_url(url).get_backend_name() != "sqlite"
    if engine is None:
        engine = make_engine(url, busy_timeout_ms=busy_timeout_ms)
    try:
        with guarded(url):
            check_schema(engine, url)
    except BaseException:
        if key not in _SHARED:
            engine.dispose()
        raise
    if shared:
        _SHARED[key] = engine
    return engine, shared


def _at_head(engine: Engine) -> bool:
    """Is the database at :data:`SCHEMA_REVISION`? (One query: the common case of every command.)"""
    from sqlalchemy import exc, text

    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except exc.DBAPIError:
        return False  # no such table (yet): the full check says what is wrong
    return rows == [SCHEMA_REVISION]


def check_schema(engine: Engine, url: str) -> None:
    """Refuse a database not at head (an empty SQLite file is created at head).

    Raises:
        InventoryError: not a vnuma inventory, or a schema other than head (hint: ``vnuma db upgrade``).
    """
    from sqlalchemy import inspect, text

    from vnuma.inventory.guard import mask_url

    if _at_head(engine):
        return
    with engine.connect() as conn:
        tables = inspect(conn).get_table_names()
        revision = None
        if "alembic_version" in tables:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
            revision = rows[0] if len(rows) == 1 else None
    if revision == SCHEMA_REVISION:
        return
    if not tables and engine.dialect.name == "sqlite":
        # Only a new SQLite file is vnuma's own to create; a server database is
        # the operator's, migrated by `vnuma db upgrade` alone (at base until then).
        if not _create_at_head(engine):
            check_schema(engine, url)
        return
    if tables and "alembic_version" not in tables:
        raise InventoryError(
            f"inventory {mask_url(url)} is not a vnuma inventory (it has tables but no alembic_version)",
            hint="point --db or VNUMA_DB at a vnuma inventory, or at a new file",
        )
    head = head_revision()
    if revision != head:
        hint = _UPGRADE_HINT if revision is None or revision in _known_revisions() else _NEWER_HINT
        raise InventoryError(
            f"inventory {mask_url(url)}: schema is at revision {revision or 'base'}, this vnuma needs {head}",
            hint=hint,
        )


def _create_at_head(engine: Engine) -> bool:
    """Create the schema at head; False when another process created tables meanwhile."""
    from alembic import command
    from sqlalchemy import inspect

    with writer(engine).begin() as conn:
        # Re-checked under the write lock: another process may have got there first.
        if inspect(conn).get_table_names():
            return False
        command.upgrade(alembic_config(conn), "head")
    return True
