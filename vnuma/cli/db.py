"""``vnuma db``: inventory schema status and upgrade."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, settings

app = typer.Typer(no_args_is_help=True)


@app.command("status")
def status(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show the inventory URL, its schema revision and the revision this vnuma needs."""
    from vnuma.inventory.db import current_revision, head_revision, masked_url

    cfg = settings(ctx)
    current, head = current_revision(cfg.db_url), head_revision()
    info = {"url": masked_url(cfg.db_url), "revision": current, "head": head, "up_to_date": current == head}
    if as_json:
        output.echo_json(info)
    else:
        output.echo_lines([f"{k}: {v}" for k, v in info.items()])


@app.command("upgrade")
def upgrade(ctx: typer.Context) -> None:
    """Migrate the inventory to this vnuma's schema (creates it when new)."""
    from vnuma.inventory.db import head_revision
    from vnuma.inventory.db import upgrade as run_upgrade

    cfg = settings(ctx)
    run_upgrade(cfg.db_url)
    typer.echo(f"inventory at revision {head_revision()}")
