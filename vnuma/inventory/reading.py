"""What the read commands ask the inventory, as SQL text written once.

``host list``, ``host show``, ``vm list``, ``vm show`` and ``stats``
answer from these queries on any executor
(:mod:`.executor`): through :func:`open_reader` (``sqlite3`` or psycopg
directly at head, :mod:`.access`), so a read command loads neither
SQLAlchemy nor the placement engine; and through the ORM repository's
connection (:class:`.repo.Inventory`), for the services that already hold
one. Each read is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vnuma.errors import InventoryError, not_in_inventory
from vnuma.inventory import embedded
from vnuma.inventory.access import OverAccess, open_access
from vnuma.inventory.claims import decode_placement
from vnuma.inventory.embedded import KeptDomain
from vnuma.inventory.executor import Executor, Row
from vnuma.inventory.gpuprofiles import PROFILES, decode_profiles
from vnuma.inventory.schema import VmState
from vnuma.inventory.topologies import HostRowTuple, assemble_hosts, decode_host, decode_left_out
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.placement.resctrl import parse_asks
from vnuma.topology import Host
from vnuma.topology.leftout import LeftOut
from vnuma.topology.partitions import with_gpu_profiles

TENANTS = "SELECT name, isolation, max_vcpus, max_gpus, resctrl FROM tenants ORDER BY name"
FLEET_HOSTS = (
    "SELECT name, uri, source, reserved_cpuset, topology_digest, cordoned, resctrl_policy, device_states FROM hosts "
    "ORDER BY name"
)
OWN_TOPOLOGIES = "SELECT name, topology FROM hosts WHERE topology_digest = ''"  # rows written behind our back
TOPOLOGY = "SELECT topology FROM hosts WHERE topology_digest = :digest LIMIT 1"
PLACEMENTS = "SELECT name, placement FROM vms ORDER BY name"
HOST = (
    "SELECT id, name, uri, source, topology, reserved_cpuset, cordoned, resctrl_policy, device_states FROM hosts "
    "WHERE name = :name"
)
SUMMARY_KEYS = ("name", "uri", "source", "cells", "cpus", "gpus", "memory_kib", "cordoned")
HOST_SUMMARIES = (
    "SELECT name, uri, source, n_cells, n_cpus, n_gpus, memory_kib, cordoned FROM hosts ORDER BY name"
)
NAMED = {"host": "SELECT 1 FROM hosts WHERE name = :name", "tenant": "SELECT 1 FROM tenants WHERE name = :name"}
VMS = (
    "SELECT v.name, v.placement, v.state FROM vms v JOIN hosts h ON h.id = v.host_id "
    "JOIN tenants t ON t.id = v.tenant_id WHERE {filters} ORDER BY v.name"
)
VM_FILTERS = {"tenant": "t.name = :tenant", "host": "h.name = :host"}
VM = "SELECT name, placement, state FROM vms WHERE name = :name"
RENDERING = "SELECT rendering FROM vms WHERE name = :name"
STATES = "SELECT name, state FROM vms ORDER BY name"
NAMES = {  # names starting with :prefix (LIKE, with % _ and \\ escaped), for shell completion
    kind: f"SELECT name FROM {table} WHERE name LIKE :prefix ESCAPE '\\' ORDER BY name LIMIT 500"
    for kind, table in (("host", "hosts"), ("tenant", "tenants"), ("vm", "vms"))
}
IN_FLIGHT = (  # steps of the unfinished rebalance run whose claims moved and whose libvirt change is not done
    "SELECT s.vm, r.id, s.seq, s.status FROM rebalance_steps s JOIN rebalance_runs r ON r.id = s.run_id"
    " WHERE r.unfinished IS NOT NULL AND s.status IN ('started', 'undoing')"
)
LEFT_OUT = "SELECT left_out FROM hosts WHERE name = :name"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a placement decides on, read in one transaction."""

    hosts: list[Host]
    placements: list[Placement]
    tenants: dict[str, Tenant]
    gpus_elsewhere: int = 0
    """The GPUs of the hosts a narrowed read left out (:func:`.narrowed.read_narrowed`; a ledger's
    ``gpus_elsewhere``)."""
    left_out: int = 0
    """How many hosts a narrowed read left out (0: it read every host)."""
    usage_elsewhere: dict[str, Usage] = field(default_factory=dict)
    """What the VMs on claimed hosts a narrowed read left out hold, per tenant (a ledger's ``usage_elsewhere``)."""
    vms_elsewhere: frozenset[str] = frozenset()
    """The VMs on claimed hosts a narrowed read left out (a ledger's ``vms_elsewhere``)."""


