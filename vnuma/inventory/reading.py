"""What the read commands ask the inventory, as SQL text written once.

``host list`` and ``vm list`` answer from these queries on any executor
(:mod:`.executor`): through :func:`open_reader` (``sqlite3`` or psycopg
directly at head, :mod:`.access`), so a read command loads neither
SQLAlchemy nor the placement engine; and through the ORM repository's
connection (:class:`.repo.Inventory`), for the services that already hold
one. Each read is one transaction.
"""

from __future__ import annotations

from typing import Any

from vnuma.errors import NotFoundError
from vnuma.inventory.access import OverAccess, open_access
from vnuma.inventory.claims import decode_placement
from vnuma.inventory.executor import Executor
from vnuma.inventory.schema import VmState
from vnuma.placement.model import Placement

SUMMARY_KEYS = ("name", "uri", "source", "cells", "cpus", "gpus", "memory_kib")
HOST_SUMMARIES = (
    "SELECT name, uri, source, n_cells, n_cpus, n_gpus, memory_kib FROM hosts ORDER BY name"
)
NAMED = {"host": "SELECT 1 FROM hosts WHERE name = :name", "tenant": "SELECT 1 FROM tenants WHERE name = :name"}
VMS = (
    "SELECT v.name, v.placement, v.state FROM vms v JOIN hosts h ON h.id = v.host_id "
    "JOIN tenants t ON t.id = v.tenant_id WHERE {filters} ORDER BY v.name"
)
VM_FILTERS = {"tenant": "t.name = :tenant", "host": "h.name = :host"}


def host_summaries(x: Executor) -> list[dict[str, Any]]:
    """``codec.host_summary`` of every host, from the summary columns (no topology parsing)."""
    return [dict(zip(SUMMARY_KEYS, row, strict=True)) for row in x.rows(HOST_SUMMARIES)]


def list_vms(x: Executor, tenant: str | None = None, host: str | None = None) -> list[tuple[Placement, VmState]]:
    """VMs sorted by name, optionally only one tenant's and/or one host's.

    Raises:
        NotFoundError: a filter names a tenant or host the inventory does not have
            (an empty list would read as "it has no VMs").
    """
    for what, name in (("tenant", tenant), ("host", host)):
        if name is not None and x.one(NAMED[what], {"name": name}) is None:
            raise NotFoundError(f"{what} {name!r} is not in the inventory", hint=f"see `vnuma {what} list`")
    given = {key: value for key, value in (("tenant", tenant), ("host", host)) if value is not None}
    # Only the filters given (PostgreSQL cannot type a parameter that is only compared with NULL).
    filters = " AND ".join(VM_FILTERS[key] for key in given) or "1 = 1"
    rows = x.rows(VMS.format(filters=filters), given)
    return [(decode_placement(name, doc), VmState(state)) for name, doc, state in rows]


class Reader(OverAccess):
    """The read commands' queries on one inventory, each in its own transaction."""

    def host_summaries(self) -> list[dict[str, Any]]:
        """See :func:`host_summaries`."""
        with self._access.begin(False) as x:
            return host_summaries(x)

    def list_vms(self, tenant: str | None = None, host: str | None = None) -> list[tuple[Placement, VmState]]:
        """See :func:`list_vms`."""
        with self._access.begin(False) as x:
            return list_vms(x, tenant, host)


def open_reader(url: str) -> Reader:
    """The inventory at ``url`` for the read commands.

    Raises:
        InventoryError: as ``open_inventory`` raises it (unreachable, not a vnuma
            inventory, a schema other than head).
    """
    return Reader(open_access(url))
