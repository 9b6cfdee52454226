"""Tokens: ``token list|create|revoke`` (admin)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from vnuma.api import auth
from vnuma.api.bodies import TokenCreateBody
from vnuma.api.gate import Caller, Change
from vnuma.services import Settings


def routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """The token routes (admin)."""
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
