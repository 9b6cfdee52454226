"""Handing ``vnuma serve``'s settings to uvicorn's serving processes, reading ``--listen``, and serving.

uvicorn starts each worker process from an import string, so the settings
the CLI resolved (and the limits it was given) travel to them in one
environment variable, :data:`HANDOFF`, as JSON; :func:`from_handoff` is the
application factory each worker calls. :func:`serve` binds the address
first, says on stderr where it listens, on which inventory and with how many
workers (one line, once the address is really bound), then serves on that
socket in one process or several.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from vnuma.api.app import ServeOptions, create_app
from vnuma.api.metrics import MULTIPROCESS
from vnuma.errors import ConflictError, InvalidInputError
from vnuma.services import Settings
from vnuma.services.cleanconfig import CleanCommand

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


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (``SO_REUSEADDR``, inheritable: uvicorn's worker processes share
    it), as uvicorn binds one.

    Raises:
        ConflictError: the address cannot be bound (in use, not this machine's, not allowed).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ConflictError(f"cannot listen on {where(host, port)}: {err.strerror}",
                            hint="pick another address with --listen HOST:PORT") from None
    sock.listen(2048)  # uvicorn's backlog: connections queue from now on, before the workers accept them
    sock.set_inheritable(True)
    return sock


def where(host: str, port: int) -> str:
    """``127.0.0.1:8750``, ``[::1]:8750``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(config: Any, sock: socket.socket, banner: str) -> bool:
    """Print ``banner`` on stderr, then serve ``config`` (a ``uvicorn.Config``) on ``sock`` until stopped: in
    this process, or in ``config.workers`` processes. False when the one process never started serving."""
    from uvicorn import Server
    from uvicorn.supervisors import Multiprocess

    print(banner, file=sys.stderr, flush=True)
    server = Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=[sock]).run()
            return True
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        return True
    return bool(server.started)


@contextmanager
def shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, each one's request counts and latencies go to files in a temporary directory
    that every worker's ``/metrics`` reads (prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``:
    the workers inherit it), removed when serving ends; a directory the operator set is used as it is."""
    if workers < 2 or os.environ.get(MULTIPROCESS):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="vnuma-metrics-") as directory:
        os.environ[MULTIPROCESS] = directory
        try:
            yield
        finally:
            os.environ.pop(MULTIPROCESS, None)


def from_handoff() -> FastAPI:
    """The application, from the settings ``vnuma serve`` handed over (the uvicorn factory)."""
    doc = json.loads(os.environ[HANDOFF])
    given = doc["settings"]
    if given.get("templates_dir"):
        given["templates_dir"] = Path(given["templates_dir"])
    if given.get("cleaning"):
        given["cleaning"] = CleanCommand.from_dict(given["cleaning"])
    return create_app(Settings(**given), ServeOptions(**doc["options"]))
