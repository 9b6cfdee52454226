"""Every request's gate: its bearer token (401 without a valid one), the token's request rate (429 over it),
and the audited invocation a change runs as."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from vnuma.api.limits import RateLimiter
from vnuma.errors import HypervisorError, InventoryError, VnumaError
from vnuma.services import Settings
from vnuma.services.tokens import Authenticator, Token

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Limits of one serving process (see :mod:`.limits`)."""

    max_body: int = 1 << 20
    rate: float = 50.0
    burst: int | None = None


class RateLimited(Exception):
    """A token over its rate: answered 429 with ``Retry-After`` (``wait`` seconds, rounded up)."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


class Gate:
    """The token check and the rate limit of one application."""

    def __init__(self, settings: Settings, options: ServeOptions) -> None:
        self.authenticator = Authenticator(settings)
        self.limiter = RateLimiter(options.rate, options.burst)

    def caller(self, request: Request) -> Token:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        token = self.authenticator.authenticate(value.strip() if scheme.lower() == "bearer" else None)
        wait = self.limiter.take(token.name)
        if wait:
            raise RateLimited(wait)
        return token


def _caller(request: Request) -> Token:
    """The token of a request (401 without a valid one, 429 over its rate)."""
    gate: Gate = request.app.state.gate
    return gate.caller(request)


Caller = Annotated[Token, Depends(_caller)]



Change = Callable[..., Any]
"""``change(request, token, subjects, run)``: ``run`` as one audited invocation (see :func:`changes`)."""


def changes(settings: Settings) -> Change:
    """The :data:`Change` of an application serving ``settings``."""

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
                              {k: v for k, v in subjects.items() if v}, cause=err)
            raise
        finally:
            audit.end()

    return change
