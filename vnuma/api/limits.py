"""Limits of the service: request bodies over a size (413) and requests per token over a rate (429).

The body limit is an ASGI middleware: a ``Content-Length`` over the limit
is refused before a byte is read, and a body sent without one (chunked) is
read by the middleware as it arrives, refused the moment it passes the
limit, and handed on whole otherwise. The rate
is a token bucket per API token: ``rate`` requests per second on average,
bursts of up to ``burst``; a request over it is answered 429 with
``Retry-After`` (whole seconds). Each serving process keeps its own buckets,
so with ``--workers N`` a token may make up to N times the rate in all.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from vnuma.api.problems import problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """Refuse request bodies of more than ``limit`` bytes with 413."""

    def __init__(self, app: App, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # No length declared (chunked): read the body here, up to the limit, and hand it on whole.
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, "too-large", "request body too large", f"request bodies are limited to {self.limit} bytes",
            hint="send a smaller body (vnuma serve --max-body sets the limit)",
        )
        await response(scope, receive, send)


class RateLimiter:
    """Token buckets, one per API token: ``rate`` per second, bursts of ``burst`` (``rate`` 0: no limit)."""

    def __init__(self, rate: float, burst: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1, math.ceil(rate))
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # token -> (tokens left, at)
        self._lock = threading.Lock()

    def take(self, token: str) -> float:
        """0 when the request may go; else the seconds until it could."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            left, at = self._buckets.get(token, (float(self.burst), now))
            left = min(float(self.burst), left + (now - at) * self.rate)
            if left >= 1:
                self._buckets[token] = (left - 1, now)
                return 0.0
            self._buckets[token] = (left, now)
            return (1 - left) / self.rate
