"""The fleet: ``stats``, ``capacity`` and the audit ``log``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import BandwidthBody, CapacityBody
from vnuma.api.gate import Caller, Change
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The stats, bandwidth measurement, capacity and audit-log routes."""
    @app.get("/v1/stats", summary="vnuma stats")
    def stats(token: Caller, vm: str | None = None, host: str | None = None) -> dict[str, Any]:
        from vnuma.documents import stats_doc
        from vnuma.services.stats import collect

        auth.allow(token, auth.FLEET_READ, "read stats")
        return stats_doc(collect(settings, vm, host))

    @app.post("/v1/stats/bandwidth", summary="vnuma stats --bandwidth")
    def bandwidth(body: BandwidthBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.documents import bandwidth_doc
        from vnuma.services.bandwidth import measure, parse_interval

        def run() -> dict[str, Any]:
            auth.allow(token, auth.MOVE, "measure memory bandwidth (the samples are kept)")
            return bandwidth_doc(measure(settings, body.vm, body.host, interval_s=parse_interval(body.interval)))

        return change(request, token, {"vm": body.vm, "host": body.host}, run)

    @app.post("/v1/capacity", summary="vnuma capacity")
    def capacity(body: CapacityBody, token: Caller) -> dict[str, Any]:
        from vnuma.documents import capacity_doc
        from vnuma.placement.objectives import Strategy
        from vnuma.services.capacity import capacity as run

        auth.allow(token, auth.FLEET_READ, "ask for capacity")
        strategy = body.strategy or Strategy(settings.strategy)
        return capacity_doc(
            run(settings, body.shapes, count=body.count, host=body.host, strategy=strategy, tenant=body.tenant)
        )

    @app.get("/v1/log", summary="vnuma log")
    def log(
        token: Caller, vm: str | None = None, host: str | None = None, tenant: str | None = None,
        since: str | None = None, limit: int = 100,
    ) -> list[dict[str, Any]]:
        from vnuma.services.audit import read

        auth.allow(token, auth.FLEET_READ, "read the audit log")
        return read(settings, vm=vm, host=host, tenant=tenant, since=since, limit=limit)
