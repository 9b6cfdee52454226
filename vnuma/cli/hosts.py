"""``vnuma host``: add (libvirt), import (files), refresh, list, show, remove, reserve, cordon, drain, uncordon."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import HostArg
from vnuma.cli.progress import bar
from vnuma.cli.rebalancing import AllowMigrateOpt, AllowRestartOpt, ApplyOpt, YesOpt
from vnuma.documents import plan_doc
from vnuma.topology import format_size_kib

if TYPE_CHECKING:
    from vnuma.services.discovery import Batch

app = typer.Typer(no_args_is_help=True, add_completion=False)

JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", min=1, max=64, help="Hosts discovered at once (add --from-file, refresh --all).")
]


@app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Host name (none with --from-file).", show_default=False)] = None,
    uri: Annotated[str | None, typer.Option("--uri", help="libvirt URI, e.g. qemu+ssh://h1/system.")] = None,
    capabilities: Annotated[
        Path | None,
        typer.Option("--capabilities", help="Capabilities XML to use instead of libvirt's (refresh reads it again)."),
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="The shipped demo GPU server through libvirt's test driver (its URI, "
                           "test:///vnuma-demo, means the same).")
    ] = False,
    from_file: Annotated[
        str | None,
        typer.Option(
            "--from-file", metavar="FILE",
            help="Add many hosts: lines of `NAME URI` or a bare `URI` (# comments); `-` reads stdin.",
        ),
    ] = None,
    jobs: JobsOpt = 8,
    as_json: output.JsonOpt = False,
) -> None:
    """Discover a host's NUMA topology and PCI devices through libvirt and record it (or many: --from-file).

    Example: vnuma host add gpu-node-1 --uri qemu+ssh://root@gpu-node-1/system
    """
    if from_file is not None and remote(ctx):
        raise typer.BadParameter("--from-file runs where the inventory is, not through --server")
    if from_file is not None:
        from vnuma.services.discovery import add_from_file

        clashing = _given(("NAME", name), ("--uri", uri), ("--capabilities", capabilities), ("--demo", demo))
        with bar("adding", as_json=as_json) as progress:
            batch = add_from_file(settings(ctx), from_file, sys.stdin, jobs, progress, clashing=clashing)
        _print_batch(batch, as_json)
        return
    from vnuma.codec import host_summary
    from vnuma.services.hosts import add_host

    client = remote(ctx)
    if client:
        if capabilities is not None or name is None:
            raise typer.BadParameter("--server adds a host by NAME with --uri or --demo: a service reads no files "
                                     "named on your command line")
        _print_added(client.add_host(name, uri, demo), as_json)
        return
    _print_added(host_summary(add_host(settings(ctx), name, uri, capabilities, demo)), as_json)


@app.command("import")
def import_(
    ctx: typer.Context,
    name: str,
    capabilities: Annotated[
        Path | None, typer.Option("--capabilities", help="`virsh capabilities` output.")
    ] = None,
    nodedev: Annotated[
        list[Path] | None,
        typer.Option("--nodedev", help="`virsh nodedev-dumpxml` output (repeatable; a file may hold many)."),
    ] = None,
    hwloc: Annotated[Path | None, typer.Option("--hwloc", help="`lstopo --of xml` output.")] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """Record a host from files: capabilities (+ node devices), or an hwloc XML dump.

    Example: vnuma host import old-box --capabilities caps.xml --nodedev gpus.xml
    """
    from vnuma.codec import host_summary
    from vnuma.services.hosts import import_host, read_documents

    documents = read_documents(capabilities, nodedev or [], hwloc)
    client = remote(ctx)
    if client:
        _print_added(client.import_host(name, *documents), as_json)
        return
    _print_added(host_summary(import_host(settings(ctx), name, *documents)), as_json)


def _print_added(summary: dict[str, Any], as_json: bool) -> None:
    from vnuma.codec import summary_text

    if as_json:
        output.echo_json(summary)
    else:
        typer.echo(f"added host {summary['name']}: {summary_text(summary)}")


@app.command("refresh")
def refresh(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Host name (none with --all).", show_default=False)] = None,
    capabilities: Annotated[
        Path | None,
        typer.Option("--capabilities", help="Capabilities XML to use instead of libvirt's, from now on."),
    ] = None,
    all_hosts: Annotated[
        bool, typer.Option("--all", help="Every libvirt host, concurrently; file-imported hosts are skipped.")
    ] = False,
    jobs: JobsOpt = 8,
    as_json: output.JsonOpt = False,
) -> None:
    """Rediscover a host (or --all) through its libvirt URI and report what changed.

    A host added with --demo or --capabilities FILE is read the same way again.

    Example: vnuma host refresh --all --jobs 16 --json
    """
    if all_hosts and remote(ctx):
        raise typer.BadParameter("--all runs where the inventory is, not through --server")
    if all_hosts:
        from vnuma.services.discovery import refresh_all

        with bar("refreshing", as_json=as_json) as progress:
            clashing = _given(("NAME", name), ("--capabilities", capabilities))
            batch = refresh_all(settings(ctx), jobs, progress, clashing=clashing)
        _print_batch(batch, as_json)
        return
    from vnuma.services.hosts import refresh_host

    client = remote(ctx)
    if client and (capabilities is not None or name is None):
        raise typer.BadParameter("--server refreshes one host by NAME, as recorded: a service reads no files "
                                 "named on your command line")
    changes = client.refresh_host(name) if client else list(refresh_host(settings(ctx), name, capabilities).changes)
    if as_json:
        output.echo_json({"name": name, "changed": bool(changes), "changes": changes})
    elif changes:
        output.echo_lines([f"host {name}: {len(changes)} change(s)", *("  " + c for c in changes)])
    else:
        typer.echo(f"host {name}: no change")


@app.command("list")
def list_(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """List hosts with their size and whether they take placements (cordoned hosts do not).

    JSON: [{"name", "uri", "source", "cells", "cpus", "gpus", "memory_kib", "cordoned"}].

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
    """Show a host: per-cell CPUs, cores, memory, pages, devices and distances.

    --svg/--png FILE also draw the host as lstopo does (sockets, NUMA cells
    with a bar per hugepage pool, cores with their threads, GPUs and NICs
    under their cell, memory-only cells), every pCPU, page share and device
    a VM holds in the VM's colour (one hue per tenant), reserved CPUs dark,
    and a legend; the tables or JSON are printed as without them.

    Example: vnuma host show gpu-node-1 --svg gpu-node-1.svg
    """
    from vnuma.codec import host_from_dict, use_from_dict
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

    host_tables(host, use_from_dict(doc))


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
    from vnuma.services.queries import get_host, reserve
    from vnuma.topology import format_cpuset, parse_cpuset

    client = remote(ctx)
    if client:
        doc = client.reserve(name, {"cpus": cpus, "llc_ways": llc_ways, "mem_bw_limit": mem_bw_limit})
    else:
        from vnuma.codec import host_to_dict

        reserve(settings(ctx), name, cpus, llc_ways, mem_bw_limit)
        doc = host_to_dict(get_host(settings(ctx), name)) if as_json else {}
    if as_json:
        output.echo_json(doc)
        return
    if cpus is not None:
        typer.echo(f"host {name}: reserved CPUs {format_cpuset(parse_cpuset(cpus)) or 'none'}")
    if llc_ways is not None:
        typer.echo(f"host {name}: keeps {llc_ways} L3 way(s) of every cache for itself")
    if mem_bw_limit is not None:
        typer.echo(f"host {name}: VMs' memory-bandwidth caps add up to at most {mem_bw_limit} per L3 domain")


def _given(*options: tuple[str, object]) -> tuple[str, ...]:
    """The names of the options that were given (the service refuses them in bulk mode)."""
    return tuple(flag for flag, value in options if value)


def _print_batch(batch: Batch, as_json: bool) -> None:
    """Per-host summary (table or JSON) on stdout; if any host failed, raise the batch's error."""
    from vnuma.services.discovery import Result, batch_to_dict

    if as_json:
        output.echo_json(batch_to_dict(batch))
    else:
        rows = [(o.name, o.result.value, o.detail) for o in batch.outcomes]
        output.echo_table(None, ["HOST", "RESULT", "DETAIL"], rows)
        counts = [f"{batch.count(r)} {r.value}" for r in Result if batch.count(r)]
        typer.echo(", ".join(counts) or "no hosts")
    err = batch.error()
    if err is not None:
        raise err


