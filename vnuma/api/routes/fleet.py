"""The fleet: ``stats``, ``capacity`` and ``rebalance`` plans."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from vnuma.api import auth
from vnuma.api.bodies import CapacityBody, RebalanceBody
from vnuma.api.gate import Caller
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings) -> None:
    """The stats, capacity and rebalance-plan routes."""
    @app.get("/v1/stats", summary="vnuma stats")
    def stats(token: Caller, vm: str | None = None, host: str | None = None) -> dict[str, Any]:
        from vnuma.documents import stats_doc
        from vnuma.services.stats import collect

        auth.allow(token, auth.FLEET_READ, "read stats")
        return stats_doc(collect(settings, vm, host))

    @app.post("/v1/capacity", summary="vnuma capacity")
    def capacity(body: CapacityBody, token: Caller) -> dict[str, Any]:
        from vnuma.documents import capacity_doc
        from vnuma.placement.model import Strategy
        from vnuma.services.capacity import capacity as run

        auth.allow(token, auth.FLEET_READ, "ask for capacity")
        strategy = body.strategy or Strategy(settings.strategy)
        return capacity_doc(
            run(settings, body.shapes, count=body.count, host=body.host, strategy=strategy, tenant=body.tenant)
        )

    @app.post("/v1/rebalance", summary="vnuma rebalance (the plan)")
    def rebalance(body: RebalanceBody, token: Caller) -> dict[str, Any]:
        from vnuma.documents import plan_doc
        from vnuma.placement.model import Objective
        from vnuma.services.rebalancing import no_room, parse_shape, plan_rebalance

        auth.allow(token, auth.FLEET_READ, "ask for rebalance plans")
        shape = parse_shape(body.make_room_for) if body.make_room_for is not None else None
        goal = Objective.ROOM if shape is not None else Objective(body.objective)
        plan = plan_rebalance(settings, goal, host=body.host, max_moves=body.max_moves, make_room_for=shape,
                              time_limit_s=body.time_limit)
        doc = plan_doc(plan)
        refusal = no_room(doc, body.max_moves, body.host) if shape is not None and not plan.moves else None
        if refusal is not None:
            raise refusal
        return doc
