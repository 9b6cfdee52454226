"""``vnuma capacity``: how many more VMs of a shape (or a mix) fit on the inventory as it is."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.options import StrategyOpt, strategy_of
from vnuma.cli.progress import bar


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
    one: each host's refusal grouped by its cause (the check and its words
    for every host), with the closest host of each. Exit 0 also when nothing
    fits.

    SHAPE keys: vcpus, memory (required), gpus, numa_nodes, page_size.

    JSON: {"shapes": [str], "fits": int, "placements": [{"shape", "host",
    "cells": [int]}], "stopped_by": [{"reason", "hosts", "check",
    "example_host", "gist"}], "stopped": bool} ("gist" is the cause,
    "reason" the refusal of its closest host, "example_host"; "stopped":
    false when --count copies fit before any refusal).

    Example: vnuma capacity vcpus=16,memory=64GiB,gpus=2 vcpus=4,memory=16GiB
    """
    from vnuma.documents import capacity_doc
    from vnuma.services.capacity import capacity as run

    client = remote(ctx)
    if client:
        doc = client.capacity({"shapes": list(shapes), "count": count, "host": host, "tenant": tenant,
                               "strategy": strategy.value if strategy else None})
    else:
        with bar("placing copies", as_json=as_json) as progress:
            doc = capacity_doc(run(
                settings(ctx), list(shapes), count=count, host=host, strategy=strategy_of(ctx, strategy),
                tenant=tenant, progress=progress,
            ))
    if as_json:
        output.echo_json(doc)
        return
    _print(doc)


def _print(doc: dict[str, Any]) -> None:
    mix = ", round-robin" if len(doc["shapes"]) > 1 else ""
    output.echo_lines([f"{doc['fits']} fit ({' + '.join(doc['shapes'])}{mix})"])
    if doc["placements"]:
        per_host = Counter(p["host"] for p in doc["placements"])
        output.echo_table(None, ["HOST", "FIT"], sorted(per_host.items()))
    if doc["stopped_by"]:
        output.echo_lines(["the next one is refused by:"])
        output.echo_table(
            None, ["CHECK", "HOSTS", "CAUSE", "CLOSEST"],
            [(s["check"], s["hosts"], s["gist"], f"{s['example_host']}: {s['reason']}" if s["example_host"] else "")
             for s in doc["stopped_by"]],
        )
    elif not doc["stopped"]:
        output.echo_lines(["(stopped at --count)"])
