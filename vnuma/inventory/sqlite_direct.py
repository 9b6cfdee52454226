"""DB-API access to a SQLite inventory for ``vnuma place``, without importing SQLAlchemy.

``vnuma place`` is one process per decision, and importing SQLAlchemy with
its ORM takes 0.3-0.5 s: more than reading and deciding on 1,000 hosts.
:class:`DirectSqlite` serves exactly the calls the placement use case makes
(:class:`PlacingInventory`, a subset of :class:`vnuma.inventory.repo.Inventory`)
through the stdlib ``sqlite3`` module, with the same dataclasses, errors and
guarantees:

* the connection is set up as ``db.make_engine`` sets up SQLite (busy
  timeout, foreign keys, WAL, ``BEGIN`` issued by us);
* every call is one transaction; reads see one snapshot;
* :meth:`DirectSqlite.claim` (see :mod:`.sqlite_claim`) takes the write lock
  first (``BEGIN IMMEDIATE``: SQLite's form of the host row lock), re-reads
  the host, the VM name, the tenant and the host's claims inside it, runs
  the same checks and writes the same rows as ``vms.claim``, and the same
  database constraints refuse any double booking the checks might miss.

:func:`open_placing_inventory` picks it only for a plain ``sqlite:///PATH``
URL whose file exists and is at :data:`SCHEMA_REVISION`; everything else (a
new file to create, an older or newer schema, a foreign database, URL
options, PostgreSQL) opens the ORM inventory, so creation, migration errors
and their messages stay on one path. ``tests/inventory/test_sqlite_direct.py``
runs both paths on the same inventories and compares what they answer.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Protocol

from vnuma.errors import ConflictError, InventoryError, NotFoundError
from vnuma.inventory.claims import decode_placement
from vnuma.inventory.guard import cause_of, hint_for_text
from vnuma.inventory.schema import SCHEMA_REVISION, VmState
from vnuma.inventory.sqlite_claim import claim_in, tenant_usage_in
from vnuma.inventory.topologies import HostRowTuple, assemble_hosts, decode_host
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.topology import Host

DEFAULT_BUSY_TIMEOUT_MS = 5000
_PREFIX = "sqlite:///"
_HOST_HINT = "see `vnuma host list`"
_TENANT_HINT = "see `vnuma tenant list`"


class PlacingInventory(Protocol):
    """What placing a VM reads and writes; :class:`Inventory` and :class:`DirectSqlite` both provide it."""

    def close(self) -> None: ...
    def __enter__(self) -> PlacingInventory: ...
    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...
    def get_tenant(self, name: str) -> Tenant: ...
    def tenant_isolations(self) -> dict[str, Isolation]: ...
    def tenant_usage(self, name: str) -> tuple[int, int]: ...
    def get_host(self, name: str) -> Host: ...
    def list_hosts(self, names: Iterable[str] | None = None) -> list[Host]: ...
    def get_vm(self, name: str) -> tuple[Placement, VmState]: ...
    def list_vms(
        self, tenant: str | None = None, host: str | None = None
    ) -> list[tuple[Placement, VmState]]: ...
    def placements_on(self, host_names: Iterable[str] | None = None) -> list[Placement]: ...
    def claim(self, placement: Placement, isolation: Isolation | None = None) -> None: ...


def open_placing_inventory(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> PlacingInventory:
    """The inventory at ``url`` for placing: :class:`DirectSqlite` when it can serve, else ``open_inventory``.

    Raises:
        InventoryError: as ``open_inventory`` (the fallback) raises it.
    """
    path = sqlite_file(url)
    if path is not None:
        direct = DirectSqlite.open(url, path, busy_timeout_ms)
        if direct is not None:
            return direct
    from vnuma.inventory.db import open_inventory

    return open_inventory(url, busy_timeout_ms=busy_timeout_ms)


def sqlite_file(url: str) -> str | None:
    """The file of a plain ``sqlite:///PATH`` URL naming an existing file, else None."""
    if not url.startswith(_PREFIX):
        return None
    path = url[len(_PREFIX) :]
    # Query options, %-escapes, URI filenames and in-memory databases: leave them to SQLAlchemy.
    if not path or path == ":memory:" or path.startswith("file:") or any(ch in path for ch in "?%"):
        return None
    return path if os.path.isfile(path) else None


