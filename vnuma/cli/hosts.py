"""``vnuma host``: add (libvirt), import (files), refresh (:mod:`vnuma.cli.hostimport`), list, show, remove,
reserve, set, cordon, drain, uncordon."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import HostArg
from vnuma.cli.hostimport import add, import_, refresh
from vnuma.cli.rebalancing import AllowMigrateOpt, AllowRestartOpt, ApplyOpt, YesOpt
from vnuma.documents import plan_doc
from vnuma.topology import format_size_kib

app = typer.Typer(no_args_is_help=True, add_completion=False)
app.command("add")(add)
app.command("import")(import_)
app.command("refresh")(refresh)

@app.command("list")
def list_(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """List hosts with their size and whether they take placements (cordoned hosts do not).

    JSON: [{"name", "uri", "source", "cells", "cpus", "gpus", "memory_kib", "cordoned"}]. The memory is
    what guests can have: a GPU's own memory node (Grace Hopper) is not counted.

    Example: vnuma host list --json
    """
    from vnuma.services.queries import host_summaries

    client = remote(ctx)
    rows = client.host_summaries() if client else host_summaries(settings(ctx))
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None,
        ["HOST", "CELLS", "CPUS", "GPUS", "MEMORY", "SCHEDULING", "SOURCE", "URI"],
        [
            (r["name"], r["cells"], r["cpus"], r["gpus"], format_size_kib(r["memory_kib"]),
             "cordoned" if r["cordoned"] else "enabled", r.get("source"), r.get("uri"))
            for r in rows
        ],
    )


@app.command("cordon")
def cordon(ctx: typer.Context, name: HostArg, as_json: output.JsonOpt = False) -> None:
    """Stop placing on a host: no new VMs, no incoming moves; its VMs stay until moved (see host drain).

    JSON: {"name", "cordoned": true, "changed"}.

    Example: vnuma host cordon gpu-node-1
    """
    from vnuma.services.queries import set_cordoned

    client = remote(ctx)
    before = client.set_cordoned(name, True) if client else set_cordoned(settings(ctx), name, True)
    if as_json:
        output.echo_json({"name": name, "cordoned": True, "changed": not before})
        return
    typer.echo(f"host {name}: {'already ' if before else ''}cordoned")


@app.command("drain")
def drain(
    ctx: typer.Context,
    name: HostArg,
    max_moves: Annotated[
        int | None, typer.Option("--max-moves", help="Most moves (default: every VM on the host).")
    ] = None,
    partial: Annotated[
        bool, typer.Option("--partial", help="Move what can move even if some VMs must stay.")
    ] = False,
    time_limit: Annotated[float, typer.Option("--time-limit", metavar="S", help="Seconds to plan.")] = 10.0,
    solver: Annotated[
        str | None,
        typer.Option("--solver", help="cp-sat (OR-Tools: all VMs at once, the default) or search (VM by VM)."),
    ] = None,
    as_json: output.JsonOpt = False,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    allow_restart: AllowRestartOpt = False,
    allow_migrate: AllowMigrateOpt = False,
) -> None:
    """Empty a host for maintenance: cordon it, then plan (and with --apply carry out) moving every VM off.

    The host is cordoned first, as `kubectl drain` does, also when only a
    plan is printed (`vnuma host uncordon` undoes it). Each VM moves once,
    to where the placement engine puts it on the other hosts, keeping its
    guest shape (an affine group whole, to one host). A VM that cannot move stays and the plan says
    why; then the command exits 5 and nothing is moved, unless --partial.
    --apply runs the plan as a journaled rebalance run (`vnuma rebalance
    --resume` or `--abort` finishes or rolls back an interrupted one).

    By default every VM's destination is chosen at once with OR-Tools
    CP-SAT (the most VMs moved, then the best locality), each choice then
    placed by the engine; the plan says whether the solver proved it optimal
    or how far it is from its bound. --solver search moves them one by one,
    largest first (CP-SAT's first answer; its plan comes back when better).

    JSON: the rebalance plan document ({"objective": "drain", "before",
    "after", "optimal", "moves", "left": [{"vm", "reason"}], "solver",
    "gap"}); with --apply also "run" as `vnuma rebalance --apply` prints it.

    Example: vnuma host drain gpu-node-1 --apply --yes --allow-migrate
    """
    from vnuma.cli.rebalancing import carry_out, confirm_apply, print_plan, show_carried
    from vnuma.errors import NoRoomError
    from vnuma.services.permits import granted
    from vnuma.services.rebalancing import drain_plan, drain_refusal

    if (allow_restart or allow_migrate or yes) and not apply:
        raise typer.BadParameter("--yes, --allow-restart and --allow-migrate go with --apply")
    client = remote(ctx)
    if client:
        body = {"max_moves": max_moves, "partial": partial, "time_limit": time_limit, "solver": solver}
        carried = {"apply": True, "allow_restart": allow_restart, "allow_migrate": allow_migrate}
        try:
            doc = client.drain(name, {**body, **carried} if apply and yes else body)
        except NoRoomError as err:
            if not as_json:
                output.echo_lines([f"host {name}: cordoned"])
            if err.plan is not None and as_json:
                output.echo_json(err.plan)
            elif err.plan is not None:
                print_plan(err.plan)
            raise
        if not as_json:
            output.echo_lines([f"host {name}: cordoned"])
        if "run" in doc:
            show_carried(doc, as_json)
            return
        if apply and doc["moves"]:  # shown before the confirmation a service cannot ask for
            if not as_json:
                print_plan(doc)
            confirm_apply(yes, len(doc["moves"]), ask=False)
        _print_drain(name, doc, as_json)
        return
    plan = drain_plan(
        settings(ctx), name, max_moves=max_moves, time_limit_s=time_limit, for_apply=apply, solver=solver
    )
    doc = plan_doc(plan)
    if not as_json:
        output.echo_lines([f"host {name}: cordoned"])
    refusal = drain_refusal(name, plan, partial, doc)
    if refusal is not None:
        if as_json:
            output.echo_json(doc)
        else:
            print_plan(doc)
        raise refusal
    if not apply or not plan.moves:
        _print_drain(name, doc, as_json)
        return
    may = granted(allow_restart, allow_migrate)
    carry_out(ctx, plan, doc, as_json, may, confirm=lambda: confirm_apply(yes, len(plan.moves)))


def _print_drain(name: str, doc: dict[str, Any], as_json: bool) -> None:
    from vnuma.cli.rebalancing import print_plan

    if as_json:
        output.echo_json(doc)
    elif doc["before"] == 0:
        output.echo_lines([f"host {name}: no VMs, nothing to move"])
    else:
        print_plan(doc)


@app.command("uncordon")
def uncordon(ctx: typer.Context, name: HostArg, as_json: output.JsonOpt = False) -> None:
    """Let a cordoned host take placements again. JSON: {"name", "cordoned": false, "changed"}.

    Example: vnuma host uncordon gpu-node-1
    """
    from vnuma.services.queries import set_cordoned

    client = remote(ctx)
    before = client.set_cordoned(name, False) if client else set_cordoned(settings(ctx), name, False)
    if as_json:
        output.echo_json({"name": name, "cordoned": False, "changed": before})
        return
    typer.echo(f"host {name}: {'' if before else 'already '}uncordoned")


@app.command("show")
def show(
    ctx: typer.Context,
    name: HostArg,
    as_json: output.JsonOpt = False,
    svg: output.SvgOpt = None,
    png: output.PngOpt = None,
) -> None:
    """Show a host: per-cell CPUs, cores, memory, pages, devices and distances, and the parts its import left
    out (JSON: "left_out": [{"what", "why"}]).

    --svg/--png FILE also draw the host as lstopo does (sockets, NUMA cells
    with a bar per hugepage pool, cores with their threads, GPUs and NICs
    under their cell, memory-only cells), every pCPU, page share and device
    a VM holds in the VM's colour (one hue per tenant), reserved CPUs dark,
    and a legend; the tables or JSON are printed as without them.

    Example: vnuma host show gpu-node-1 --svg gpu-node-1.svg
    """
    from vnuma.codec import classes_from_dict, host_from_dict, left_out_from_list, use_from_dict
    from vnuma.services.queries import host_document

    client = remote(ctx)
    if svg is not None or png is not None:
        if client:
            raise typer.BadParameter("pictures are drawn where the inventory is, not through --server")
        from vnuma.services.pictures import host_picture

        output.write_pictures(lambda: host_picture(settings(ctx), name), svg, png)
    if client:
        doc = client.host_document(name)
        host = host_from_dict(doc)
    else:
        host, doc = host_document(settings(ctx), name)
    if as_json:
        output.echo_json(doc)
        return
    from vnuma.cli.hostview import host_tables

    host_tables(host, use_from_dict(doc), classes_from_dict(doc), left_out_from_list(doc.get("left_out")))


@app.command("remove")
def remove(ctx: typer.Context, name: HostArg, as_json: output.JsonOpt = False) -> None:
    """Remove a host (refused while VMs are placed on it). JSON: {"name", "removed": true}.

    Example: vnuma host remove old-box
    """
    from vnuma.services.queries import remove_host

    client = remote(ctx)
    if client:
        client.remove_host(name)
    else:
        remove_host(settings(ctx), name)
    if as_json:
        output.echo_json({"name": name, "removed": True})
        return
    typer.echo(f"removed host {name}")


@app.command("reserve")
def reserve(
    ctx: typer.Context,
    name: HostArg,
    cpus: Annotated[
        str | None, typer.Option("--cpus", help="CPU list kept for the host itself, e.g. 0-1,64-65.")
    ] = None,
    llc_ways: Annotated[
        int | None,
        typer.Option("--llc-ways", metavar="N", help="L3 cache ways kept for the host's own processes (resctrl)."),
    ] = None,
    mem_bw_limit: Annotated[
        int | None,
        typer.Option("--mem-bw-limit", metavar="PCT", help="Most the VMs' bandwidth caps add up to per L3 domain "
                     "(default 100)."),
    ] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """Keep host CPUs (never placeable; replaces the previous set) or L3 cache ways for the host itself.

    --llc-ways N keeps N ways of every L3 cache for the host's own
    processes (its default resctrl group): a VM's cache slice (place --llc)
    is placed on a host only once this is set, and `host show` prints the
    schemata line that shrinks the default group to those ways.
    --mem-bw-limit PCT bounds the sum of the VMs' bandwidth caps (place
    --mem-bw) on each L3 domain. JSON: the host as `host show --json`
    prints it.

    Example: vnuma host reserve gpu-node-1 --cpus 0-1,64-65 --llc-ways 2
    """
    from vnuma.services.queries import host_document, reserve
    from vnuma.topology import format_cpuset, parse_cpuset

    client = remote(ctx)
    if client:
        doc = client.reserve(name, {"cpus": cpus, "llc_ways": llc_ways, "mem_bw_limit": mem_bw_limit})
    else:
        reserve(settings(ctx), name, cpus, llc_ways, mem_bw_limit)
        doc = host_document(settings(ctx), name)[1] if as_json else {}
    if as_json:
        output.echo_json(doc)
        return
    if cpus is not None:
        typer.echo(f"host {name}: reserved CPUs {format_cpuset(parse_cpuset(cpus)) or 'none'}")
    if llc_ways is not None:
        typer.echo(f"host {name}: keeps {llc_ways} L3 way(s) of every cache for itself")
    if mem_bw_limit is not None:
        typer.echo(f"host {name}: VMs' memory-bandwidth caps add up to at most {mem_bw_limit} per L3 domain")


@app.command("set")
def set_(
    ctx: typer.Context,
    name: HostArg,
    after_release: Annotated[
        str, typer.Option("--after-release", help="clean: a device a VM releases is cleaning until cleaned "
                          "(`vnuma device clean`); free: free at once (the default).")
    ],
    as_json: output.JsonOpt = False,
) -> None:
    """Set what the host's GPUs, NICs and VFs become when their VM releases them (a device's own setting,
    `vnuma device set`, wins).

    JSON: {"host", "after_release", "changed"}.

    Example: vnuma host set gpu-node-1 --after-release clean
    """
    from vnuma.services.devices import set_after_release

    client = remote(ctx)
    if client:
        doc = client.host_set(name, after_release)
    else:
        done = set_after_release(settings(ctx), name, None, after_release)
        doc = {"host": name, "after_release": after_release, "changed": done.changed}
    if as_json:
        output.echo_json(doc)
        return
    typer.echo(f"host {name}: {'' if doc['changed'] else 'already '}--after-release {after_release}")
