"""``vnuma rebalance``: print a plan of moves (plan only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, settings
from vnuma.placement.model import Objective

if TYPE_CHECKING:
    from vnuma.placement.rebalance import Plan


def rebalance(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option("--host", help="Only plan moves on this host.")] = None,
    objective: Annotated[
        Objective, typer.Option("--objective", help="locality or room.")
    ] = Objective.LOCALITY,
    make_room_for: Annotated[
        str | None,
        typer.Option(
            "--make-room-for",
            metavar="SHAPE",
            help='VM shape to open room for, e.g. "vcpus=32,memory=256GiB,gpus=2".',
        ),
    ] = None,
    max_moves: Annotated[int, typer.Option("--max-moves", help="Most moves in the plan.")] = 3,
    time_limit: Annotated[float, typer.Option("--time-limit", metavar="S", help="Seconds to search.")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Plan moves that improve locality or make room for a VM shape; changes nothing.

    A move re-places one VM (new cells and pCPUs on its host, or another
    host); each move is an engine placement on the state the earlier moves
    leave, so every step is valid. --make-room-for implies --objective room.

    JSON: {"objective", "before", "after", "optimal", "moves": [{"vm",
    "from": {"host", "cells"}, "to": {"host", "cells"}, "reason",
    "cost_kib"}]}; "optimal" says the search finished within the limits.
    """
    from vnuma.services.rebalancing import parse_shape, plan_rebalance

    shape = parse_shape(make_room_for) if make_room_for is not None else None
    if shape is not None:
        objective = Objective.ROOM
    plan = plan_rebalance(
        settings(ctx), objective, host=host, max_moves=max_moves, make_room_for=shape, time_limit_s=time_limit
    )
    doc = plan_to_dict(plan)
    if as_json:
        output.echo_json(doc)
        return
    output.echo_lines(
        [
            f"objective {doc['objective']}: {doc['before']} -> {doc['after']}"
            f" ({'search finished' if doc['optimal'] else 'best found within the limits'})"
        ]
    )
    if not doc["moves"]:
        output.echo_lines(["no moves"])
        return
    output.echo_table(
        None,
        ["#", "VM", "FROM", "TO", "MIGRATES", "REASON"],
        [
            (i, m["vm"], _where(m["from"]), _where(m["to"]), f"{m['cost_kib'] // 1024} MiB", m["reason"])
            for i, m in enumerate(doc["moves"], 1)
        ],
    )


def _where(w: dict[str, Any]) -> str:
    return f"{w['host']} cells {','.join(map(str, w['cells']))}"


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The ``rebalance --json`` document."""
    return {
        "objective": str(plan.objective),
        "before": plan.before,
        "after": plan.after,
        "optimal": plan.optimal,
        "moves": [
            {
                "vm": m.vm,
                "from": {"host": m.from_host, "cells": list(m.from_cells)},
                "to": {"host": m.to_host, "cells": list(m.to_cells)},
                "reason": m.reason,
                "cost_kib": m.cost_kib,
            }
            for m in plan.moves
        ],
    }
