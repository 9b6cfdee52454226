"""Moving VMs: ``rebalance`` (the plan, and with ``apply`` its journaled run), ``rebalance --resume|--abort``,
``vm repin``, ``vm migrate``, ``host drain``, ``device taint --effect drain``.

A carried-out plan runs inside its request, step by step, as the CLI runs
it (:func:`vnuma.services.rebalance_apply.apply_plan`): the answer is the
plan's document with ``"run"``. A run that fails part-way answers the
failing step's error; the run stays journaled for ``POST
/v1/rebalance/resume`` or ``/abort``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import DeviceDrainBody, DrainBody, MigrateBody, RebalanceBody, RepinBody
from vnuma.api.gate import Caller, Change
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The routes that plan moves and carry them out."""
    from vnuma.documents import plan_doc, run_doc
    from vnuma.placement.rebalance import Plan
    from vnuma.services import lifecycle
    from vnuma.services.permits import Permits, granted, migrate_permits, repin_permits
    from vnuma.services.rebalance_apply import abort, apply_plan, resume

    def carried(plan: Plan, apply: bool, may: Permits) -> dict[str, Any]:
        """The plan's document; carried out (with ``"run"``) when ``apply`` and it has moves."""
        doc = plan_doc(plan)
        if apply and plan.moves:
            report = apply_plan(settings, plan, may)
            doc["run"] = run_doc(report)
        return doc

    @app.post("/v1/rebalance", summary="vnuma rebalance")
    def rebalance(body: RebalanceBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.placement.objectives import Objective
        from vnuma.services.rebalancing import no_room, parse_shape, plan_rebalance

        def run() -> dict[str, Any]:
            auth.allow(token, auth.MOVE if body.apply else auth.FLEET_READ,
                       "carry rebalance plans out" if body.apply else "ask for rebalance plans")
            shape = parse_shape(body.make_room_for) if body.make_room_for is not None else None
            goal = Objective.ROOM if shape is not None else Objective(body.objective)
            plan = plan_rebalance(settings, goal, host=body.host, max_moves=body.max_moves, make_room_for=shape,
                                  time_limit_s=body.time_limit, for_apply=body.apply, solver=body.solver)
            refusal = no_room(plan_doc(plan), body.max_moves, body.host) if shape and not plan.moves else None
            if refusal is not None:
                raise refusal
            return carried(plan, body.apply, granted(body.allow_restart, body.allow_migrate))

        return change(request, token, {"host": body.host}, run) if body.apply else run()

    def finish(token: Any, request: Request, resuming: bool) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            auth.allow(token, auth.MOVE, "resume or abort rebalance runs")
            return {"run": run_doc((resume if resuming else abort)(settings))}

        return change(request, token, {}, run)

    @app.post("/v1/rebalance/resume", summary="vnuma rebalance --resume")
    def rebalance_resume(token: Caller, request: Request) -> dict[str, Any]:
        return finish(token, request, True)

    @app.post("/v1/rebalance/abort", summary="vnuma rebalance --abort")
    def rebalance_abort(token: Caller, request: Request) -> dict[str, Any]:
        return finish(token, request, False)

    @app.post("/v1/vms/{name}/repin", summary="vnuma vm repin")
    def repin(name: str, body: RepinBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.topology import parse_cpuset

        def run() -> dict[str, Any]:
            auth.allow(token, auth.MOVE, "re-pin VMs")
            cells = parse_cpuset(body.cells) if body.cells is not None else None
            plan = lifecycle.plan_repin(settings, name, cells)
            return carried(plan, not body.dry_run, repin_permits(body.live))

        return run() if body.dry_run else change(request, token, {"vm": name}, run)

    @app.post("/v1/vms/{name}/migrate", summary="vnuma vm migrate")
    def migrate(name: str, body: MigrateBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.errors import InvalidInputError

        def run() -> dict[str, Any]:
            auth.allow(token, auth.MOVE, "migrate VMs")
            if body.live and body.cold:
                raise InvalidInputError("give live or cold, not both")
            plan = lifecycle.plan_migrate(settings, name, body.to)
            return carried(plan, not body.dry_run, migrate_permits(body.cold))

        return run() if body.dry_run else change(request, token, {"vm": name, "host": body.to}, run)

    @app.post("/v1/hosts/{name}/drain", summary="vnuma host drain")
    def drain(name: str, body: DrainBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.rebalancing import drain_plan, drain_refusal

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "drain hosts")
            plan = drain_plan(settings, name, max_moves=body.max_moves, time_limit_s=body.time_limit,
                              for_apply=body.apply, solver=body.solver)
            refusal = drain_refusal(name, plan, body.partial, plan_doc(plan))
            if refusal is not None:
                raise refusal
            return carried(plan, body.apply, granted(body.allow_restart, body.allow_migrate))

        return change(request, token, {"host": name}, run)

    @app.post("/v1/hosts/{host}/devices/{device}/drain", summary="vnuma device taint --effect drain")
    def device_drain(host: str, device: str, body: DeviceDrainBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.devicedrain import device_drain_refusal, drain_device
        from vnuma.services.devices import changed_doc

        def run() -> dict[str, Any]:
            auth.allow(token, auth.DEVICES, "change device states")
            if body.apply:
                auth.allow(token, auth.MOVE, "carry drain plans out")
            changed, plan = drain_device(settings, host, device, body.reason, for_apply=body.apply,
                                         who=f"token:{token.name}")
            taint = changed_doc(changed)
            doc = {**plan_doc(plan), "taint": taint}
            refusal = device_drain_refusal(host, changed.address, plan, body.partial, doc)
            if refusal is not None:
                raise refusal
            return {**carried(plan, body.apply, granted(body.allow_restart, body.allow_migrate)), "taint": taint}

        return change(request, token, {"host": host, "device": device}, run)
