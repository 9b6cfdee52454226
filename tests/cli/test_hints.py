"""Every option a hint names exists on the command that prints it.

The hints and the commands that can print each are found by a static walk of the package
(:mod:`tests.cli.hintwalk`); the options are read from the Click command tree. In a hint, options after
``vnuma CMD`` belong to that command (until the next ``vnuma``, the end of a backquoted span or of a
parenthesis, ``;`` or ``,``); options inside a backquoted span of another program (```virsh ...```) are
that program's; any other option belongs to the command printing the hint, so it must exist on every
command that can print it (or on the root: ``--db``, ``--server``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import import_module

import pytest
import typer

from tests.cli.hintwalk import Graph, Node, key_of, reached_by
from vnuma.cli import COMMANDS, app

Path = tuple[str, ...]
TOKEN = re.compile(r"`|\(|\)|;|,|[^\s`(),;]+")
OPTION = re.compile(r"--[a-z][a-z0-9-]*")


@cache
def _tree() -> dict[Path, typer.core.TyperCommand | typer.core.TyperGroup]:
    root = typer.main.get_command(app)
    out: dict[Path, typer.core.TyperCommand | typer.core.TyperGroup] = {(): root}

    def walk(cmd: typer.core.TyperGroup | typer.core.TyperCommand, path: Path) -> None:
        out[path] = cmd
        if isinstance(cmd, typer.core.TyperGroup):
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))

    walk(root, ())
    return out


def options(path: Path) -> set[str]:
    """The options of the command at ``path`` (``()``: the root's, which every command accepts)."""
    return {opt for p in _tree()[path].params for opt in p.opts if opt.startswith("--")}


def _callbacks() -> list[tuple[Path, str]]:
    """Each command's path and the graph key of its callback."""
    out: list[tuple[Path, str]] = []
    for name, (module, attribute, help_text) in COMMANDS.items():
        target = getattr(import_module(module), attribute)
        if help_text is None:
            out.append(((name,), key_of(target)))
            continue
        if target.registered_callback is not None and target.registered_callback.invoke_without_command:
            out.append(((name,), key_of(target.registered_callback.callback)))  # a group that runs alone (events)
        for info in target.registered_commands:
            sub = info.name or info.callback.__name__.replace("_", "-")
            out.append(((name, sub), key_of(info.callback)))
    return out


@cache
def _walk() -> tuple[Graph, dict[str, set[Path]]]:
    graph = Graph()
    return graph, reached_by(graph, _callbacks())


def named_options(text: str) -> list[tuple[Path | None, str]]:
    """The options a hint names, each with the command it belongs to (None: the command printing it)."""
    tokens = TOKEN.findall(text)
    out: list[tuple[Path | None, str]] = []
    command: Path | None = None
    in_quote = foreign = False
    depth = scope_depth = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "`":
            in_quote = not in_quote
            if in_quote:
                nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
                foreign = nxt != "vnuma" and not nxt.startswith("--")
            elif command is not None and scope_depth == -1:
                command = None
            foreign = foreign and in_quote
        elif tok == "(":
            depth += 1
            command = None if scope_depth != -1 else command
        elif tok == ")":
            depth -= 1
            if command is not None and depth < scope_depth:
                command = None
        elif tok in (";", ","):
            command = None
        elif tok == "vnuma":
            i, command, globals_ = _command_at(tokens, i + 1)
            out.extend(((), g) for g in globals_)
            scope_depth = -1 if in_quote else depth
            continue
        elif not foreign:
            out.extend((command, opt) for opt in OPTION.findall(tok) if tok.startswith("--") or "/--" in tok)
        i += 1
    return out


def _command_at(tokens: list[str], i: int) -> tuple[int, Path, list[str]]:
    """The command path named from ``tokens[i]`` on (after ``vnuma``), the index after it, and the root
    options given before it."""
    tree = _tree()
    globals_: list[str] = []
    path: Path = ()
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and not path:
            globals_.append(tok)
            takes_value = any(tok in p.opts and not getattr(p, "is_flag", False) for p in tree[()].params)
            i += 2 if takes_value else 1
            continue
        if (*path, tok) in tree and isinstance(tree[path], typer.core.TyperGroup):
            path = (*path, tok)
            i += 1
            continue
        break
    return i, path, globals_


def _hints() -> list[tuple[Node, str, int]]:
    graph, _ = _walk()
    return [(node, text, line) for node, text, line in graph.hints() if "--" in text or "vnuma " in text]


HINTS = _hints()


def test_the_walk_finds_the_hints_it_should() -> None:
    """The walk is not vacuous: it finds hints of each kind and the commands that print them."""
    graph, reached = _walk()
    texts = {text for _, text, _ in graph.hints()}
    assert "e.g. --interval 2s" in texts  # a keyword argument
    assert any("rebalance --resume" in t for t in texts)  # a module constant
    assert len(HINTS) > 40
    assert reached["vnuma.services.bandwidth:parse_interval"] == {("stats",), ("watch",), ("serve",)}
    assert ("vm", "migrate") in reached["vnuma.services.movekinds:move_kind"]


def test_the_reader_of_hints_attributes_options() -> None:
    assert named_options("e.g. --interval 2s") == [(None, "--interval")]
    assert named_options("create it: vnuma --db {} db upgrade (or add --create)") == [
        ((), "--db"), (None, "--create")]
    assert named_options("see `vnuma host add NAME --uri URI`, or --partial; save `virsh domstats --memory`") == [
        (("host", "add"), "--uri"), (None, "--partial")]
    assert named_options("(vnuma vm migrate --cold) --allow-restart") == [
        (("vm", "migrate"), "--cold"), (None, "--allow-restart")]
    assert named_options("give --llc/--llc-ways N") == [(None, "--llc"), (None, "--llc-ways")]


@pytest.mark.parametrize(
    ("node", "text", "line"), HINTS, ids=[f"{n.key}:{line}" for n, _, line in HINTS]
)
def test_every_option_a_hint_names_exists_where_it_is_printed(node: Node, text: str, line: int) -> None:
    _, reached = _walk()
    printers = reached.get(node.key, set())
    wrong: list[str] = []
    for path, opt in named_options(text):
        if path is not None:
            if path not in _tree() or (isinstance(_tree()[path], typer.core.TyperGroup) and path):
                wrong.append(f"`vnuma {' '.join(path)}` is not a command")
            elif opt not in options(path) | options(()):
                wrong.append(f"`vnuma {' '.join(path)}` has no {opt}")
            continue
        if not printers and opt not in options(()):
            wrong.append(f"{opt}: no command prints this hint, so none can be said to have the option")
        wrong += [f"`vnuma {' '.join(p)}` has no {opt}" for p in sorted(printers)
                  if opt not in options(p) | options(())]
    assert not wrong, f"{node.key} line {line}: hint {text!r}:\n  " + "\n  ".join(wrong)
