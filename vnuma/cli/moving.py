"""``vnuma vm repin`` and ``vnuma vm migrate``: move one VM, journaled like a one-step rebalance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import VmArg, hosts
from vnuma.cli.placing import vm_app
from vnuma.cli.rebalancing import carry_out, print_plan, show_carried
from vnuma.documents import plan_doc

if TYPE_CHECKING:
    from vnuma.placement.rebalance import Plan
    from vnuma.services.permits import Permits


@vm_app.command("repin")
def repin(
    ctx: typer.Context,
    vm: VmArg,
    cells: Annotated[
        str | None, typer.Option("--cells", metavar="LIST", help="Only these host cells, e.g. 2,3.")
    ] = None,
    live: Annotated[
        bool, typer.Option("--live", help="Only a live re-pin of a running VM; never stop and start it.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the move, change nothing.")] = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Re-fit a VM on its own host (optionally on the given host cells), keeping its guest shape.

    A running VM is re-pinned live where the domain allows it (same guest
    NUMA shape, page size and devices; memory staying on its cells, or 4 KiB
    pages under restrictive numatune), else stopped and started (refused
    with --live). "already placed so: nothing to do" when the engine keeps
    it where it is. JSON: the rebalance plan document ("objective":
    "repin"), with "run" when carried out.

    Example: vnuma vm repin tenant-a-vm1 --cells 2,3 --live
    """
    from vnuma.services.lifecycle import plan_repin
    from vnuma.services.permits import repin_permits
    from vnuma.topology import parse_cpuset

    client = remote(ctx)
    if client:
        _show(vm, client.repin(vm, {"cells": cells, "live": live, "dry_run": dry_run}), as_json)
        return
    plan = plan_repin(settings(ctx), vm, parse_cpuset(cells) if cells is not None else None)
    _carry(ctx, vm, plan, dry_run, as_json, repin_permits(live))


@vm_app.command("migrate")
def migrate(
    ctx: typer.Context,
    vm: VmArg,
    to: Annotated[
        str, typer.Option("--to", metavar="HOST", help="The host to move the VM to.", autocompletion=hosts)
    ],
    live: Annotated[bool, typer.Option("--live", help="Live migration of a running VM (the default).")] = False,
    cold: Annotated[
        bool, typer.Option("--cold", help="Define it there, stop and undefine it here, start it there.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the move, change nothing.")] = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Move a VM to another host: re-fit there under the same claim rules, then move its domain.

    A running VM migrates live (libvirt migration with the destination XML
    rendered from the new placement), or with --cold is defined on the
    destination, stopped and undefined here, and started there; a VM that is
    not running is defined there and undefined here. Live migration of a VM with
    passed-through devices is refused (exit 9): use --cold. A migrate to an
    unknown host is exit 3, to its own host exit 4, to a cordoned host exit
    9, and a VM that does not fit there exit 5. JSON: the rebalance plan
    document ("objective": "migrate"), with "run" when carried out.

    Example: vnuma vm migrate tenant-a-vm1 --to gpu-node-2 --live --dry-run
    """
    from vnuma.services.lifecycle import plan_migrate
    from vnuma.services.permits import migrate_permits

    if live and cold:
        raise typer.BadParameter("give --live or --cold, not both")
    client = remote(ctx)
    if client:
        _show(vm, client.migrate(vm, {"to": to, "live": live, "cold": cold, "dry_run": dry_run}), as_json)
        return
    plan = plan_migrate(settings(ctx), vm, to)
    _carry(ctx, vm, plan, dry_run, as_json, migrate_permits(cold))


def _carry(ctx: typer.Context, vm: str, plan: Plan, dry_run: bool, as_json: bool, may: Permits) -> None:
    doc = plan_doc(plan)
    if dry_run or not plan.moves:
        _show(vm, doc, as_json)
        if plan.moves:
            from vnuma.services.rebalancing import held_up

            if (why := held_up(settings(ctx))) is not None:
                typer.echo(f"warning: {why}", err=True)
        return
    carry_out(ctx, plan, doc, as_json, may)


def _show(vm: str, doc: dict[str, Any], as_json: bool) -> None:
    """A move's document: carried out (with ``"run"``), or the plan (a dry run), or nothing to do."""
    if "run" in doc:
        show_carried(doc, as_json)
    elif as_json:
        output.echo_json(doc)
    elif doc["moves"]:
        print_plan(doc)
    else:
        output.echo_lines([f"VM {vm}: already placed so: nothing to do"])
