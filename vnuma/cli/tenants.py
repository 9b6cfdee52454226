"""``vnuma tenant``: create, list, show, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, settings
from vnuma.placement.model import Isolation

app = typer.Typer(no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("create")
def create(
    ctx: typer.Context,
    name: str,
    isolation: Annotated[
        Isolation,
        typer.Option(help="core: no core shared with other tenants; cell: whole cells; none: share siblings."),
    ] = Isolation.CORE,
    max_vcpus: Annotated[int | None, typer.Option("--max-vcpus", help="Quota on the tenant's vCPUs.")] = None,
    max_gpus: Annotated[int | None, typer.Option("--max-gpus", help="Quota on the tenant's GPUs.")] = None,
) -> None:
    """Create a tenant."""
    from vnuma.placement.model import Tenant
    from vnuma.services.placing import create_tenant

    tenant = create_tenant(settings(ctx), Tenant(name, isolation, max_vcpus, max_gpus))
    typer.echo(f"created tenant {tenant.name} (isolation {tenant.isolation})")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List tenants with their VMs, vCPUs and GPUs in use."""
    from vnuma.services.tenants import tenant_rows

    rows = tenant_rows(settings(ctx))
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None,
        ["TENANT", "ISOLATION", "VMS", "VCPUS", "MAX VCPUS", "GPUS", "MAX GPUS"],
        [(r["name"], r["isolation"], r["vms"], r["vcpus"], r["max_vcpus"], r["gpus"], r["max_gpus"]) for r in rows],
    )


@app.command("show")
def show(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """Show one tenant and its usage."""
    from vnuma.services.tenants import tenant_rows

    rows = [r for r in tenant_rows(settings(ctx), name) if r["name"] == name]
    row = rows[0]
    if as_json:
        output.echo_json(row)
    else:
        output.echo_lines([f"{k}: {'-' if v is None else v}" for k, v in row.items()])


@app.command("remove")
def remove(ctx: typer.Context, name: str) -> None:
    """Remove a tenant (refused while it has VMs)."""
    from vnuma.services.queries import remove_tenant

    remove_tenant(settings(ctx), name)
    typer.echo(f"removed tenant {name}")
