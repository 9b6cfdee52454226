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

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from vnuma.api.gate import Gate, RateLimited, ServeOptions, changes
from vnuma.api.limits import BodyLimit
from vnuma.api.problems import from_error, problem
from vnuma.errors import VnumaError
from vnuma.services import Settings
from vnuma.services.warm import WarmFleet

__all__ = ["API_VERSION", "ServeOptions", "create_app"]

API_VERSION = "1"


def create_app(settings: Settings, options: ServeOptions | None = None) -> FastAPI:
    """The application serving the inventory of ``settings``."""
    from vnuma.api import metrics
    from vnuma.api.routes import devices, fleet, hosts, moves, tenants, tokens, vms

    options = options or ServeOptions()
    app = FastAPI(
        title="vnuma", version=API_VERSION, openapi_url="/openapi.json", docs_url=None, redoc_url=None,
        description="NUMA-aware placement of tenant VMs: the vnuma CLI's commands and JSON documents over HTTP.",
    )
    app.state.gate = Gate(settings, options)
    _handlers(app)
    change = changes(settings)
    hosts.routes(app, settings, change)
    devices.routes(app, settings, change)
    tenants.routes(app, settings, change)
    vms.routes(app, settings, change, WarmFleet())
    vms.domain_routes(app, settings, change)
    fleet.routes(app, settings, change)
    moves.routes(app, settings, change)
    tokens.routes(app, settings, change)
    app.add_middleware(BodyLimit, limit=options.max_body)
    metrics.install(app, settings)
    return app


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(VnumaError)
    def vnuma_error(_request: Request, err: VnumaError) -> JSONResponse:
        return from_error(err)

    @app.exception_handler(RateLimited)
    def rate_limited(_request: Request, err: RateLimited) -> JSONResponse:
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
