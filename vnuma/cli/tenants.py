"""``vnuma tenant``: create, update, list, show, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import TenantArg
from vnuma.errors import OptionsError
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
    llc: Annotated[
        str | None, typer.Option("--llc", metavar="SIZE", help="Its VMs' L3 cache slice unless they ask their own.")
    ] = None,
    llc_ways: Annotated[
        int | None, typer.Option("--llc-ways", metavar="N", help="The same as a number of cache ways.")
    ] = None,
    mem_bw: Annotated[
        int | None,
        typer.Option("--mem-bw", metavar="PCT", help="Its VMs' memory-bandwidth cap unless they ask theirs."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a tenant. JSON: the tenant ({"name", "isolation", "max_vcpus", "max_gpus", "llc_kib",
    "llc_ways", "mem_bw"}).

    --llc/--llc-ways and --mem-bw give each of the tenant's VMs that asks
    none of its own that cache slice and bandwidth cap (as `place --llc`,
    `--mem-bw`); a VM's own replaces the tenant's.

    Example: vnuma tenant create tenant-a --isolation core --max-gpus 8 --llc 8MiB --mem-bw 30
    """
    from vnuma.placement.asktexts import check_slice
    from vnuma.placement.model import Tenant
    from vnuma.services.tenants import create_tenant

    client = remote(ctx)
    wanted = Tenant(name, isolation, max_vcpus, max_gpus, check_slice(llc, llc_ways, mem_bw), llc_ways, mem_bw)
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
    llc: Annotated[
        str | None, typer.Option("--llc", metavar="SIZE|none", help="Its VMs' default L3 slice (none: no slice).")
    ] = None,
    llc_ways: Annotated[
        str | None, typer.Option("--llc-ways", metavar="N|none", help="The same as a number of cache ways.")
    ] = None,
    mem_bw: Annotated[
        str | None, typer.Option("--mem-bw", metavar="PCT|none", help="Its VMs' default bandwidth cap (none: no cap).")
    ] = None,
    auto_move: Annotated[
        bool | None, typer.Option("--auto-move/--no-auto-move", help="Let `vnuma watch` move its VMs (the default), "
                                  "or never (its events are kept, the moves withheld).", show_default=False)
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a tenant's isolation, quotas, its VMs' default cache slice and bandwidth cap, or whether the
    watch may move its VMs.

    A new default slice or cap applies to the VMs placed (or moved) from then
    on; the VMs placed keep what they hold.

    A stricter isolation is checked against every VM the tenant has: it is
    refused, naming the VM and what it shares, when a VM would break it. A
    quota may be set below what the tenant already uses: that refuses new
    VMs until usage falls below it, and moves nothing. JSON: the tenant
    after the change, and "before" as it was.

    Example: vnuma tenant update tenant-a --max-vcpus none
    """
    from vnuma.services.requests import slice_changes
    from vnuma.services.tenants import KEEP, parse_quota, update_tenant

    quotas = {"max_vcpus": parse_quota(max_vcpus, "--max-vcpus"), "max_gpus": parse_quota(max_gpus, "--max-gpus")}
    slices = slice_changes(llc, llc_ways, mem_bw)
    client = remote(ctx)
    if client and auto_move is not None:
        raise OptionsError("--auto-move/--no-auto-move does not run through --server",
                           hint="run it where the inventory is")
    moves: tuple[bool, bool] | None = None
    if client:
        given = {k: v for k, v in (("llc", llc), ("llc_ways", llc_ways), ("mem_bw", mem_bw)) if v is not None}
        old, new = client.update_tenant(name, isolation, {k: v for k, v in quotas.items() if v is not KEEP}, given)
    else:
        only_moves = auto_move is not None and isolation is None and not slices and all(
            v is KEEP for v in quotas.values())
        if not only_moves:  # first: a refused change writes nothing, the opt-out included
            old, new = update_tenant(settings(ctx), name, isolation=isolation, **quotas, slices=slices)
        if auto_move is not None:
            from vnuma.services.watchact import set_auto_move

            was, tenant = set_auto_move(settings(ctx), name, auto_move)
            moves = (was, auto_move)
            if only_moves:
                old = new = tenant
    if as_json:
        from vnuma.codec import tenant_to_dict

        extra = ({}, {}) if moves is None else ({"auto_move": moves[0]}, {"auto_move": moves[1]})
        output.echo_json({**tenant_to_dict(new), **extra[1], "before": {**tenant_to_dict(old), **extra[0]}})
        return
    changes = [
        f"{label} {_text(a)} -> {_text(b)}"
        for label, a, b in (
            ("isolation", old.isolation, new.isolation),
            ("max vCPUs", old.max_vcpus, new.max_vcpus),
            ("max GPUs", old.max_gpus, new.max_gpus),
            ("LLC KiB", old.llc_kib, new.llc_kib),
            ("LLC ways", old.llc_ways, new.llc_ways),
            ("bandwidth cap", old.mem_bw, new.mem_bw),
            *([("automatic moves", *("on" if m else "off" for m in moves))] if moves else []),
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