def tenant_of(row: tuple[object, ...]) -> Tenant:
    """A tenant from its (name, isolation, max_vcpus, max_gpus, resctrl) row."""
    name, isolation, max_vcpus, max_gpus, slices = row
    return Tenant(str(name), Isolation(str(isolation)), _int(max_vcpus), _int(max_gpus), *parse_asks(str(slices or "")))


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def read_tenants(x: Executor) -> dict[str, Tenant]:
    """Every tenant, by name."""
    return decode_tenants(x.rows(TENANTS))


def decode_tenants(rows: list[Row]) -> dict[str, Tenant]:
    return {t.name: t for t in map(tenant_of, rows)}


def read_hosts(x: Executor) -> list[Host]:
    """Every host, sorted by name; each distinct topology text is read and decoded once."""
    rows, own, profiles = x.batch([(FLEET_HOSTS, None), (OWN_TOPOLOGIES, None), (PROFILES, None)])
    return hosts_of_rows(x, rows, own, profiles)


def hosts_of_rows(
    x: Executor, rows: list[Row], own: list[Row], profiles: list[Row], texts: dict[str, str] | None = None
) -> list[Host]:
    """The hosts of :data:`FLEET_HOSTS` rows ``rows`` (``own``: :data:`OWN_TOPOLOGIES`' rows, ``profiles``:
    :data:`~.gpuprofiles.PROFILES`'), each distinct topology text read and decoded once; ``texts``: the texts
    already read, by digest (those read here are added)."""
    texts_of = dict(own)
    host_rows: list[HostRowTuple] = [(*r, texts_of.get(r[0]) if not r[4] else None) for r in rows]  # type: ignore[misc]
    known = {} if texts is None else texts
    digests = sorted({r[4] for r in host_rows if r[8] is None} - known.keys())
    found = x.batch([(TOPOLOGY, {"digest": d}) for d in digests])
    known.update((d, str(rows[0][0])) for d, rows in zip(digests, found, strict=True))
    return with_geometries(assemble_hosts(host_rows, known.__getitem__), profiles)


def with_geometries(hosts: list[Host], profiles: list[Row]) -> list[Host]:
    """``hosts`` each carrying the MIG geometries kept for its GPUs' models (``profiles``: the rows
    :data:`~.gpuprofiles.PROFILES` returned in the same transaction, batched with the host rows): every
    path that builds hosts to place on, claim on or show goes through here."""
    if not profiles:
        return hosts  # stored topologies never carry geometries: nothing to attach, hosts kept as decoded
    geometries = decode_profiles(profiles)
    return [with_gpu_profiles(h, geometries) for h in hosts]


def read_placements(x: Executor) -> list[Placement]:
    """Every VM's placement, sorted by VM name."""
    return decode_placements(x.rows(PLACEMENTS))


def decode_placements(rows: list[Row], unreadable: dict[str, str] | None = None) -> list[Placement]:
    """The placements of ``rows`` (VM name, stored document). InventoryError for one that cannot be read back,
    unless ``unreadable`` is given: it then gets VM -> why, and the others are returned."""
    if unreadable is None:
        return [decode_placement(name, doc) for name, doc in rows]
    found = []
    for name, doc in rows:
        try:
            found.append(decode_placement(name, doc))
        except InventoryError as err:
            unreadable[str(name)] = str(err)
    return found


