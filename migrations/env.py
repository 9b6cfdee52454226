"""Alembic environment for the vnuma inventory (configured from code, no alembic.ini).

Runs on the connection in ``config.attributes["connection"]`` when given
(``vnuma db upgrade`` and the tests do this, inside their own transaction),
else on ``config.attributes["url"]`` / the ``sqlalchemy.url`` option.
``render_as_batch`` because SQLite cannot ALTER most things in place.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection

from vnuma.inventory.db import make_engine, writer
from vnuma.inventory.tables import Base

config = context.config
target_metadata = Base.metadata
OPTIONS: dict[str, Any] = {"target_metadata": target_metadata, "render_as_batch": True, "compare_type": True}


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("migrations need config.attributes['connection'] or a database URL")
    return str(url)


def run_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade --sql``) instead of running it."""
    context.configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"}, **OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def _run_on(connection: Connection) -> None:
    context.configure(connection=connection, **OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Migrate through the given connection, or through a new engine for the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    engine = make_engine(_url())
    try:
        with writer(engine).connect() as conn:
            _run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
