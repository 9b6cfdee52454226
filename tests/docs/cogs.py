"""What cog pastes into the manual's command pages: ``vnuma COMMAND --help``, never typed by hand.

A page holds, for each command it documents::

    <!-- [[[cog from tests.docs.cogs import usage; usage("host add") ]]] -->
    ...the help text, written by cog...
    <!-- [[[end]]] -->

``cog -r -I . docs/*.md`` (from the repository's root) rewrites every such block; tests/docs/test_help.py
runs ``cog --check`` so a help text that changed without its page fails the tests.
"""

from __future__ import annotations

import cog
from typer.testing import CliRunner

from vnuma.cli import app

WIDTH = 100  # the terminal width the texts are laid out for: the same on every machine


def help_text(command: str) -> str:
    """``vnuma COMMAND --help`` as Click prints it on a terminal ``WIDTH`` columns wide."""
    res = CliRunner().invoke(
        app, [*command.split(), "--help"], prog_name="vnuma", terminal_width=WIDTH, max_content_width=WIDTH
    )
    assert res.exit_code == 0, res.output
    return res.stdout


def usage(command: str) -> None:
    """Paste ``vnuma COMMAND --help`` as a fenced text block."""
    line = " ".join(["vnuma", *command.split(), "--help"])
    cog.outl(f"```text\n$ {line}\n{help_text(command).rstrip()}\n```")
