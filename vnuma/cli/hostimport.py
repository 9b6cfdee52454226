"""``vnuma host add|import|refresh``: read hosts (through libvirt or from files) into the inventory.

The functions are registered on ``vnuma host`` by :mod:`vnuma.cli.hosts`.
Each prints the parts of a host its read left out, one ``warning:`` line
each on stderr (:func:`vnuma.cli.output.echo_left_out`); ``--strict``
refuses such a host instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.progress import bar

if TYPE_CHECKING:
    from vnuma.services.discovery import Batch

JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", min=1, max=64, help="Hosts discovered at once (add --from-file, refresh --all).")
]
StrictOpt = Annotated[
    bool,
    typer.Option("--strict", help="Refuse a host with any part left out (exit 4, nothing recorded) instead of "
                 "recording the rest and listing what was left out."),
]

NvidiaSmiTopoOpt = Annotated[
    Path | None,
    typer.Option("--nvidia-smi-topo", metavar="FILE",
                 help="`nvidia-smi topo -m` output saved on the host: the NVLinks between its GPUs."),
]


def _topo_m(path: Path | None) -> tuple[str, bytes] | None:
    """The saved ``nvidia-smi topo -m`` file, read (None when not given)."""
    from vnuma.services.files import read_input

    return (str(path), read_input(path, "nvidia-smi topo -m")) if path is not None else None


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
    strict: StrictOpt = False,
    nvidia_smi_topo: NvidiaSmiTopoOpt = None,
    as_json: output.JsonOpt = False,
) -> None:
    """Discover a host's NUMA topology and PCI devices through libvirt and record it (or many: --from-file).

    Parts of the host that cannot be used (a device that cannot be read,
    hugepage pools larger than their cell...) are left out: one `warning:`
    line each on stderr, kept for `host show`; --strict refuses the host
    instead. JSON: {"name", "uri", "source", "cells", "cpus", "gpus",
    "memory_kib", "cordoned", "left_out": [{"what", "why"}]}. --nvidia-smi-topo
    FILE records the NVLinks between its GPUs, as `host import` reads them.

    Example: vnuma host add gpu-node-1 --uri qemu+ssh://root@gpu-node-1/system
    """
    if from_file is not None and remote(ctx):
        raise typer.BadParameter("--from-file runs where the inventory is, not through --server")
    if nvidia_smi_topo is not None and (from_file is not None or remote(ctx)):
        raise typer.BadParameter("--nvidia-smi-topo goes with one host by NAME, where the inventory is")
    if from_file is not None:
        from vnuma.services.discovery import add_from_file

        clashing = _given(("NAME", name), ("--uri", uri), ("--capabilities", capabilities), ("--demo", demo))
        with bar("adding", as_json=as_json) as progress:
            batch = add_from_file(settings(ctx), from_file, sys.stdin, jobs, progress, clashing=clashing,
                                  strict=strict)
        _print_batch(batch, as_json)
        return
    from vnuma.codec import imported_summary
    from vnuma.services.hosts import add_host

    client = remote(ctx)
    if client:
        if capabilities is not None or name is None:
            raise typer.BadParameter("--server adds a host by NAME with --uri or --demo: a service reads no files "
                                     "named on your command line")
        _print_added(client.add_host(name, uri, demo, strict), as_json)
        return
    added = add_host(settings(ctx), name, uri, capabilities, demo, strict=strict,
                     nvidia_smi_topo=_topo_m(nvidia_smi_topo))
    _print_added(imported_summary(added), as_json)


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
    nvidia_smi_topo: NvidiaSmiTopoOpt = None,
    strict: StrictOpt = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Record a host from files: capabilities (+ node devices), or an hwloc XML dump.

    What the host cannot use is left out and the rest recorded: a PU in no
    NUMA node (an offline node) or outside the cgroup lstopo ran in, a
    device that cannot be read or is listed twice, hugepage pools beyond
    their cell's memory (capped: the largest pages are kept first), a
    memory-only cell without memory, distances and HMAT figures naming
    cells that do not exist or below their floor. Each part left out is one
    `warning: WHAT: WHY, left out` line on stderr and is kept for `host
    show`; --strict refuses such a host instead (exit 4, nothing recorded).
    JSON: as `host add --json`, with "left_out": [{"what", "why"}].

    --nvidia-smi-topo FILE adds the NVLinks between the host's GPUs that
    saved `nvidia-smi topo -m` text shows (GPUi is the i-th GPU by PCI
    address); text from another host (another GPU count, a GPU on another
    NUMA node or PCIe level) is refused naming the GPUs (exit 4).

    Example: vnuma host import old-box --capabilities caps.xml --nodedev gpus.xml
    """
    from vnuma.codec import imported_summary
    from vnuma.services.hosts import import_host, read_documents

    documents = read_documents(capabilities, nodedev or [], hwloc)
    client = remote(ctx)
    if client and nvidia_smi_topo is not None:
        raise typer.BadParameter("--nvidia-smi-topo is read where the inventory is, not through --server")
    if client:
        _print_added(client.import_host(name, *documents, strict), as_json)
        return
    imported = import_host(settings(ctx), name, *documents, strict=strict, nvidia_smi_topo=_topo_m(nvidia_smi_topo))
    _print_added(imported_summary(imported), as_json)


