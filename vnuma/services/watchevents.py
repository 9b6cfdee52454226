"""``vnuma events``: the detections ``vnuma watch`` kept, with their evidence."""

from __future__ import annotations

from typing import Any

from vnuma.inventory import history
from vnuma.inventory import history_proposals as decisions
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
        acted = decisions.of_events(x, (e.id for e in found))
        runs = decisions.runs(x)
    return [
        {"id": e.id, "rule": e.rule, "host": e.host, "vm": e.vm, "cell": e.cell,
         "opened_at": iso(e.opened_ms / 1000), "closed_at": None if e.closed_ms is None else iso(e.closed_ms / 1000),
         "evidence": e.evidence, "actions": [action(d, runs.get(d.id)) for d in acted.get(e.id, [])]}
        for e in found
    ]


def action(d: decisions.Decision, run: tuple[int, str] | None) -> dict[str, Any]:
    """A decision as ``vnuma events`` shows it. ``status``: ``proposed`` (``vnuma events apply ID``),
    ``withheld`` (``reason`` says why), or for one carried out its run's outcome: ``applied`` (the run done),
    ``aborted``, ``unfinished`` (``vnuma rebalance --resume|--abort``); one marked carried out whose run never
    began is ``proposed`` again (it changed nothing); ``refused``: its run was refused before it began (the
    event's next action says why; ``vnuma events apply ID`` may try again)."""
    status = d.status
    if status == decisions.APPLYING:
        status = "proposed" if run is None else {"done": "applied", "aborted": "aborted"}.get(run[1], "unfinished")
    return {"id": d.id, "status": status, "at": iso(d.at_ms / 1000), "vm": d.vm, "host": d.host,
            "to_host": d.to_host, "objective": d.objective, "reason": d.reason,
            "move": None if d.move is None else {k: d.move[k] for k in ("from_cells", "to_host", "to_cells")},
            "run": None if run is None else run[0]}
