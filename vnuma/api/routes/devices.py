"""Device states: ``device taint|untaint|clean|set|list`` and ``host set`` (admin and operator tokens change
them; fleet readers list them)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import AfterReleaseBody, TaintBody
from vnuma.api.gate import Caller, Change
from vnuma.errors import InvalidInputError
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The device routes."""
    from vnuma.services import devices

    @app.get("/v1/devices", summary="vnuma device list")
    def device_list(token: Caller, host: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        auth.allow(token, auth.FLEET_READ, "read devices")
        return devices.list_devices(settings, host, state)

    def changing(request: Request, token: Any, host: str, device: str | None, run: Any) -> dict[str, Any]:
        def guarded() -> dict[str, Any]:
            auth.allow(token, auth.DEVICES, "change device states")
            return run()  # type: ignore[no-any-return]

        return change(request, token, {"host": host, "device": device}, guarded)

    @app.post("/v1/hosts/{host}/devices/{device}/taint", summary="vnuma device taint")
    def taint(host: str, device: str, body: TaintBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.topology.devstates import TaintEffect

        try:
            effect = TaintEffect(body.effect)
        except ValueError:
            raise InvalidInputError(f"unknown effect {body.effect!r}", hint="one of no-schedule, drain") from None
        return changing(request, token, host, device, lambda: devices.changed_doc(
            devices.taint(settings, host, device, body.reason, effect, f"token:{token.name}")))

    @app.post("/v1/hosts/{host}/devices/{device}/untaint", summary="vnuma device untaint")
    def untaint(host: str, device: str, token: Caller, request: Request) -> dict[str, Any]:
        return changing(request, token, host, device,
                        lambda: devices.changed_doc(devices.untaint(settings, host, device)))

    @app.post("/v1/hosts/{host}/devices/{device}/clean", summary="vnuma device clean")
    def clean(host: str, device: str, token: Caller, request: Request) -> dict[str, Any]:
        return changing(request, token, host, device,
                        lambda: devices.changed_doc(devices.clean(settings, host, device)))

    @app.post("/v1/hosts/{host}/devices/{device}/set", summary="vnuma device set")
    def device_set(host: str, device: str, body: AfterReleaseBody, token: Caller, request: Request) -> dict[str, Any]:
        return changing(request, token, host, device, lambda: devices.changed_doc(
            devices.set_after_release(settings, host, device, body.after_release)))

    @app.post("/v1/hosts/{host}/set", summary="vnuma host set")
    def host_set(host: str, body: AfterReleaseBody, token: Caller, request: Request) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            done = devices.set_after_release(settings, host, None, body.after_release)
            return {"host": host, "after_release": body.after_release, "changed": done.changed}

        return changing(request, token, host, None, run)
