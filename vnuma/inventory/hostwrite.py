"""Recording a new host: its row as SQL text written once.

The ORM repository (:class:`.repo.Inventory`) and ``vnuma host add|import``
(:func:`open_registrar`, over :mod:`.access`: ``sqlite3`` or psycopg at
head, so a single host is recorded without loading SQLAlchemy) both run
:func:`insert_host`. The row holds the host's shape once as compact JSON
(:mod:`.topologies`) plus the summary columns ``host list`` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vnuma.errors import ConflictError
from vnuma.inventory import audit
from vnuma.inventory.access import OverAccess, open_access
from vnuma.inventory.changes import mark
from vnuma.inventory.executor import Executor
from vnuma.inventory.reading import NAMED
from vnuma.inventory.topologies import digest_topology, encode_left_out, encode_topology
from vnuma.topology import DeviceKind, Host, format_cpuset
from vnuma.topology.hostcheck import check_host
from vnuma.topology.leftout import LeftOut
from vnuma.topology.resctrl import format_policy

NEW_HOST = (
    "INSERT INTO hosts (name, uri, source, topology, topology_digest, reserved_cpuset, cordoned, resctrl_policy, "
    "n_cells, n_cpus, n_gpus, memory_kib, topology_override, left_out, change_mark) VALUES (:name, :uri, :source, "
    ":topology, :topology_digest, :reserved_cpuset, :cordoned, :resctrl_policy, :n_cells, :n_cpus, :n_gpus, "
    ":memory_kib, :topology_override, :left_out, {mark})"
)
"""A new host's row, marked as a change (its ``{mark}``: :func:`.changes.mark` of the backend)."""


def summary_columns(host: Host) -> dict[str, int]:
    """The summary columns ``host list`` prints from (no topology parsing)."""
    return {
        "n_cells": len(host.cells),
        "n_cpus": len(host.cpu_ids),
        "n_gpus": len(host.devices_of(DeviceKind.GPU)),
        "memory_kib": host.memory_kib,
    }


def host_columns(host: Host) -> dict[str, Any]:
    """The host row's columns that follow from the host (all but name, override and bookkeeping)."""
    topology = encode_topology(host)
    return {
        "uri": host.uri,
        "source": host.source.value,
        "topology": topology,
        "topology_digest": digest_topology(topology),
        "reserved_cpuset": format_cpuset(host.reserved_cpus),
        "cordoned": host.cordoned,
        "resctrl_policy": format_policy(host.resctrl_policy),
        **summary_columns(host),
    }


def has_host(x: Executor, name: str) -> bool:
    """Whether the inventory has a host called ``name``."""
    return x.one(NAMED["host"], {"name": name}) is not None


def insert_host(
    x: Executor, host: Host, topology_override: str | None = None, left_out: Sequence[LeftOut] = ()
) -> None:
    """Insert a new host, with where a refresh reads its topology (None: libvirt's capabilities) and the
    parts its import left out.

    Raises:
        InvalidInputError: an inconsistent topology.
        ConflictError: a host of that name exists (the unique index refuses a racing one too).
    """
    check_host(host)
    if has_host(x, host.name):
        raise ConflictError(
            f"host {host.name!r} is already in the inventory",
            hint=f"update it with `vnuma host refresh {host.name}`, or `vnuma host remove {host.name}` first",
        )
    x.run(NEW_HOST.format(mark=mark(x.dialect)), {"name": host.name, "topology_override": topology_override,
                     "left_out": encode_left_out(left_out), **host_columns(host)})
    audit.record(x, "host-add", host=host.name, uri=host.uri, source=host.source.value, cells=len(host.cells),
                 cpus=len(host.cpu_ids), devices=len(host.devices), left_out=len(left_out))


class Registrar(OverAccess):
    """Adds hosts, one transaction each."""

    def has_host(self, name: str) -> bool:
        """See :func:`has_host`."""
        with self._access.begin(False) as x:
            return has_host(x, name)

    def add_host(self, host: Host, topology_override: str | None = None, left_out: Sequence[LeftOut] = ()) -> None:
        """See :func:`insert_host`."""
        with self._access.begin(True) as x:
            insert_host(x, host, topology_override, left_out)


def open_registrar(url: str) -> Registrar:
    """The inventory at ``url`` for adding hosts (see :mod:`.access` for which executor).

    Raises:
        InventoryError: as ``open_inventory`` raises it.
    """
    return Registrar(open_access(url))
