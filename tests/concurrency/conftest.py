"""The concurrency tests use ``url`` and ``pg_url`` from tests/conftest.py:
a fresh inventory on SQLite, then on PostgreSQL (``VNUMA_TEST_PG``)."""