def _print_added(summary: dict[str, Any], as_json: bool) -> None:
    from vnuma.codec import left_out_from_list, summary_text

    output.echo_left_out([i.line() for i in left_out_from_list(summary.get("left_out"))])
    if as_json:
        output.echo_json(summary)
    else:
        typer.echo(f"added host {summary['name']}: {summary_text(summary)}")


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
    strict: StrictOpt = False,
    nvidia_smi_topo: NvidiaSmiTopoOpt = None,
    as_json: output.JsonOpt = False,
) -> None:
    """Rediscover a host (or --all) through its libvirt URI and report what changed.

    A host added with --demo or --capabilities FILE is read the same way
    again. What the new read leaves out is listed on stderr, as `host add`
    does, and kept for `host show`; --strict refuses such a read (exit 4,
    nothing changed). NVLinks recorded with --nvidia-smi-topo are kept while
    the GPUs they name remain; --nvidia-smi-topo FILE records them anew (as
    `host import` reads it). JSON: {"name", "changed", "changes", "left_out"}.

    Example: vnuma host refresh --all --jobs 16 --json
    """
    if all_hosts and remote(ctx):
        raise typer.BadParameter("--all runs where the inventory is, not through --server")
    if nvidia_smi_topo is not None and (all_hosts or remote(ctx)):
        raise typer.BadParameter("--nvidia-smi-topo refreshes one host by NAME, where the inventory is")
    if all_hosts:
        from vnuma.services.discovery import refresh_all

        with bar("refreshing", as_json=as_json) as progress:
            clashing = _given(("NAME", name), ("--capabilities", capabilities))
            batch = refresh_all(settings(ctx), jobs, progress, clashing=clashing, strict=strict)
        _print_batch(batch, as_json)
        return
    from vnuma.codec import left_out_from_list, left_out_to_list
    from vnuma.services.hosts import refresh_host

    client = remote(ctx)
    if client and (capabilities is not None or name is None):
        raise typer.BadParameter("--server refreshes one host by NAME, as recorded: a service reads no files "
                                 "named on your command line")
    if client:
        doc = client.refresh_host(name, strict)
    else:
        done = refresh_host(settings(ctx), name, capabilities, strict=strict, nvidia_smi_topo=_topo_m(nvidia_smi_topo))
        doc = {"name": name, "changed": bool(done.changes), "changes": list(done.changes),
               "left_out": left_out_to_list(done.left_out)}
    output.echo_left_out([i.line() for i in left_out_from_list(doc.get("left_out"))])
    changes = doc["changes"]
    if as_json:
        output.echo_json(doc)
    elif changes:
        output.echo_lines([f"host {name}: {len(changes)} change(s)", *("  " + c for c in changes)])
    else:
        typer.echo(f"host {name}: no change")


def _given(*options: tuple[str, object]) -> tuple[str, ...]:
    """The names of the options that were given (the service refuses them in bulk mode)."""
    return tuple(flag for flag, value in options if value)


def _print_batch(batch: Batch, as_json: bool) -> None:
    """Per-host summary (table or JSON) on stdout; if any host failed, raise the batch's error."""
    from vnuma.services.discovery import Result, batch_to_dict

    for outcome in batch.outcomes:
        output.echo_left_out([i.line() for i in outcome.left_out], outcome.name)
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


