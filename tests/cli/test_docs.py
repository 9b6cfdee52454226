"""Every command has help text and appears in the README (sqlite-utils' test_docs idea)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from vnuma.cli import app

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _commands() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    out: list[tuple[str, ...]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(sub, (*path, name))
        else:
            out.append(path)

    walk(root, ())
    return out


COMMANDS = _commands()


def test_the_command_tree_is_what_the_readme_promises() -> None:
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_command_has_help_and_is_in_the_readme(path: tuple[str, ...]) -> None:
    res = CliRunner().invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output and len(res.output.splitlines()) > 3
    assert f"vnuma {' '.join(path)}" in README, f"README does not mention `vnuma {' '.join(path)}`"
