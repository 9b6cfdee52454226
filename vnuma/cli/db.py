"""``vnuma db``: inventory schema status and upgrade."""

from __future__ import annotations

import typer

from vnuma.cli import output, settings

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("status")
def status(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """Show the inventory URL, its schema revision and the revision this vnuma needs.

    Example: vnuma --db postgresql://vnuma@db/vnuma db status --json
    """
    from vnuma.services.queries import db_status

    info = db_status(settings(ctx))
    if as_json:
        output.echo_json(info)
    else:
        output.echo_lines([f"{k}: {v}" for k, v in info.items()])


@app.command("upgrade")
def upgrade(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """Migrate the inventory to this vnuma's schema (creates it when new). JSON: as `db status --json`.

    Example: vnuma --db /var/lib/vnuma/inventory.db db upgrade
    """
    from vnuma.services.queries import db_status, db_upgrade

    revision = db_upgrade(settings(ctx))
    if as_json:
        output.echo_json(db_status(settings(ctx)))
        return
    typer.echo(f"inventory at revision {revision}")
