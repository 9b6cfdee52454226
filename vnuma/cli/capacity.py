"""``vnuma capacity``: how many more VMs of a shape (or a mix) fit on the inventory as it is."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Annotated

import typer

from vnuma.cli import output, settings
from vnuma.cli.options import StrategyOpt, strategy_of
from vnuma.cli.progress import bar

if TYPE_CHECKING:
    from vnuma.services.capacity import CapacityReport


def capacity(
    ctx: typer.Context,
    shapes: Annotated[
        list[str], typer.Argument(metavar="SHAPE...", help='e.g. "vcpus=16,memory=64GiB,gpus=2" (as --make-room-for).')
    ],
    count: Annotated[
        int | None, typer.Option("--count", help="Stop after N copies (default: until one does not fit).")
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Only this host.")] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Copies belong to this tenant (its isolation and quotas).")
    ] = None,
    strategy: StrategyOpt = None,
    as_json: output.JsonOpt = False,
) -> None:
    """How many more VMs of SHAPE fit now: copies placed one after another on an in-memory copy of the inventory.

    Copies of the shapes are placed round-robin with the same engine and
    admission rule as `vnuma place`, on the hosts and claims the inventory
    holds now, until the next copy fits nowhere (or --count are placed);
    nothing is written. They belong to one new tenant with core isolation,
    or to --tenant T. Prints how many fit, where, and what stops the next
    one: each host's refusal grouped by the check that refused it. Exit 0
    also when nothing fits.

    SHAPE keys: vcpus, memory (required), gpus, numa_nodes, page_size.

    JSON: {"shapes": [str], "fits": int, "placements": [{"shape", "host",
    "cells": [int]}], "stopped_by": [{"reason", "hosts", "check",
    "example_host"}]} ("reason" is the example host's refusal).

    Example: vnuma capacity vcpus=16,memory=64GiB,gpus=2 vcpus=4,memory=16GiB
    """
    from vnuma.services.capacity import capacity as run

    chosen = strategy_of(ctx, strategy)
    with bar("placing copies", as_json=as_json) as progress:
        report = run(
            settings(ctx), list(shapes), count=count, host=host, strategy=chosen, tenant=tenant, progress=progress
        )
    if as_json:
        from vnuma.documents import capacity_doc

        output.echo_json(capacity_doc(report))
        return
    _print(report)


def _print(report: CapacityReport) -> None:
    mix = ", round-robin" if len(report.shapes) > 1 else ""
    output.echo_lines([f"{len(report.placements)} fit ({' + '.join(report.shapes)}{mix})"])
    if report.placements:
        per_host = Counter(p.host for _s, p in report.placements)
        output.echo_table(None, ["HOST", "FIT"], sorted(per_host.items()))
    if report.stopped_by:
        output.echo_lines(["the next one is refused by:"])
        output.echo_table(
            None, ["CHECK", "HOSTS", "FOR EXAMPLE"],
            [(s.check, s.hosts, f"{s.example_host}: {s.example}" if s.example_host else s.example)
             for s in report.stopped_by],
        )
    elif not report.stopped:
        output.echo_lines(["(stopped at --count)"])
