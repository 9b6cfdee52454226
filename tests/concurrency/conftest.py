"""Fixtures for the concurrency tests: a fresh inventory URL on SQLite or on PostgreSQL.

PostgreSQL cases need ``VNUMA_TEST_PG`` (a server URL the tests may create and
drop databases from; ``scripts/test`` sets it) and carry the ``postgres`` marker.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url


@pytest.fixture
def pg_url() -> Iterator[str]:
    server = os.environ.get("VNUMA_TEST_PG")
    if not server:
        pytest.skip("VNUMA_TEST_PG is not set")
    name = f"vnuma_race_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/inventory.db"
    return str(request.getfixturevalue("pg_url"))