def read_snapshot(x: Executor, unreadable: dict[str, str] | None = None) -> Snapshot:
    """Tenants, hosts and placements, as one transaction sees them (two batches of queries); ``unreadable``:
    as for :func:`decode_placements`."""
    hosts, own, placements, tenants, profiles = x.batch(
        [(FLEET_HOSTS, None), (OWN_TOPOLOGIES, None), (PLACEMENTS, None), (TENANTS, None), (PROFILES, None)]
    )
    decoded = decode_placements(placements, unreadable)
    return Snapshot(hosts_of_rows(x, hosts, own, profiles), decoded, decode_tenants(tenants))


def read_host(x: Executor, name: str) -> Host:
    """One host (NotFoundError if unknown), with the MIG geometries kept for its GPUs' models."""
    return host_of(name, *x.batch([(HOST, {"name": name}), (PROFILES, None)]))[1]


def host_of(name: str, rows: list[Row], profiles: list[Row]) -> tuple[int, Host]:
    """The id and host of the first of the rows :data:`HOST` returned (NotFoundError: none), with its
    GPUs' MIG geometries from the rows :data:`~.gpuprofiles.PROFILES` returned (:func:`with_geometries`)."""
    if not rows:
        raise not_in_inventory("host", name)
    row = rows[0]
    return int(row[0]), with_geometries([decode_host(*row[1:])], profiles)[0]


def host_summaries(x: Executor) -> list[dict[str, Any]]:
    """``codec.host_summary`` of every host, from the summary columns (no topology parsing)."""
    return [{**dict(zip(SUMMARY_KEYS, row, strict=True)), "cordoned": bool(row[-1])} for row in x.rows(HOST_SUMMARIES)]


def list_vms(x: Executor, tenant: str | None = None, host: str | None = None) -> list[tuple[Placement, VmState]]:
    """VMs sorted by name, optionally only one tenant's and/or one host's.

    Raises:
        NotFoundError: a filter names a tenant or host the inventory does not have
            (an empty list would read as "it has no VMs").
    """
    for what, name in (("tenant", tenant), ("host", host)):
        if name is not None and x.one(NAMED[what], {"name": name}) is None:
            raise not_in_inventory(what, name)
    given = {key: value for key, value in (("tenant", tenant), ("host", host)) if value is not None}
    # Only the filters given (PostgreSQL cannot type a parameter that is only compared with NULL).
    filters = " AND ".join(VM_FILTERS[key] for key in given) or "1 = 1"
    rows = x.rows(VMS.format(filters=filters), given)
    return [(decode_placement(name, doc), VmState(state)) for name, doc, state in rows]


def get_vm(x: Executor, name: str) -> tuple[Placement, VmState]:
    """A VM's placement and state (NotFoundError if unknown)."""
    row = x.one(VM, {"name": name})
    if row is None:
        raise not_in_inventory("vm", name)
    return decode_placement(str(row[0]), row[1]), VmState(row[2])


def decode_rendering(name: str, doc: str | None) -> dict[str, Any] | None:
    """The ``vms.rendering`` text of VM ``name``: how `vnuma apply` last rendered it, None if never applied.

    Raises:
        InventoryError: a text that is not a JSON object.
    """
    if doc is None:
        return None
    try:
        value = json.loads(doc)
    except ValueError as err:
        raise InventoryError(f"inventory: stored rendering of VM {name!r} is unreadable: {err}") from err
    if not isinstance(value, dict):
        raise InventoryError(f"inventory: stored rendering of VM {name!r} is not an object")
    return value


@dataclass(frozen=True, slots=True)
class FleetView:
    """Hosts, placements and tenants (the engine's snapshot) and each VM's state, as one transaction saw them."""

    snapshot: Snapshot
    states: dict[str, VmState]
    in_flight: dict[str, tuple[int, int, str]]
    """VM -> (run id, step, step status) for the VMs an unfinished rebalance run is moving right now."""


