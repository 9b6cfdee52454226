"""``vnuma log``: who changed what in the inventory, when, with which command, and how it ended."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import hosts, tenants, vms


def log(
    ctx: typer.Context,
    vm: Annotated[str | None, typer.Option("--vm", help="Only entries touching this VM.", autocompletion=vms)] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Only entries touching this host.", autocompletion=hosts)
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only entries touching this tenant.", autocompletion=tenants)
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this time: 2026-12-01, 2026-12-01T08:00 (UTC), or 2h, 7d.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="The last N invocations that match.")] = 100,
    as_json: output.JsonOpt = False,
) -> None:
    """Show the audit log: every change to the inventory, one entry per command that made or tried one.

    Each change is written in the transaction that makes it, so none is
    unlogged; a command that changes the inventory and is refused (bad
    input, nothing fits, a conflict) or fails (libvirt, the database, a bug)
    adds its outcome. Oldest first. Who is the OS user (and the user sudo
    ran for) on the machine that ran vnuma.

    JSON: [{"at": ISO time (UTC), "user", "machine", "command", "outcome":
    "ok"|"refused"|"failed", "changes": [{"op", ...}], "error" (refused and
    failed only)}]; each change names what it touched ("vm", "host",
    "tenant") with its own details.

    Example: vnuma log --vm tenant-a-llm --since 7d
    """
    from vnuma.services.audit import read

    client = remote(ctx)
    filters = {"vm": vm, "host": host, "tenant": tenant, "since": since, "limit": limit}
    entries = client.log(**filters) if client else read(settings(ctx), **filters)
    if as_json:
        output.echo_json(entries)
        return
    output.echo_table(
        None,
        ["AT", "USER", "OUTCOME", "COMMAND", "CHANGES"],
        [(e["at"][:19].replace("T", " "), e["user"], e["outcome"], e["command"], _changes(e)) for e in entries],
    )


def _changes(entry: dict[str, Any]) -> str:
    parts = []
    for c in entry["changes"]:
        named = [f"{k}={','.join(v) if isinstance(v, list) else v}" for k in ("vm", "host", "tenant")
                 if (v := c.get(k))]
        parts.append(f"{c['op']}({' '.join(named)})")
    if "error" in entry:
        parts.append(f"error: {json.dumps(entry['error'])[1:-1]}")
    return "; ".join(parts) or "-"
