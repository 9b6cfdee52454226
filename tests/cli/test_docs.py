"""Every command has help text and its help pasted on a command page of the manual (sqlite-utils' test_docs idea)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from vnuma.cli import app

DOCS = Path(__file__).resolve().parents[2] / "docs"
# What each page pastes with cog (tests/docs/cogs.py): `usage("host add")` -> the page.
PASTED = {
    command: page.name
    for page in sorted(DOCS.glob("*.md"))
    for command in re.findall(r'\[\[\[cog .*usage\("([^"]*)"\)', page.read_text())
}


def _commands() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    out: list[tuple[str, ...]] = []

    def walk(cmd: typer.core.TyperGroup | typer.core.TyperCommand, path: tuple[str, ...]) -> None:
        if isinstance(cmd, typer.core.TyperGroup):  # commands load lazily: ask the group for each
            if cmd.invoke_without_command and path:
                out.append(path)  # a group that is a command too (`vnuma events` lists)
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))
        else:
            out.append(path)

    walk(root, ())
    return out


COMMANDS = _commands()


def test_the_command_tree_is_what_the_manual_documents() -> None:
    assert len(COMMANDS) >= 20
    assert set(PASTED) - {""} <= {" ".join(p) for p in COMMANDS}, "a page pastes the help of no command"


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_command_has_help_and_is_on_a_command_page(path: tuple[str, ...]) -> None:
    res = CliRunner().invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output and len(res.output.splitlines()) > 3
    command = " ".join(path)
    assert command in PASTED, f"no page of docs/ pastes `vnuma {command} --help` (cog: usage({command!r}))"
    page = (DOCS / PASTED[command]).read_text()
    assert f"$ vnuma {command} --help" in page, f"docs/{PASTED[command]}: run `cog -r -I . docs/*.md`"


def _command(path: tuple[str, ...]) -> typer.core.TyperCommand:
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.get_command(typer.Context(cmd), name)
    return cmd


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_help_has_an_example_the_command_line_parser_accepts(path: tuple[str, ...]) -> None:
    examples = [
        line.split("Example:", 1)[1].strip() for line in (_command(path).help or "").splitlines() if "Example:" in line
    ]
    assert examples, f"`vnuma {' '.join(path)} --help` shows no example"
    for example in examples:
        words = shlex.split(example)
        while "=" in words[0]:  # VAR=value before the command
            words.pop(0)
        assert words[0] == "vnuma", example
        assert " ".join(path) in " ".join(words), f"the example of `vnuma {' '.join(path)}` is another command"
        # Click reads options in order: an unknown one fails before the trailing --help is reached.
        res = CliRunner().invoke(app, [*words[1:], "--help"])
        assert res.exit_code == 0, f"{example}: {res.output}"


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_usage_lines_name_arguments_in_capitals(path: tuple[str, ...]) -> None:
    """``Usage: vnuma vm repin [OPTIONS] VM`` (optional ones bracketed), never Typer's ``{vm}``."""
    res = CliRunner().invoke(app, [*path, "--help"])
    usage = res.output.splitlines()[0]
    assert f"{' '.join(path)} [OPTIONS]" in usage, usage
    words = usage.split("[OPTIONS]", 1)[1].split()
    assert all("{" not in w and "}" not in w for w in words), usage
    assert all(w.strip("[]").upper() == w.strip("[]") for w in words), usage


def test_a_missing_argument_is_named_as_the_usage_line_names_it() -> None:
    res = CliRunner().invoke(app, ["vm", "repin"])
    assert res.exit_code == 2 and "Usage: root vm repin [OPTIONS] VM" in res.output
    assert "Missing argument 'VM'." in res.output
