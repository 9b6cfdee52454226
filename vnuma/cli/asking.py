"""A VM request's options on the command line, made from their declaration (:data:`vnuma.placement.asks.ASKS`).

:func:`request_options` gives a command every option of the request, in the
declaration's order, before the command's own: each Typer option's flag,
type, default, choices, metavar and help come from its :class:`Ask`. The
command receives them as one mapping (``asked``: option name -> value as
given, enums as their words), which :func:`vnuma.services.requests.place_request`
reads and which is, as it stands, the ``--server`` client's body.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, get_type_hints

import typer

from vnuma.cli.completion import TenantArg, hosts
from vnuma.placement.asks import ASKS, Ask, Form

_COMPLETIONS = {"host": hosts}


def _annotation(ask: Ask) -> Any:
    """The option's Typer annotation: its type and ``typer.Option`` from the declaration."""
    if ask.name == "tenant":
        return TenantArg
    enum = ask.choices if isinstance(ask.choices, type) and issubclass(ask.choices, Enum) else None
    kind: Any = {
        Form.COUNT: int, Form.NUMBER: int | None, Form.TEXT: str | None, Form.NODES: str, Form.NICS: str | None,
        Form.ALTERNATIVES: list[str] | None,
        Form.CHOICE: (enum if ask.default is not None else enum | None) if enum is not None else str,
    }[ask.form]
    option = typer.Option(ask.flag, help=ask.help, metavar=ask.metavar, autocompletion=_COMPLETIONS.get(ask.name))
    return Annotated[kind, option]


def _parameters() -> list[inspect.Parameter]:
    out = []
    for ask in ASKS:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if ask.name == "tenant" else ask.default
        out.append(inspect.Parameter(ask.name, kind, default=default, annotation=_annotation(ask)))
    return out


def request_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command(ctx, asked, **own options)`` as a Typer command taking every request option first."""
    hints = get_type_hints(command, include_extras=True)
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in inspect.signature(command).parameters.values()]
    ctx, _asked, *rest = own
    names = [a.name for a in ASKS]

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        asked = {n: word(values.pop(n)) for n in names}
        command(values.pop(ctx.name), asked, **values)

    params = [ctx, *_parameters(), *rest]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # Typer must read the signature above, not the command's
    return wrapper


def word(value: Any) -> Any:
    """An option's value as written: a choice's word (Click gives the enum member)."""
    return value.value if isinstance(value, Enum) else value
