"""Hosts: ``host list|show|add|import|refresh|reserve|remove|cordon|uncordon``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import Document, HostAddBody, HostImportBody, ReserveBody
from vnuma.api.gate import Caller, Change
from vnuma.errors import InvalidInputError
from vnuma.services import Settings
from vnuma.services.tokens import Token


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The host routes."""
    @app.get("/v1/hosts", summary="vnuma host list")
    def host_list(token: Caller) -> list[dict[str, Any]]:
        from vnuma.services.queries import host_summaries

        auth.allow(token, auth.FLEET_READ, "read hosts")
        return host_summaries(settings)

    @app.get("/v1/hosts/{name}", summary="vnuma host show")
    def host_show(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.services.queries import host_document

        auth.allow(token, auth.FLEET_READ, "read hosts")
        return host_document(settings, name)[1]

    @app.post("/v1/hosts", summary="vnuma host add", status_code=201)
    def host_add(body: HostAddBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.codec import imported_summary
        from vnuma.services.hosts import add_host

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "add hosts")
            return imported_summary(add_host(settings, body.name, body.uri, None, body.demo, strict=body.strict))

        return change(request, token, {"host": body.name}, run)

    @app.post("/v1/hosts/import", summary="vnuma host import", status_code=201)
    def host_import(body: HostImportBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.codec import imported_summary
        from vnuma.services.hosts import import_host

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "import hosts")
            imported = import_host(settings, body.name, _document(body.capabilities),
                                   [d for d in map(_document, body.nodedev) if d is not None], _document(body.hwloc),
                                   strict=body.strict)
            return imported_summary(imported)

        return change(request, token, {"host": body.name}, run)

    @app.post("/v1/hosts/{name}/refresh", summary="vnuma host refresh")
    def host_refresh(name: str, token: Caller, request: Request, strict: bool = False) -> dict[str, Any]:
        from vnuma.codec import left_out_to_list
        from vnuma.services.hosts import refresh_host

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "refresh hosts")
            result = refresh_host(settings, name, None, strict=strict)
            return {"name": name, "changed": bool(result.changes), "changes": list(result.changes),
                    "left_out": left_out_to_list(result.left_out)}

        return change(request, token, {"host": name}, run)

    @app.post("/v1/hosts/{name}/reserve", summary="vnuma host reserve")
    def host_reserve(name: str, body: ReserveBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.queries import host_document, reserve

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "reserve host CPUs")
            reserve(settings, name, body.cpus, body.llc_ways, body.mem_bw_limit)
            return host_document(settings, name)[1]

        return change(request, token, {"host": name}, run)

    @app.delete("/v1/hosts/{name}", summary="vnuma host remove")
    def host_remove(name: str, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.queries import remove_host

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "remove hosts")
            remove_host(settings, name)
            return {"name": name, "removed": True}

        return change(request, token, {"host": name}, run)

    def cordoning(name: str, token: Token, request: Request, cordoned: bool) -> dict[str, Any]:
        from vnuma.services.queries import set_cordoned

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "cordon hosts")
            before = set_cordoned(settings, name, cordoned)
            return {"name": name, "cordoned": cordoned, "changed": before != cordoned}

        return change(request, token, {"host": name}, run)

    @app.post("/v1/hosts/{name}/cordon", summary="vnuma host cordon")
    def cordon(name: str, token: Caller, request: Request) -> dict[str, Any]:
        return cordoning(name, token, request, True)

    @app.post("/v1/hosts/{name}/uncordon", summary="vnuma host uncordon")
    def uncordon(name: str, token: Caller, request: Request) -> dict[str, Any]:
        return cordoning(name, token, request, False)


def _document(doc: Document | None) -> tuple[str, bytes] | None:
    """A body's file as the services take it.

    Raises:
        InvalidInputError: content that is not base64.
    """
    if doc is None:
        return None
    try:
        return doc.file, base64.b64decode(doc.content_base64, validate=True)
    except binascii.Error:
        raise InvalidInputError(f"{doc.file}: content_base64 is not base64") from None