def fleet_view(x: Executor) -> FleetView:
    """:func:`read_snapshot`, every VM's state and the moves in flight, in the caller's transaction."""
    states = {str(name): VmState(state) for name, state in x.rows(STATES)}
    moving = {str(vm): (int(run), int(seq), str(status)) for vm, run, seq, status in x.rows(IN_FLIGHT)}
    return FleetView(read_snapshot(x), states, moving)


def left_out(x: Executor, name: str) -> tuple[LeftOut, ...]:
    """The parts the import that wrote host ``name``'s topology left out (NotFoundError: no such host)."""
    row = x.one(LEFT_OUT, {"name": name})
    if row is None:
        raise not_in_inventory("host", name)
    return decode_left_out(name, row[0])


class Reader(OverAccess):
    """The read commands' queries on one inventory, each in its own transaction."""

    def host(self, name: str) -> Host:
        """One host (NotFoundError if unknown)."""
        with self._access.begin(False) as x:
            return read_host(x, name)

    def vm(self, name: str) -> tuple[Placement, VmState]:
        """See :func:`get_vm`."""
        with self._access.begin(False) as x:
            return get_vm(x, name)

    def rendered_vm(self, name: str) -> tuple[Placement, Host, dict[str, Any] | None]:
        """A VM's placement, its host and how its domain was last rendered (:func:`decode_rendering`), in one
        transaction (NotFoundError if unknown)."""
        with self._access.begin(False) as x:
            placement, _state = get_vm(x, name)
            row = x.one(RENDERING, {"name": name})
            return placement, read_host(x, placement.host), decode_rendering(name, row[0] if row else None)

    def snapshot(self) -> Snapshot:
        """Tenants, hosts and placements, read in one transaction (what a placement decides on)."""
        with self._access.begin(False) as x:
            return read_snapshot(x)

    def host_with_vms(self, name: str) -> tuple[Host, list[Placement], dict[str, Tenant]]:
        """One host (NotFoundError if unknown), the placements on it and every tenant, in one transaction."""
        with self._access.begin(False) as x:
            host = read_host(x, name)
            return host, [p for p, _state in list_vms(x, host=name)], read_tenants(x)

    def shown_host(self, name: str) -> tuple[Host, list[Placement], dict[str, Tenant], tuple[LeftOut, ...]]:
        """:meth:`host_with_vms` and the parts its import left out (:func:`left_out`), in one transaction."""
        with self._access.begin(False) as x:
            host = read_host(x, name)
            return host, [p for p, _state in list_vms(x, host=name)], read_tenants(x), left_out(x, name)

    def fleet_view(self) -> FleetView:
        """See :func:`fleet_view`."""
        with self._access.begin(False) as x:
            return fleet_view(x)

    def embedded_domains(self, name: str) -> dict[str, KeptDomain] | None:
        """See :func:`.embedded.kept_domains`."""
        with self._access.begin(False) as x:
            return embedded.kept_domains(x, name)

    def keep_embedded_domain(
        self, host: str, name: str, now: KeptDomain | None, held: Sequence[KeptDomain]
    ) -> None:
        """See :func:`.embedded.keep_domain`: the one write a reader makes, for the embedded hypervisor
        a read command opens (it keeps what that connection changed; a read changes nothing)."""
        with self._access.begin(True) as x:
            embedded.keep_domain(x, host, name, now, held)

    def host_summaries(self) -> list[dict[str, Any]]:
        """See :func:`host_summaries`."""
        with self._access.begin(False) as x:
            return host_summaries(x)

    def names(self, kind: str, prefix: str) -> list[str]:
        """Host, tenant or VM names (``kind``) that start with ``prefix``, sorted, at most 500."""
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._access.begin(False) as x:
            found = [str(row[0]) for row in x.rows(NAMES[kind], {"prefix": like})]
        return [name for name in found if name.startswith(prefix)]  # SQLite's LIKE ignores ASCII case

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
