"""The embedded hypervisor's kept domains: one row per (host, domain), written one domain at a time.

A ``test://`` host's domains live only as long as a libvirt connection, so
vnuma keeps them here for the next one (:mod:`vnuma.services.hypervisors`).
Each change a command makes to a domain writes that domain's row alone, in
one write transaction under the host's lock: two commands changing two
domains of one host at once (parallel ``vnuma apply``) both stay, whatever
each restored when it connected. Until a command first changes a domain of
the host nothing is kept (``hosts.embedded_kept`` false) and the node file's
own domains stand; that first change keeps every domain its connection
holds. SQL text only, run on any :class:`~vnuma.inventory.executor.Executor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vnuma.errors import not_in_inventory
from vnuma.inventory import audit
from vnuma.inventory.executor import Executor

HOST = "SELECT id, embedded_kept FROM hosts WHERE name = :name"
KEPT = "SELECT name, xml, running FROM embedded_domains WHERE host_id = :host ORDER BY name"
ONE = "SELECT xml, running FROM embedded_domains WHERE host_id = :host AND name = :name"
INSERT = "INSERT INTO embedded_domains (host_id, name, xml, running) VALUES (:host, :name, :xml, :running)"
UPDATE = "UPDATE embedded_domains SET xml = :xml, running = :running WHERE host_id = :host AND name = :name"
DELETE = "DELETE FROM embedded_domains WHERE host_id = :host AND name = :name"
MARK_KEPT = "UPDATE hosts SET embedded_kept = :kept WHERE id = :host"


@dataclass(frozen=True, slots=True)
class KeptDomain:
    """A domain as the embedded hypervisor holds it: its inactive XML and whether it runs."""

    name: str
    xml: str
    running: bool


def kept_domains(x: Executor, host: str) -> dict[str, KeptDomain] | None:
    """The domains kept for ``host`` by name; None when nothing is kept yet (the node file's own stand).

    Raises:
        NotFoundError: no such host.
    """
    row = x.one(HOST, {"name": host})
    if row is None:
        raise not_in_inventory("host", host)
    if not row[1]:
        return None
    return {str(n): KeptDomain(str(n), str(xml), bool(running)) for n, xml, running in x.rows(KEPT, {"host": row[0]})}


def keep_domain(x: Executor, host: str, name: str, now: KeptDomain | None, held: Sequence[KeptDomain]) -> None:
    """Keep domain ``name`` of ``host`` as ``now`` (None: it is gone), writing that row alone, under the host's
    lock; unchanged, nothing is written. The host's first keep also keeps ``held`` (every domain the
    connection holds: what the node file brought, changed by this command).

    Raises:
        NotFoundError: no such host.
    """
    row = x.one(HOST + x.lock, {"name": host})
    if row is None:
        raise not_in_inventory("host", host)
    host_id, seeded = int(row[0]), bool(row[1])
    if not seeded:
        x.run(MARK_KEPT, {"host": host_id, "kept": True})
        for d in held:
            if d.name != name:
                _write(x, host_id, d.name, d)
    if _write(x, host_id, name, now) or not seeded:
        state = "gone" if now is None else "running" if now.running else "defined"
        audit.record(x, "embedded-domains", host=host, domain=name, kept=state)


def _write(x: Executor, host_id: int, name: str, now: KeptDomain | None) -> bool:
    """Make ``name``'s row say ``now``; whether it changed."""
    key = {"host": host_id, "name": name}
    old = x.one(ONE, key)
    if now is None:
        if old is not None:
            x.run(DELETE, key)
        return old is not None
    if old is not None and (str(old[0]), bool(old[1])) == (now.xml, now.running):
        return False
    x.run(INSERT if old is None else UPDATE, {**key, "xml": now.xml, "running": now.running})
    return True
