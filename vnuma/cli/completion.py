"""Shell completion of host, tenant and VM names from the inventory (``vnuma --install-completion``).

A completion runs the program once per key press, so it must be instant: it
reads names with one indexed query through the plain reader (no SQLAlchemy,
no libvirt), from the inventory ``--db``/``VNUMA_DB`` names, and offers
nothing when that inventory cannot be read (a completion never prints an error).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer


def _names(ctx: typer.Context, kind: str, incomplete: str) -> list[str]:
    try:
        from vnuma.services import make_settings
        from vnuma.services.completion import names

        root = ctx.find_root()
        return names(make_settings(root.params.get("db"), os.environ, create=False), kind, incomplete)
    except Exception:  # any failure: a completion offers nothing rather than break the shell
        return []


def vms(ctx: typer.Context, incomplete: str) -> list[str]:
    """VM names starting with ``incomplete``."""
    return _names(ctx, "vm", incomplete)


def hosts(ctx: typer.Context, incomplete: str) -> list[str]:
    """Host names starting with ``incomplete``."""
    return _names(ctx, "host", incomplete)


def tenants(ctx: typer.Context, incomplete: str) -> list[str]:
    """Tenant names starting with ``incomplete``."""
    return _names(ctx, "tenant", incomplete)


VmArg = Annotated[str, typer.Argument(help="VM name.", autocompletion=vms, show_default=False)]
HostArg = Annotated[str, typer.Argument(help="Host name.", autocompletion=hosts, show_default=False)]
TenantArg = Annotated[str, typer.Argument(help="Tenant name.", autocompletion=tenants, show_default=False)]
