"""Options whose default comes from the site configuration (:mod:`vnuma.services.config`)."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.placement.objectives import Strategy

StrategyOpt = Annotated[
    Strategy | None,
    typer.Option("--strategy", help="Host and cell choice [default: config strategy, VNUMA_STRATEGY, else pack]."),
]


def strategy_of(ctx: typer.Context, given: Strategy | None) -> Strategy:
    """The ``--strategy`` given, else the configured one."""
    from vnuma.cli import config

    return given if given is not None else Strategy(config(ctx)["strategy"])
