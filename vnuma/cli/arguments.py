"""How usage lines name a command's arguments."""

from __future__ import annotations

import typer
from typer.core import TyperArgument


class UsageArgument(TyperArgument):
    """An argument as usage lines show it, as Click and man pages do: ``VM``, ``[HOST]``, ``SHAPE...`` (Typer
    0.28 prints ``{vm}``)."""

    def make_metavar(self, ctx: typer.Context, *, usage: bool = False) -> str:
        name = self.metavar or (self.name or "").upper()
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return f"[{name}]" if usage and not self.required and not name.startswith("[") else name

    def get_error_hint(self, ctx: typer.Context) -> str:
        return f"'{self.make_metavar(ctx)}'"  # "Missing argument 'VM'.", as the usage line names it
