"""Printing: JSON for scripts, rich tables for people. No policy here."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from typing import Annotated, Any

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
"""The ``--json`` option of every command that prints."""


def echo_json(obj: Any) -> None:
    """Print one JSON document on stdout."""
    typer.echo(json.dumps(obj, indent=2))


def echo_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table (plain text when stdout is not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1 on its own; the CLI's one handler ends a closed pipe.
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    table = Table(title=title, title_justify="left", show_lines=False, box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    _Console(width=200, highlight=False, soft_wrap=False).print(table)


def echo_lines(lines: Sequence[str]) -> None:
    """Print plain lines."""
    for line in lines:
        typer.echo(line)
