"""``vnuma serve``: the HTTP API (:mod:`vnuma.api`) on uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import settings


def serve(
    ctx: typer.Context,
    listen: Annotated[str, typer.Option("--listen", metavar="HOST:PORT", help="Address to listen on.")] = (
        "127.0.0.1:8750"
    ),
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="Serving processes.")] = 1,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1, metavar="BYTES", help="Largest request body (413 above).")
    ] = 1 << 20,
    rate_limit: Annotated[
        float,
        typer.Option("--rate-limit", min=0, metavar="N", help="Requests per second per token and process "
                     "(429 above; 0: no limit)."),
    ] = 50.0,
    burst: Annotated[
        int | None, typer.Option("--burst", min=1, metavar="N", help="Requests a token may make at once "
                                 "[default: the rate, rounded up].")
    ] = None,
    ssl_certfile: Annotated[
        Path | None, typer.Option("--ssl-certfile", exists=True, dir_okay=False, help="Serve HTTPS: certificate.")
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option("--ssl-keyfile", exists=True, dir_okay=False, help="Serve HTTPS: its key.")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Also run `vnuma watch` (every host, --act off) inside the service.")
    ] = False,
    interval: Annotated[
        str, typer.Option("--interval", metavar="TIME", help="With --watch: time between rounds (10s, 1m).")
    ] = "10s",
) -> None:
    """Serve the inventory over HTTP: the CLI's commands and JSON under /v1, for bearer tokens.

    Routes (request bodies carry the command's options by their long names,
    with underscores, in the CLI's units; answers are the command's --json
    document): GET|POST /v1/hosts, GET|DELETE /v1/hosts/NAME, POST
    /v1/hosts/NAME/cordon|uncordon|refresh|reserve|drain; GET|POST
    /v1/tenants, GET|PATCH|DELETE /v1/tenants/NAME; POST /v1/place; GET
    /v1/vms, GET /v1/vms/NAME, GET /v1/vms/NAME/guest-view, GET
    /v1/vms/NAME/guest-view/nccl-topo|launch|cloud-init, POST
    /v1/vms/NAME/release|render|apply|start|stop|repin|migrate; GET
    /v1/stats; POST /v1/capacity; POST /v1/rebalance (with "apply": a
    journaled run), POST /v1/rebalance/resume|abort; GET /v1/log; GET|POST
    /v1/tokens, POST /v1/tokens/NAME/revoke. GET /openapi.json describes
    them. `vnuma
    --server URL` runs the CLI's commands through a service. Errors are
    application/problem+json with the CLI's message, hint and exit code.
    GET /metrics: the fleet's figures and the service's own in the
    Prometheus text format, for clients from the metrics_allow addresses
    (configuration; default this machine) without a token, else for
    reader, operator and admin tokens.

    Roles (vnuma token create): reader reads; operator also places,
    releases and moves VMs (repin, migrate, rebalance runs); tenant places,
    sees and releases only its tenant's VMs; admin also manages hosts
    (drain included), tenants and tokens. Every request needs
    Authorization: Bearer TOKEN (401 without). The inventory must be at
    this vnuma's schema (vnuma db upgrade). Once the address is bound, one
    line on stderr says where it listens, on which inventory and with how
    many workers; an address that cannot be bound is exit 9.

    --watch runs the `vnuma watch` loop (every host, measuring and
    detecting, --act off) on a thread of the serving process, every
    --interval; its events and warnings go to stderr, its thresholds
    come from the [watch] table of the configuration file (checked before
    serving).

    Example: vnuma --db /var/lib/vnuma/inventory.db serve --listen 0.0.0.0:8750 --workers 4
    """
    import os

    import uvicorn

    from vnuma.api.serving import HANDOFF, handoff, listening_socket, parse_listen, serve, shared_metrics, where
    from vnuma.services.queries import check_serving, db_status

    host, port = parse_listen(listen)
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise typer.BadParameter("give both --ssl-certfile and --ssl-keyfile, or neither")
    chosen = settings(ctx)
    check_serving(chosen)
    start_watch = _watching(ctx, chosen, interval) if watch else None
    os.environ[HANDOFF] = handoff(chosen, max_body=max_body, rate=rate_limit, burst=burst)
    config = uvicorn.Config(
        "vnuma.api.serving:from_handoff", factory=True, host=host, port=port, workers=workers,
        ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
        ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None, log_level="warning", access_log=False,
        server_header=False,
    )
    sock = listening_socket(host, port)
    scheme = "https" if ssl_certfile else "http"
    banner = (f"vnuma serve: listening on {scheme}://{where(host, port)}, inventory {db_status(chosen)['url']}, "
              f"{workers} worker{'s' * (workers != 1)}")
    stop_watch = start_watch() if start_watch is not None else None
    with shared_metrics(workers):
        served = serve(config, sock, banner)
    if stop_watch is not None:
        stop_watch()
    if not served:
        raise typer.Exit(1)  # uvicorn said why (the application did not start)


def _watching(ctx: typer.Context, chosen: Any, interval: str) -> Any:
    """``serve --watch``'s interval and thresholds, checked now; the function that starts its loop (once the
    address is bound) and returns the one that stops it."""
    import sys

    from vnuma.cli import config
    from vnuma.services.bandwidth import parse_interval
    from vnuma.services.watchconfig import thresholds
    from vnuma.services.watchloop import watch_in_background

    seconds = parse_interval(interval)
    t = thresholds(config(ctx))

    def say(line: str) -> None:
        print(f"vnuma watch: {line}", file=sys.stderr, flush=True)

    return lambda: watch_in_background(chosen, t, seconds, say)
