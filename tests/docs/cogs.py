"""What cog pastes into the manual: ``vnuma COMMAND --help`` and sample output, never typed by hand.

A page holds, for each command it documents::

    <!-- [[[cog from tests.docs.cogs import usage; usage("host add") ]]] -->
    ...the help text, written by cog...
    <!-- [[[end]]] -->

``cog -r -I . docs/*.md`` (from the repository's root) rewrites every such block; tests/docs/test_help.py
runs ``cog --check`` so a help text that changed without its page fails the tests.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

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


def transcript(*commands: str, show: int = 1) -> None:
    """Run ``commands`` (each ``vnuma ...``) in order on a fresh inventory, and paste the last ``show`` of them
    with their output, as a terminal shows them."""
    shown = []
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "inventory.db")
        for command in commands:
            words = shlex.split(command)
            assert words[0] == "vnuma", command
            res = CliRunner().invoke(app, ["--db", db, "--create", *words[1:]], prog_name="vnuma",
                                     terminal_width=WIDTH)
            assert res.exit_code == 0, f"{command}: {res.output}"
            shown.append(f"$ {command}\n{res.stdout.rstrip()}")
    cog.outl("```text\n" + "\n".join(shown[-show:]) + "\n```")
