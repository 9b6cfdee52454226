"""Handing ``vnuma serve``'s settings to uvicorn's serving processes, and reading ``--listen``.

uvicorn starts each worker process from an import string, so the settings
the CLI resolved (and the limits it was given) travel to them in one
environment variable, :data:`HANDOFF`, as JSON; :func:`from_handoff` is the
application factory each worker calls.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from fastapi import FastAPI

from vnuma.api.app import ServeOptions, create_app
from vnuma.errors import InvalidInputError
from vnuma.services import Settings

HANDOFF = "VNUMA_SERVE_SETTINGS"
_LISTEN = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` -> (host, port).

    Raises:
        InvalidInputError: anything else, or a port outside 1-65535.
    """
    m = _LISTEN.match(text.strip())
    if m is None or not 0 < int(m.group(3)) < 65536:
        raise InvalidInputError(f"bad --listen {text!r}", hint="e.g. --listen 127.0.0.1:8750 or [::1]:8750")
    return m.group(1) or m.group(2), int(m.group(3))


def handoff(settings: Settings, *, max_body: int, rate: float, burst: int | None) -> str:
    """The JSON :func:`from_handoff` reads."""
    doc = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items() if k != "warnings"}
    return json.dumps({"settings": doc, "options": asdict(ServeOptions(max_body, rate, burst))})


def from_handoff() -> FastAPI:
    """The application, from the settings ``vnuma serve`` handed over (the uvicorn factory)."""
    doc = json.loads(os.environ[HANDOFF])
    given = doc["settings"]
    if given.get("templates_dir"):
        given["templates_dir"] = Path(given["templates_dir"])
    return create_app(Settings(**given), ServeOptions(**doc["options"]))
