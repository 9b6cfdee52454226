"""``vnuma tenant``: create, update, list, show, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import TenantArg
from vnuma.placement.model import Isolation

app = typer.Typer(no_args_is_help=True, add_completion=False)
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
    as_json: JsonOpt = False,
) -> None:
    """Create a tenant. JSON: the tenant ({"name", "isolation", "max_vcpus", "max_gpus"}).

    Example: vnuma tenant create tenant-a --isolation core --max-gpus 8
    """
    from vnuma.placement.model import Tenant
    from vnuma.services.tenants import create_tenant

    client = remote(ctx)
    wanted = Tenant(name, isolation, max_vcpus, max_gpus)
    tenant = client.create_tenant(wanted) if client else create_tenant(settings(ctx), wanted)
    if as_json:
        from vnuma.codec import tenant_to_dict

        output.echo_json(tenant_to_dict(tenant))
        return
    typer.echo(f"created tenant {tenant.name} (isolation {tenant.isolation})")


@app.command("update")
def update(
    ctx: typer.Context,
    name: TenantArg,
    isolation: Annotated[
        Isolation | None, typer.Option(help="New isolation; refused when the tenant's VMs would break it.")
    ] = None,
    max_vcpus: Annotated[
        str | None, typer.Option("--max-vcpus", metavar="N|none", help="New vCPU quota (none: unlimited).")
    ] = None,
    max_gpus: Annotated[
        str | None, typer.Option("--max-gpus", metavar="N|none", help="New GPU quota (none: unlimited).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a tenant's isolation and/or quotas.

    A stricter isolation is checked against every VM the tenant has: it is
    refused, naming the VM and what it shares, when a VM would break it. A
    quota may be set below what the tenant already uses: that refuses new
    VMs until usage falls below it, and moves nothing. JSON: the tenant
    after the change, and "before" as it was.

    Example: vnuma tenant update tenant-a --max-vcpus none
    """
    from vnuma.services.tenants import KEEP, parse_quota, update_tenant

    quotas = {"max_vcpus": parse_quota(max_vcpus, "--max-vcpus"), "max_gpus": parse_quota(max_gpus, "--max-gpus")}
    client = remote(ctx)
    if client:
        old, new = client.update_tenant(name, isolation, {k: v for k, v in quotas.items() if v is not KEEP})
    else:
        old, new = update_tenant(settings(ctx), name, isolation=isolation, **quotas)
    if as_json:
        from vnuma.codec import tenant_to_dict

        output.echo_json({**tenant_to_dict(new), "before": tenant_to_dict(old)})
        return
    changes = [
        f"{label} {_text(a)} -> {_text(b)}"
        for label, a, b in (
            ("isolation", old.isolation, new.isolation),
            ("max vCPUs", old.max_vcpus, new.max_vcpus),
            ("max GPUs", old.max_gpus, new.max_gpus),
        )
        if a != b
    ]
    typer.echo(f"updated tenant {name}: {', '.join(changes) or 'no change'}")


def _text(value: object) -> str:
    return "unlimited" if value is None else str(value)


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List tenants with their VMs, vCPUs and GPUs in use.

    Example: vnuma tenant list --json
    """
    from vnuma.services.tenants import tenant_rows

    client = remote(ctx)
    rows = client.tenant_rows() if client else tenant_rows(settings(ctx))
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None,
        ["TENANT", "ISOLATION", "VMS", "VCPUS", "MAX VCPUS", "GPUS", "MAX GPUS"],
        [(r["name"], r["isolation"], r["vms"], r["vcpus"], r["max_vcpus"], r["gpus"], r["max_gpus"]) for r in rows],
    )


@app.command("show")
def show(ctx: typer.Context, name: TenantArg, as_json: JsonOpt = False) -> None:
    """Show one tenant and its usage.

    Example: vnuma tenant show tenant-a --json
    """
    from vnuma.services.tenants import tenant_rows

    client = remote(ctx)
    rows = [r for r in (client.tenant_rows(name) if client else tenant_rows(settings(ctx), name)) if r["name"] == name]
    row = rows[0]
    if as_json:
        output.echo_json(row)
    else:
        output.echo_lines([f"{k}: {'-' if v is None else v}" for k, v in row.items()])


@app.command("remove")
def remove(ctx: typer.Context, name: TenantArg, as_json: JsonOpt = False) -> None:
    """Remove a tenant (refused while it has VMs). JSON: {"name", "removed": true}.

    Example: vnuma tenant remove tenant-a
    """
    from vnuma.services.queries import remove_tenant

    client = remote(ctx)
    if client:
        client.remove_tenant(name)
    else:
        remove_tenant(settings(ctx), name)
    if as_json:
        output.echo_json({"name": name, "removed": True})
        return
    typer.echo(f"removed tenant {name}")
