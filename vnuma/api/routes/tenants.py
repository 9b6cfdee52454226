"""Tenants: ``tenant list|show|create|update|remove``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import TenantCreateBody, TenantUpdateBody
from vnuma.api.gate import Caller, Change
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The tenant routes."""
    from vnuma.codec import tenant_to_dict

    @app.get("/v1/tenants", summary="vnuma tenant list")
    def tenant_list(token: Caller) -> list[dict[str, Any]]:
        from vnuma.services.tenants import tenant_rows

        auth.allow(token, auth.SCOPED_READ, "read tenants")
        return tenant_rows(settings, seen_by=auth.seen_by(token))

    @app.get("/v1/tenants/{name}", summary="vnuma tenant show")
    def tenant_show(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.services.tenants import tenant_rows

        auth.allow(token, auth.SCOPED_READ, "read tenants")
        return tenant_rows(settings, name, seen_by=auth.seen_by(token))[0]

    @app.post("/v1/tenants", summary="vnuma tenant create", status_code=201)
    def tenant_create(body: TenantCreateBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.placement.asktexts import check_slice
        from vnuma.placement.model import Tenant
        from vnuma.services.tenants import create_tenant

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "create tenants")
            llc_kib = check_slice(body.llc, body.llc_ways, body.mem_bw)
            tenant = Tenant(
                body.name, body.isolation, body.max_vcpus, body.max_gpus, llc_kib, body.llc_ways, body.mem_bw
            )
            return tenant_to_dict(create_tenant(settings, tenant))

        return change(request, token, {"tenant": body.name}, run)

    @app.patch("/v1/tenants/{name}", summary="vnuma tenant update")
    def tenant_update(name: str, body: TenantUpdateBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.requests import slice_changes
        from vnuma.services.tenants import KEEP, parse_quota, update_tenant

        def quota(field: str) -> object:
            if field not in body.model_fields_set:
                return KEEP
            value = getattr(body, field)
            return None if value is None else parse_quota(value, field)

        def slice_text(field: str) -> str | None:
            """A slice member as the command line gives it (null: none, clearing it; left out: None)."""
            if field not in body.model_fields_set:
                return None
            value = getattr(body, field)
            return "none" if value is None else str(value)

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "change tenants")
            slices = slice_changes(*(slice_text(f) for f in ("llc", "llc_ways", "mem_bw")))
            old, new = update_tenant(
                settings, name, isolation=body.isolation, max_vcpus=quota("max_vcpus"), max_gpus=quota("max_gpus"),
                slices=slices,
            )
            return {**tenant_to_dict(new), "before": tenant_to_dict(old)}

        return change(request, token, {"tenant": name}, run)

    @app.delete("/v1/tenants/{name}", summary="vnuma tenant remove")
    def tenant_remove(name: str, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.queries import remove_tenant

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "remove tenants")
            remove_tenant(settings, name)
            return {"name": name, "removed": True}

        return change(request, token, {"tenant": name}, run)
