"""``vnuma host``: add (libvirt), import (files), refresh, list, show, remove, reserve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import output, settings

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("add")
def add(
    ctx: typer.Context,
    name: str,
    uri: Annotated[str | None, typer.Option("--uri", help="libvirt URI, e.g. qemu+ssh://h1/system.")] = None,
    capabilities: Annotated[
        Path | None, typer.Option("--capabilities", help="Capabilities XML to use instead of libvirt's.")
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="The shipped demo GPU server through libvirt's test driver.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Discover a host's NUMA topology and PCI devices through libvirt and record it."""
    from vnuma.services.hosts import add_host

    host = add_host(settings(ctx), name, uri, capabilities, demo)
    _print_added(host, as_json)


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
    as_json: JsonOpt = False,
) -> None:
    """Record a host from files: capabilities (+ node devices), or an hwloc XML dump."""
    from vnuma.services.hosts import import_host

    host = import_host(settings(ctx), name, capabilities, nodedev or [], hwloc)
    _print_added(host, as_json)


def _print_added(host: Any, as_json: bool) -> None:
    from vnuma.codec import host_summary

    summary = host_summary(host)
    if as_json:
        output.echo_json(summary)
    else:
        typer.echo(
            f"added host {host.name}: {summary['cells']} cells, {summary['cpus']} CPUs, "
            f"{summary['gpus']} GPUs, {summary['memory_kib'] // 1048576} GiB"
        )


@app.command("refresh")
def refresh(
    ctx: typer.Context,
    name: str,
    capabilities: Annotated[
        Path | None, typer.Option("--capabilities", help="Capabilities XML to use instead of libvirt's.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Rediscover a host through its libvirt URI and report what changed."""
    from vnuma.services.hosts import refresh_host

    result = refresh_host(settings(ctx), name, capabilities)
    if as_json:
        output.echo_json({"name": name, "changed": bool(result.changes), "changes": list(result.changes)})
    elif result.changes:
        output.echo_lines([f"host {name}: {len(result.changes)} change(s)", *("  " + c for c in result.changes)])
    else:
        typer.echo(f"host {name}: no change")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List hosts with their size."""
    from vnuma.services.queries import host_summaries

    rows = host_summaries(settings(ctx))
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None,
        ["HOST", "CELLS", "CPUS", "GPUS", "MEMORY", "SOURCE", "URI"],
        [
            (r["name"], r["cells"], r["cpus"], r["gpus"], _gib(r["memory_kib"]), r.get("source"), r.get("uri"))
            for r in rows
        ],
    )


@app.command("show")
def show(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """Show a host: per-cell CPUs, cores, memory, pages, devices and distances."""
    from vnuma.codec import host_to_dict
    from vnuma.services.queries import get_host

    host = get_host(settings(ctx), name)
    if as_json:
        output.echo_json(host_to_dict(host))
        return
    from vnuma.cli.hostview import host_tables

    host_tables(host)


@app.command("remove")
def remove(ctx: typer.Context, name: str) -> None:
    """Remove a host (refused while VMs are placed on it)."""
    from vnuma.services.queries import remove_host

    remove_host(settings(ctx), name)
    typer.echo(f"removed host {name}")


@app.command("reserve")
def reserve(
    ctx: typer.Context,
    name: str,
    cpus: Annotated[str, typer.Option("--cpus", help="CPU list kept for the host itself, e.g. 0-1,64-65.")],
) -> None:
    """Keep host CPUs for the host itself: never placeable (replaces the previous set)."""
    from vnuma.services.queries import reserve_cpus
    from vnuma.topology import format_cpuset, parse_cpuset

    cpu_set = parse_cpuset(cpus)
    reserve_cpus(settings(ctx), name, cpu_set)
    typer.echo(f"host {name}: reserved CPUs {format_cpuset(cpu_set) or 'none'}")


def _gib(kib: int) -> str:
    return f"{kib / 1048576:.0f} GiB"
