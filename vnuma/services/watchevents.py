"""``vnuma events``: the detections ``vnuma watch`` kept, with their evidence."""

from __future__ import annotations

from typing import Any

from vnuma.inventory import history
from vnuma.inventory.access import open_access
from vnuma.services import Settings
from vnuma.services.audit import parse_since
from vnuma.services.watch import iso


def list_events(settings: Settings, since: str | None = None, vm: str | None = None) -> list[dict[str, Any]]:
    """The events open at or after ``since`` (as ``vnuma log --since`` reads it; still open ones too), or
    ``vm``'s only, oldest first, as ``vnuma events --json`` prints them.

    Raises:
        InvalidInputError: a bad ``since``.
    """
    since_ms = round(parse_since(since).timestamp() * 1000) if since is not None else None
    with open_access(settings.db_url) as access, access.begin(False) as x:
        found = history.events(x, since_ms, vm)
    return [
        {"id": e.id, "rule": e.rule, "host": e.host, "vm": e.vm, "cell": e.cell,
         "opened_at": iso(e.opened_ms / 1000), "closed_at": None if e.closed_ms is None else iso(e.closed_ms / 1000),
         "evidence": e.evidence}
        for e in found
    ]
