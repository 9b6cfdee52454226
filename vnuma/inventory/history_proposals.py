"""What ``vnuma watch`` decided for its events (SQL text on any :class:`Executor`, SQLite and PostgreSQL
alike): proposals and withheld moves, the moves the budget counts, and tenants' opt-out of automatic moves.

A decision is one row of ``watch_proposals``: ``proposed`` (its ``move``: the planned move, JSON),
``withheld`` (``reason`` says why), ``applying`` (carried out: the rebalance run whose options hold
``"proposal": ID`` is its journal, and says how it ended; a proposal marked ``applying`` with no such run was
interrupted before its run began, and changed nothing), or ``refused`` (its run was refused before it began, a
permit missing or the VM changed since: it changed nothing, and no longer counts as a move).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vnuma.inventory import audit
from vnuma.inventory.executor import Executor

PROPOSED = "proposed"
WITHHELD = "withheld"
APPLYING = "applying"
REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Decision:
    """A stored decision (see the module docstring)."""

    id: int
    event_id: int
    at_ms: int
    status: str
    vm: str | None
    host: str
    to_host: str | None
    objective: str | None
    reason: str
    move: dict[str, Any] | None


_COLUMNS = "id, event_id, at_ms, status, vm, host, to_host, objective, reason, move"


def _decision(r: Sequence[Any]) -> Decision:
    return Decision(int(r[0]), int(r[1]), int(r[2]), str(r[3]), r[4], str(r[5]), r[6], r[7], str(r[8]),
                    None if r[9] is None else json.loads(str(r[9])))


def record(x: Executor, event_id: int, at_ms: int, status: str, host: str, reason: str, *, vm: str | None = None,
           to_host: str | None = None, objective: str | None = None, move: Mapping[str, Any] | None = None) -> int:
    """Keep a decision (and an audit log entry, ``watch-proposed`` or ``watch-withheld``); its id."""
    found = x.one(
        "INSERT INTO watch_proposals (event_id, at_ms, status, vm, host, to_host, objective, reason, move) "
        "VALUES (:event, :at, :status, :vm, :host, :to, :objective, :reason, :move) RETURNING id",
        {"event": event_id, "at": at_ms, "status": status, "vm": vm, "host": host, "to": to_host,
         "objective": objective, "reason": reason,
         "move": None if move is None else json.dumps(dict(move), separators=(",", ":"))},
    )
    assert found is not None
    audit.record(x, f"watch-{status}", proposal=int(found[0]), event=event_id, vm=vm, host=host, to_host=to_host,
                 reason=reason)
    return int(found[0])


def mark_applying(x: Executor, proposal_id: int, at_ms: int) -> None:
    """The proposal is being carried out from ``at_ms`` (its run names it): the budget counts it then."""
    x.run("UPDATE watch_proposals SET status = :s, at_ms = :at WHERE id = :id",
          {"s": APPLYING, "at": at_ms, "id": proposal_id})
    audit.record(x, "watch-applying", proposal=proposal_id)


def mark_refused(x: Executor, proposal_id: int) -> None:
    """Carrying the proposal out was refused before its run began: it changed nothing, and the budget no longer
    counts it (``vnuma events apply ID`` may carry it out again, with the permit it lacked)."""
    x.run("UPDATE watch_proposals SET status = :s WHERE id = :id", {"s": REFUSED, "id": proposal_id})
    audit.record(x, "watch-refused", proposal=proposal_id)


def get(x: Executor, proposal_id: int) -> Decision | None:
    """The decision ``proposal_id``, or None."""
    row = x.one(f"SELECT {_COLUMNS} FROM watch_proposals WHERE id = :id", {"id": proposal_id})
    return None if row is None else _decision(row)


def of_events(x: Executor, event_ids: Iterable[int]) -> dict[int, list[Decision]]:
    """Each event's decisions, oldest first."""
    ids = sorted(set(event_ids))
    out: dict[int, list[Decision]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ", ".join(f":e{i}" for i in range(len(chunk)))
        rows = x.rows(f"SELECT {_COLUMNS} FROM watch_proposals WHERE event_id IN ({marks}) ORDER BY id",
                      {f"e{i}": e for i, e in enumerate(chunk)})
        for r in rows:
            d = _decision(r)
            out.setdefault(d.event_id, []).append(d)
    return out


def counted(x: Executor, since_ms: int) -> list[tuple[int, str, str, int, dict[str, Any] | None]]:
    """The moves the budget counts from ``since_ms`` on: every decision neither withheld nor refused (proposed,
    or carried out), as (id, VM, host it leaves, at ms, the move), by time."""
    rows = x.rows("SELECT id, vm, host, at_ms, move FROM watch_proposals WHERE status NOT IN (:w, :r) "
                  "AND at_ms >= :since ORDER BY at_ms, id", {"w": WITHHELD, "r": REFUSED, "since": since_ms})
    return [(int(i), str(vm), str(host), int(at), None if m is None else json.loads(str(m)))
            for i, vm, host, at, m in rows]


def runs(x: Executor) -> dict[int, tuple[int, str]]:
    """The rebalance runs that carried proposals out: proposal id -> (run id, run status)."""
    out: dict[int, tuple[int, str]] = {}
    for run_id, status, options in x.rows(
            "SELECT id, status, options FROM rebalance_runs WHERE options LIKE :p ORDER BY id", {"p": '%"proposal"%'}):
        proposal = json.loads(str(options)).get("proposal")
        if isinstance(proposal, int):
            out[proposal] = (int(run_id), str(status))
    return out


def opted_out(x: Executor) -> set[str]:
    """The tenants that opted out of automatic moves."""
    return {str(name) for (name,) in x.rows("SELECT name FROM tenants WHERE auto_move = :f", {"f": False})}


def set_auto_move(x: Executor, tenant: str, on: bool) -> bool | None:
    """Set ``tenant``'s opt-in to automatic moves; what it was (None: no such tenant)."""
    row = x.one("SELECT auto_move FROM tenants WHERE name = :n", {"n": tenant})
    if row is None:
        return None
    x.run("UPDATE tenants SET auto_move = :on WHERE name = :n", {"on": on, "n": tenant})
    audit.record(x, "tenant-auto-move", tenant=tenant, auto_move=on)
    return bool(row[0])
