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


@app.command("check")
def check(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """Check that every VM's claim rows are those its stored placement makes, every host's summary columns
    (cells, CPUs, GPUs, memory, topology digest) those its topology gives, and every host's kept figures
    (``fig_*``) those its VMs leave; print each disagreement and exit 16 when there is one (nothing is changed).

    Rows written, edited or restored behind vnuma's back are what it finds: the database's own indexes
    already refuse double bookings. JSON: {"hosts", "vms", "problems": [{"host", "vm" (null: the host's own
    columns), "what", "kept", "expected"}]}.

    Example: vnuma db check --json
    """
    from vnuma.errors import InconsistentInventoryError
    from vnuma.services.queries import db_check

    report = db_check(settings(ctx))
    if as_json:
        output.echo_json({"hosts": report.hosts, "vms": report.vms, "problems": [
            {"host": p.host, "vm": p.vm, "what": p.what, "kept": p.kept, "expected": p.expected}
            for p in report.problems]})
    elif report.problems:
        output.echo_table(None, ["HOST", "VM", "WHAT", "KEPT", "EXPECTED"],
                          [(p.host, p.vm, p.what, p.kept, p.expected) for p in report.problems])
    else:
        typer.echo(f"inventory consistent: {report.hosts} host(s), {report.vms} VM(s) checked")
    if report.problems:
        hosts = sorted({p.host for p in report.problems})
        raise InconsistentInventoryError(
            f"inventory inconsistent: {len(report.problems)} disagreement(s) on host(s) {', '.join(hosts)}",
            hint="see the rows above; `vnuma host refresh HOST` rewrites a host's columns, and a VM's claims are "
                 "rewritten by releasing and placing it again",
        )


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
