"""The audit log: every change to the inventory, written in the transaction that makes it.

Each write transaction of the inventory calls :func:`record` with what it
changes (``{"op": ..., ...}``) before it commits, so a change and its log
row commit or roll back together: no change is ever unlogged. A row holds
who (the OS user, and the user ``sudo`` ran for; the machine), when, the
command line of the invocation (:func:`begin_invocation`; ``(library)``
when vnuma is used as a library), the outcome (``ok`` for a change), the
changes as JSON, and the names of the VMs, hosts and tenants they touch
(``,a,b,`` lists, for ``vnuma log --vm/--host/--tenant``). An invocation
that is refused or fails adds one more row (:func:`record_outcome`, its own
transaction): ``refused`` (the request was wrong or cannot be met: nothing
changed), or ``failed`` (libvirt, the database or a bug broke it, possibly
after some of its changes were made — those are in its ``ok`` rows).
``vnuma log`` shows one entry per invocation (:func:`read_log`).

SQL text only, run on any :class:`~vnuma.inventory.executor.Executor`: the
``sqlite3`` and psycopg paths log exactly as the ORM path does.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import uuid
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vnuma.inventory.executor import Executor

LIBRARY = "(library)"


@dataclass(frozen=True, slots=True)
class Invocation:
    """Who runs what: the OS user, the machine, the command line, and an id shared by its log rows."""

    command: str
    user: str = field(default_factory=lambda: _user())
    machine: str = field(default_factory=socket.gethostname)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


def _user() -> str:
    try:
        name = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        name = str(os.getuid())
    sudo = os.environ.get("SUDO_USER")
    return f"{name} (sudo by {sudo})" if sudo and sudo != name else name


_current: ContextVar[Invocation | None] = ContextVar("vnuma_invocation", default=None)


def begin_invocation(command: str, *, user: str | None = None, machine: str | None = None) -> Invocation:
    """Name the command line the following changes belong to (the CLI calls this once per command, the API
    once per request, naming the token as ``user`` and the client's address as ``machine``)."""
    given = {key: value for key, value in (("user", user), ("machine", machine)) if value is not None}
    inv = Invocation(command, **given)
    _current.set(inv)
    return inv


def end_invocation() -> None:
    """The invocation is over: later changes (a library caller's) are not its."""
    _current.set(None)


def current() -> Invocation:
    """The invocation changes are logged under (a library caller gets one of its own)."""
    inv = _current.get()
    if inv is None:
        inv = begin_invocation(LIBRARY)
    return inv


INSERT = (
    "INSERT INTO audit_log (invocation, at, username, machine, command, outcome, changes, vms, hosts, tenants) "
    "VALUES (:invocation, :at, :user, :machine, :command, :outcome, :changes, :vms, :hosts, :tenants)"
)


def _names(values: Iterable[str | None]) -> str:
    found = sorted({v for v in values if v})
    return "," + ",".join(found) + "," if found else ""


def _subjects(changes: list[Mapping[str, Any]], key: str) -> str:
    out: list[str | None] = []
    for c in changes:
        value = c.get(key)
        out.extend(value if isinstance(value, list) else [value])
    return _names(out)


def record(x: Executor, op: str, **details: Any) -> None:
    """Log one change (``op`` and its details: ``vm``, ``host``, ``tenant`` name it) in ``x``'s transaction."""
    x.run(*entry(op, **details))


def entry(op: str, **details: Any) -> tuple[str, dict[str, Any]]:
    """The statement and parameters :func:`record` runs, for a caller that sends it with its own writes (one
    round trip: :meth:`~vnuma.inventory.executor.Executor.write_batch`)."""
    return INSERT, _params("ok", [{"op": op, **details}])


def _params(outcome: str, changes: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    inv = current()
    doc: dict[str, Any] = {"changes": changes}
    if error is not None:
        doc["error"] = error
    return {
        "invocation": inv.id,
        "at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "user": inv.user,
        "machine": inv.machine,
        "command": inv.command,
        "outcome": outcome,
        "changes": json.dumps(doc, sort_keys=True),
        "vms": _subjects(changes, "vm"),
        "hosts": _subjects(changes, "host"),
        "tenants": _subjects(changes, "tenant"),
    }


def record_outcome(x: Executor, outcome: str, error: str, subjects: Mapping[str, str | None]) -> None:
    """Log that the current invocation was ``refused`` or ``failed`` with ``error`` (its own transaction);
    ``subjects`` (``vm``, ``host``, ``tenant``) make it findable by name."""
    assert outcome in ("refused", "failed")
    x.run(INSERT, _params(outcome, [{"op": "attempt", **{k: v for k, v in subjects.items() if v}}], error))


_VM = (
    "SELECT h.name, t.name FROM vms v JOIN hosts h ON h.id = v.host_id JOIN tenants t ON t.id = v.tenant_id "
    "WHERE v.name = :name"
)
_STEPS = (
    # The cast types the parameter for PostgreSQL, which cannot infer it from `IS NULL` alone.
    "SELECT vm, before, after FROM rebalance_steps WHERE run_id = :run "
    "AND (CAST(:seq AS INTEGER) IS NULL OR seq = :seq) ORDER BY seq"
)


def vm_subjects(x: Executor, vm: str) -> dict[str, Any]:
    """``{"host", "tenant"}`` of a VM as the inventory holds it now (empty when it is not there)."""
    row = x.one(_VM, {"name": vm})
    return {} if row is None else {"host": str(row[0]), "tenant": str(row[1])}


def step_subjects(x: Executor, run: int, seq: int | None = None) -> dict[str, Any]:
    """``{"vm": [names], "host": [names]}`` of a rebalance run's steps (or of its step ``seq``): the VMs
    they move and the hosts they move them from and to."""
    rows = x.rows(_STEPS, {"run": run, "seq": seq})
    hosts = sorted({str(json.loads(str(doc))["host"]) for r in rows for doc in (r[1], r[2])})
    return {"vm": [str(r[0]) for r in rows], "host": hosts}


def committed(x: Executor, invocation: str) -> list[dict[str, Any]]:
    """The changes invocation ``invocation`` has committed so far, in order (its ``ok`` rows)."""
    rows = x.rows("SELECT changes FROM audit_log WHERE invocation = :inv AND outcome = 'ok' ORDER BY id",
                  {"inv": invocation})
    return [c for (doc,) in rows for c in json.loads(str(doc))["changes"]]


@dataclass(frozen=True, slots=True)
class LogFilter:
    """What ``vnuma log`` asks for: entries touching a VM, host or tenant, since a time, the last N."""

    vm: str | None = None
    host: str | None = None
    tenant: str | None = None
    since: datetime | None = None
    limit: int = 100


def _like(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%,{escaped},%"


def read_log(x: Executor, f: LogFilter) -> list[dict[str, Any]]:
    """The last ``f.limit`` invocations that match, oldest first, one entry each: ``{"at", "user",
    "machine", "command", "outcome", "changes", "error"?}`` (``outcome``: the worst of its rows)."""
    where, params = ["1 = 1"], {}
    for column, value in (("vms", f.vm), ("hosts", f.host), ("tenants", f.tenant)):
        if value is not None:
            where.append(f"{column} LIKE :{column} ESCAPE '\\'")
            params[column] = _like(value)
    if f.since is not None:
        where.append("at >= :since")
        params["since"] = f.since.astimezone(UTC).isoformat(timespec="microseconds")
    matching = (
        f"SELECT invocation, MIN(id) AS first FROM audit_log WHERE {' AND '.join(where)} "
        "GROUP BY invocation ORDER BY first DESC LIMIT :limit"
    )
    params["limit"] = f.limit
    picked = x.rows(matching, params)
    if not picked:
        return []
    ids = {str(r[0]): i for i, r in enumerate(picked)}
    marks = ", ".join(f":i{i}" for i in range(len(ids)))
    rows = x.rows(
        "SELECT invocation, at, username, machine, command, outcome, changes FROM audit_log "
        f"WHERE invocation IN ({marks}) ORDER BY id", {f"i{i}": v for v, i in ids.items()}
    )
    entries: dict[str, dict[str, Any]] = {}
    rank = {"ok": 0, "refused": 1, "failed": 2}
    for inv, at, user, machine, command, outcome, changes in rows:
        doc = json.loads(str(changes))
        e = entries.setdefault(str(inv), {"at": str(at), "user": user, "machine": machine, "command": command,
                                          "outcome": outcome, "changes": []})
        if rank[str(outcome)] > rank[e["outcome"]]:
            e["outcome"] = outcome
        e["changes"] += [c for c in doc["changes"] if c.get("op") != "attempt"]
        if "error" in doc:
            e["error"] = doc["error"]
    return sorted(entries.values(), key=lambda e: e["at"])