class DirectSqlite:
    """A SQLite inventory at head, read and claimed through ``sqlite3``; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, url: str) -> None:
        self.url = url
        self._conn = conn

    @classmethod
    def open(cls, url: str, path: str, busy_timeout_ms: int) -> DirectSqlite | None:
        """Connect to ``path``; None when it is not a vnuma inventory at :data:`SCHEMA_REVISION`."""
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error:
            rows = []
        if conn is not None and rows == [(SCHEMA_REVISION,)]:
            return cls(conn, url)
        if conn is not None:
            conn.close()
        return None

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> DirectSqlite:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction (``BEGIN IMMEDIATE`` to write), its driver errors as vnuma errors."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.IntegrityError as err:
            raise ConflictError(
                f"inventory {self.url} refused a conflicting change: {cause_of(err)}",
                hint="another command claimed the same resource first; run the command again",
            ) from err
        except sqlite3.Error as err:
            raise InventoryError(f"inventory {self.url}: {cause_of(err)}", hint=hint_for_text(cause_of(err))) from err

    # --- tenants ----------------------------------------------------------------------------

    def get_tenant(self, name: str) -> Tenant:
        """One tenant (NotFoundError if unknown)."""
        with self._tx() as c:
            row = c.execute(
                "SELECT name, isolation, max_vcpus, max_gpus FROM tenants WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"tenant {name!r} is not in the inventory", hint=_TENANT_HINT)
        return Tenant(row[0], Isolation(row[1]), row[2], row[3])

    def tenant_isolations(self) -> dict[str, Isolation]:
        """Every tenant's isolation level, by name."""
        with self._tx() as c:
            return {name: Isolation(iso) for name, iso in c.execute("SELECT name, isolation FROM tenants")}

    def tenant_usage(self, name: str) -> tuple[int, int]:
        """(vCPUs, GPUs) held by the tenant's VMs; (0, 0) when it has none."""
        with self._tx() as c:
            return tenant_usage_in(c, name)

    # --- hosts ------------------------------------------------------------------------------

    def get_host(self, name: str) -> Host:
        """One host (NotFoundError if unknown)."""
        with self._tx() as c:
            row = c.execute(
                "SELECT name, uri, source, topology, reserved_cpuset FROM hosts WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"host {name!r} is not in the inventory", hint=_HOST_HINT)
        return decode_host(*row)

    def list_hosts(self, names: Iterable[str] | None = None) -> list[Host]:
        """Every host (or those named), sorted by name; each distinct topology text is read once.

        The SQL twin of ``hosts.list_hosts``.
        """
        sql = (
            "SELECT name, uri, source, reserved_cpuset, topology_digest, "
            "CASE WHEN topology_digest = '' THEN topology END FROM hosts"
        )
        args: list[str] = []
        if names is not None:
            args = sorted(set(names))
            sql += f" WHERE name IN ({', '.join('?' * len(args))})"
        with self._tx() as c:
            rows: list[HostRowTuple] = c.execute(sql + " ORDER BY name", args).fetchall()

            def text_of(digest: str) -> str:
                found = c.execute("SELECT topology FROM hosts WHERE topology_digest = ? LIMIT 1", (digest,))
                return str(found.fetchone()[0])

            return assemble_hosts(rows, text_of)

    # --- VMs --------------------------------------------------------------------------------

    def get_vm(self, name: str) -> tuple[Placement, VmState]:
        """A VM's placement and state (NotFoundError if unknown)."""
        with self._tx() as c:
            row = c.execute("SELECT name, placement, state FROM vms WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFoundError(f"VM {name!r} is not in the inventory", hint="see `vnuma vm list`")
        return decode_placement(row[0], row[1]), VmState(row[2])

    def list_vms(self, tenant: str | None = None, host: str | None = None) -> list[tuple[Placement, VmState]]:
        """VMs sorted by name, optionally filtered by tenant and/or host."""
        sql = (
            "SELECT v.name, v.placement, v.state FROM vms v JOIN hosts h ON h.id = v.host_id "
            "JOIN tenants t ON t.id = v.tenant_id WHERE 1 = 1"
        )
        args: list[str] = []
        for column, value in (("t.name", tenant), ("h.name", host)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        with self._tx() as c:
            rows = c.execute(sql + " ORDER BY v.name", args).fetchall()
        return [(decode_placement(name, doc), VmState(state)) for name, doc, state in rows]

    def placements_on(self, host_names: Iterable[str] | None = None) -> list[Placement]:
        """Placements of all VMs (or those on the named hosts), sorted by host then VM."""
        sql = "SELECT v.name, v.placement FROM vms v JOIN hosts h ON h.id = v.host_id"
        args: list[str] = []
        if host_names is not None:
            args = sorted(set(host_names))
            sql += f" WHERE h.name IN ({', '.join('?' * len(args))})"
        with self._tx() as c:
            rows = c.execute(sql + " ORDER BY h.name, v.name", args).fetchall()
        return [decode_placement(name, doc) for name, doc in rows]

    def claim(self, placement: Placement, isolation: Isolation | None = None) -> None:
        """Record the VM and its claims in one write transaction, as ``Inventory.claim`` does.

        Raises:
            NotFoundError: unknown host, or unknown tenant with no isolation given.
            InvalidInputError: a malformed placement.
            ConflictError: the VM exists, a resource is no longer free, or a quota would be exceeded.
        """
        with self._tx(write=True) as c:
            claim_in(c, placement, isolation)

