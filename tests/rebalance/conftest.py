"""Reuse the CLI fixtures (a runner on a fresh inventory, a database dump)."""

from tests.cli.conftest import cli, dumped  # noqa: F401
