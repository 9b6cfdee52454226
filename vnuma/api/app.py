"""The application: ``/v1`` routes, each the CLI command it mirrors, answering with that command's document.

``POST /v1/place`` decides on the process's warm ledger
(:class:`~vnuma.services.warm.WarmFleet`: only hosts whose generation moved
are read again) and claims as the CLI does. Routes are plain (``def``)
functions: FastAPI runs each in its thread pool,
so a request waiting on a slow libvirt or database call never holds up
requests for other hosts. A route that changes the inventory runs as one
audited invocation (user ``token:NAME``, machine the client's address, the
command ``METHOD PATH``); its refusal or failure is logged as the CLI's is.
"""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from vnuma.api import auth
from vnuma.api.bodies import (
    CapacityBody,
    PlaceBody,
    ReleaseBody,
    TenantCreateBody,
    TenantUpdateBody,
    TokenCreateBody,
)
from vnuma.api.limits import BodyLimit, RateLimiter
from vnuma.api.problems import from_error, problem
from vnuma.errors import HypervisorError, InventoryError, VnumaError
from vnuma.services import Settings
from vnuma.services.tokens import Authenticator, Token
from vnuma.services.warm import WarmFleet

T = TypeVar("T")
API_VERSION = "1"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Limits of one serving process (see :mod:`.limits`)."""

    max_body: int = 1 << 20
    rate: float = 50.0
    burst: int | None = None


class _RateLimited(Exception):
    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


class _Gate:
    """The token check and the rate limit of one application."""

    def __init__(self, settings: Settings, options: ServeOptions) -> None:
        self.authenticator = Authenticator(settings)
        self.limiter = RateLimiter(options.rate, options.burst)

    def caller(self, request: Request) -> Token:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        token = self.authenticator.authenticate(value.strip() if scheme.lower() == "bearer" else None)
        wait = self.limiter.take(token.name)
        if wait:
            raise _RateLimited(wait)
        return token


def _caller(request: Request) -> Token:
    """The token of a request (401 without a valid one, 429 over its rate)."""
    gate: _Gate = request.app.state.gate
    return gate.caller(request)


Caller = Annotated[Token, Depends(_caller)]


def create_app(settings: Settings, options: ServeOptions | None = None) -> FastAPI:
    """The application serving the inventory of ``settings``."""
    options = options or ServeOptions()
    app = FastAPI(
        title="vnuma", version=API_VERSION, openapi_url="/openapi.json", docs_url=None, redoc_url=None,
        description="NUMA-aware placement of tenant VMs: the vnuma CLI's commands and JSON documents over HTTP.",
    )
    app.state.gate = _Gate(settings, options)
    _handlers(app)

    def change(request: Request, token: Token, subjects: dict[str, str | None], run: Callable[[], T]) -> T:
        """``run`` as one audited invocation; a refusal or failure is logged (best effort) and re-raised."""
        from vnuma.services import audit

        client = request.client.host if request.client else "unknown"
        audit.begin_request(request.method, request.url.path, token.name, client)
        try:
            return run()
        except VnumaError as err:
            outcome = "failed" if isinstance(err, (HypervisorError, InventoryError)) else "refused"
            audit.log_outcome(settings, outcome, " ".join(str(err).split("\n")),
                              {k: v for k, v in subjects.items() if v})
            raise
        finally:
            audit.end()

    _host_routes(app, settings, change)
    _tenant_routes(app, settings, change)
    _vm_routes(app, settings, change, WarmFleet())
    _fleet_routes(app, settings)
    _token_routes(app, settings, change)
    app.add_middleware(BodyLimit, limit=options.max_body)
    return app


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(VnumaError)
    def vnuma_error(_request: Request, err: VnumaError) -> JSONResponse:
        return from_error(err)

    @app.exception_handler(_RateLimited)
    def rate_limited(_request: Request, err: _RateLimited) -> JSONResponse:
        response = problem(429, "rate-limited", "too many requests",
                           f"this token's request rate is limited; retry in {err.wait:.2f} s",
                           hint="slow down (vnuma serve --rate-limit sets the rate)")
        response.headers["Retry-After"] = str(max(1, math.ceil(err.wait)))
        return response

    @app.exception_handler(RequestValidationError)
    def invalid_body(request: Request, err: RequestValidationError) -> JSONResponse:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method in ("POST", "PATCH") and kind not in ("", "application/json"):
            return problem(415, "media-type", "unsupported media type", f"the body is {kind}, not JSON",
                           hint="send Content-Type: application/json")
        errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in err.errors()]
        if any(e["type"] == "json_invalid" for e in errors):
            return problem(400, "malformed", "malformed JSON", "the request body is not JSON", hint=None,
                           errors=errors)
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        detail = f"{'.'.join(first['loc'][1:]) or 'request'}: {first['msg']}"
        return problem(422, "invalid-input", "invalid input", detail, hint="see GET /openapi.json",
                       errors=errors)

    @app.exception_handler(HTTPException)
    def http_error(_request: Request, err: HTTPException) -> JSONResponse:
        return problem(err.status_code, "http", str(err.detail), str(err.detail), hint=None)

    @app.exception_handler(Exception)
    def internal(_request: Request, err: Exception) -> JSONResponse:
        traceback.print_exception(err, file=sys.stderr)
        return problem(500, "internal", "internal error", f"internal error (bug): {type(err).__name__}",
                       hint="see the service's log")


Change = Callable[..., Any]


def _host_routes(app: FastAPI, settings: Settings, change: Change) -> None:
    @app.get("/v1/hosts", summary="vnuma host list")
    def host_list(token: Caller) -> list[dict[str, Any]]:
        from vnuma.services.queries import host_summaries

        auth.allow(token, auth.FLEET_READ, "read hosts")
        return host_summaries(settings)

    @app.get("/v1/hosts/{name}", summary="vnuma host show")
    def host_show(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.codec import host_to_dict
        from vnuma.services.queries import get_host

        auth.allow(token, auth.FLEET_READ, "read hosts")
        return host_to_dict(get_host(settings, name))

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


def _tenant_routes(app: FastAPI, settings: Settings, change: Change) -> None:
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
        from vnuma.placement.model import Tenant
        from vnuma.services.tenants import create_tenant

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "create tenants")
            tenant = Tenant(body.name, body.isolation, body.max_vcpus, body.max_gpus)
            return tenant_to_dict(create_tenant(settings, tenant))

        return change(request, token, {"tenant": body.name}, run)

    @app.patch("/v1/tenants/{name}", summary="vnuma tenant update")
    def tenant_update(name: str, body: TenantUpdateBody, token: Caller, request: Request) -> dict[str, Any]:
        from vnuma.services.tenants import KEEP, parse_quota, update_tenant

        def quota(field: str) -> object:
            if field not in body.model_fields_set:
                return KEEP
            value = getattr(body, field)
            return None if value is None else parse_quota(value, field)

        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "change tenants")
            old, new = update_tenant(
                settings, name, isolation=body.isolation, max_vcpus=quota("max_vcpus"), max_gpus=quota("max_gpus")
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


def _vm_routes(app: FastAPI, settings: Settings, change: Change, warm: WarmFleet) -> None:
    from vnuma.documents import explain_doc, released_doc, vm_doc

    @app.post("/v1/place", summary="vnuma place")
    def place(body: PlaceBody, token: Caller, request: Request) -> JSONResponse:
        from vnuma.codec import placement_to_dict
        from vnuma.placement.model import Strategy
        from vnuma.services.placing import place_vm, require_chosen
        from vnuma.services.requests import place_request
        from vnuma.topology.pcie import Level

        def run() -> JSONResponse:
            auth.allow(token, auth.OPERATE, "place VMs")
            tenant = auth.acting_for(token, body.tenant)
            options = body.model_dump(exclude={
                "tenant", "strategy", "dry_run", "explain", "nics", "page_size", "numa_nodes", "nic_affinity"
            })
            vm = place_request(
                **options, tenant=tenant, page_size=body.page_size or settings.page_size,
                numa_nodes=str(body.numa_nodes), nic_affinity=Level(body.nic_affinity.upper()),
                nics=body.nics if isinstance(body.nics, int) else 0, nics_per_gpu=body.nics == "per-gpu",
            )
            strategy = body.strategy or Strategy(settings.strategy)
            vm, result = place_vm(settings, vm, strategy, dry_run=body.dry_run, explain=body.explain, view=warm)
            chosen = require_chosen(vm, result)
            doc = placement_to_dict(chosen)
            if body.explain:
                doc["explain"] = explain_doc(result)
            return JSONResponse(doc, status_code=200 if body.dry_run else 201)

        if body.dry_run:
            return run()
        tenant = body.tenant or auth.seen_by(token)
        return change(request, token, {"vm": body.name, "tenant": tenant, "host": body.host}, run)

    @app.get("/v1/vms", summary="vnuma vm list")
    def vm_list(token: Caller, tenant: str | None = None, host: str | None = None) -> list[dict[str, Any]]:
        from vnuma.services.queries import list_vms

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        return [vm_doc(p, s) for p, s in list_vms(settings, tenant, host, seen_by=auth.seen_by(token))]

    @app.get("/v1/vms/{name}", summary="vnuma vm show")
    def vm_show(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        return vm_doc(*get_vm(settings, name, seen_by=auth.seen_by(token)))

    @app.post("/v1/vms/{name}/release", summary="vnuma vm release")
    def vm_release(name: str, token: Caller, request: Request, body: ReleaseBody | None = None) -> dict[str, Any]:
        from vnuma.services.applying import release_vm
        from vnuma.services.queries import get_vm

        def run() -> dict[str, Any]:
            auth.allow(token, auth.OPERATE, "release VMs")
            placement, state = get_vm(settings, name, seen_by=auth.seen_by(token))
            release_vm(settings, name, undefine=body.undefine if body else False)
            return released_doc(placement, state)

        return change(request, token, {"vm": name, "tenant": auth.seen_by(token)}, run)


def _fleet_routes(app: FastAPI, settings: Settings) -> None:
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


def _token_routes(app: FastAPI, settings: Settings, change: Change) -> None:
    from vnuma.services import tokens

    @app.get("/v1/tokens", summary="vnuma token list")
    def token_list(token: Caller) -> list[dict[str, Any]]:
        auth.allow(token, auth.ADMIN, "read tokens")
        return [t.as_dict() for t in tokens.tokens(settings)]

    @app.post("/v1/tokens", summary="vnuma token create", status_code=201)
    def token_create(body: TokenCreateBody, token: Caller, request: Request) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "create tokens")
            expires = tokens.parse_expires(body.expires) if body.expires is not None else None
            made, secret = tokens.create_token(settings, body.name, tokens.Role(body.role), body.tenant, expires)
            return {**made.as_dict(), "token": secret}

        return change(request, token, {"tenant": body.tenant}, run)

    @app.post("/v1/tokens/{name}/revoke", summary="vnuma token revoke")
    def token_revoke(name: str, token: Caller, request: Request) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            auth.allow(token, auth.ADMIN, "revoke tokens")
            return tokens.revoke(settings, name).as_dict()

        return change(request, token, {}, run)
