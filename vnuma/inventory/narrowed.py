"""What ``vnuma place`` reads: only the hosts its engine can choose (:func:`read_narrowed`), in one transaction.

The queries of the whole snapshot are :mod:`.reading`'s; this module adds which hosts to decode
(:func:`vnuma.placement.ledger.kinds.kept`) and, for a request whose choice can be checked against hosts left out
by their kept figures (:mod:`.figures`, :mod:`vnuma.placement.topk`), which claimed hosts to leave out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from vnuma.inventory import figures
from vnuma.inventory.executor import Executor, Row
from vnuma.inventory.gpuprofiles import PROFILES
from vnuma.inventory.reading import (
    FLEET_HOSTS,
    OWN_TOPOLOGIES,
    PLACEMENTS,
    TENANTS,
    Snapshot,
    decode_placements,
    decode_tenants,
    hosts_of_rows,
)
from vnuma.placement.ledger.kinds import FIGURES, kept
from vnuma.placement.model import Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.topology import DeviceKind, Host

PLACEMENTS_OF = "SELECT name, placement FROM vms WHERE name IN ({names}) ORDER BY name"
_IN_LIST = 500
"""The most VMs whose placements are asked by name; more are read with :data:`~.reading.PLACEMENTS` and picked."""
VM_HOSTS = (
    "SELECT v.name, h.name, t.name, v.vcpus, v.gpus, v.group_name FROM vms v JOIN hosts h ON h.id = v.host_id "
    "JOIN tenants t ON t.id = v.tenant_id"
)
"""Every VM's name, host, tenant, vCPUs, GPUs and replica group, without its placement."""


Rank = Callable[[list[str], list[tuple[int, ...]], dict[str, Tenant], Callable[[str], Host]], Collection[str]]
"""Given claimed hosts (in name order) by their kept figures (:mod:`.figures`), every tenant, and a host of the same
kind as each (alike but for its name and claims: decoded once per kind, on demand): those a narrowed read leaves
out (:func:`read_narrowed`)."""


def read_narrowed(
    x: Executor, named: frozenset[str], *, group: str | None = None, rank: Rank | None = None
) -> Snapshot:
    """:func:`~.reading.read_snapshot` with only the hosts whose ledger has the whole fleet's candidates for a request
    naming hosts ``named`` (:func:`vnuma.placement.ledger.kinds.kept`): the hosts with VMs or device
    states, the named ones, and the first of each kind of the others (their rows alike but for name and URI,
    so the engine's shape and cordon alike). The hosts left out are never decoded, and their GPUs are counted
    in ``gpus_elsewhere``.

    ``rank``: claimed hosts too may be left out. Those with kept figures, no device states, not named and
    holding no VM of replica group ``group`` are handed to ``rank``, and those it names are left out: their
    placements are not read, their VMs count in ``vms_elsewhere`` and in their
    tenants' ``usage_elsewhere``."""
    if rank is None:
        rows, own, placements, tenants, profiles = x.batch(
            [(FLEET_HOSTS, None), (OWN_TOPOLOGIES, None), (PLACEMENTS, None), (TENANTS, None), (PROFILES, None)]
        )
        decoded = decode_placements(placements)
        on = {p.host for p in decoded}
        return _narrowed(x, rows, own, profiles, on, named, decoded, decode_tenants(tenants))
    rows, own, vms, tenant_rows, profiles, kept_rows = x.batch(
        [(FLEET_HOSTS, None), (OWN_TOPOLOGIES, None), (VM_HOSTS, None), (TENANTS, None), (PROFILES, None),
         (figures.KEPT, None)]
    )
    tenants = decode_tenants(tenant_rows)
    on = {str(r[1]) for r in vms}
    held = {*named, *(str(r[0]) for r in rows if r[7]), *(str(r[1]) for r in vms if group and r[5] == group)}
    ranked = [r for r in kept_rows if r[0] not in held and r[0] in on]
    texts: dict[str, str] = {}  # topology texts read for a kind, read once
    left = set(rank([str(r[0]) for r in ranked], [tuple(int(v) for v in r[1:]) for r in ranked], tenants,
                    _alike(x, rows, own, profiles, texts)))
    away = [r for r in vms if r[1] in left]
    usage: dict[str, Usage] = {}
    for _vm, _host, tenant, vcpus, gpus, _group in away:
        usage[tenant] = usage.get(tenant, Usage()).plus(int(vcpus), int(gpus))
    placements = _placements_on(x, [r for r in vms if r[1] not in left])
    snap = _narrowed(x, [r for r in rows if r[0] not in left], own, profiles, on - left, named,
                     decode_placements(placements), tenants, texts)
    gpus = sum(int(r[1 + FIGURES.index("gpus_total")]) for r in kept_rows if r[0] in left)
    return replace(snap, gpus_elsewhere=snap.gpus_elsewhere + gpus, left_out=snap.left_out + len(left),
                   usage_elsewhere=usage, vms_elsewhere=frozenset(str(r[0]) for r in away))


def _alike(
    x: Executor, rows: list[Row], own: list[Row], profiles: list[Row], texts: dict[str, str]
) -> Callable[[str], Host]:
    """A host of each host's kind (:func:`~vnuma.placement.ledger.kinds.kept`'s: its row but for name and URI),
    decoded once per kind when first asked."""
    texts_of = dict(own)
    by_name = {str(r[0]): r for r in rows}
    decoded: dict[object, Host] = {}

    def alike(name: str) -> Host:
        row = by_name[name]
        kind = _kind(row, texts_of)
        host = decoded.get(kind)
        if host is None:
            host = decoded[kind] = hosts_of_rows(x, [row], own, profiles, texts)[0]
        return host

    return alike


def _kind(row: Row, texts_of: dict[object, object]) -> tuple[object, ...]:
    """A :data:`~.reading.FLEET_HOSTS` row's kind: the row but for name and URI, with its own topology text
    when it has no digest (:func:`~vnuma.placement.ledger.kinds.kept`'s kinds)."""
    return (*row[2:], texts_of.get(row[0]) if not row[4] else None)


def _placements_on(x: Executor, vms: list[Row]) -> list[Row]:
    """The (name, placement) rows of the VMs ``vms`` (:data:`VM_HOSTS` rows), in VM name order."""
    if not vms:
        return []
    if len(vms) > _IN_LIST:
        wanted = {r[0] for r in vms}
        return [r for r in x.rows(PLACEMENTS) if r[0] in wanted]
    names = {f"v{i}": str(r[0]) for i, r in enumerate(vms)}
    return x.rows(PLACEMENTS_OF.format(names=", ".join(f":{k}" for k in names)), names)


def _narrowed(
    x: Executor, rows: list[Row], own: list[Row], profiles: list[Row], on: set[str], named: frozenset[str],
    decoded: list[Placement], tenants: dict[str, Tenant], texts: dict[str, str] | None = None,
) -> Snapshot:
    texts_of = dict(own)
    positions, stands_for = kept(
        [_kind(r, texts_of) for r in rows],
        [r[0] in on or bool(r[7]) for r in rows],
        [r[0] in named for r in rows],
    )
    hosts = hosts_of_rows(x, [rows[i] for i in positions], own, profiles, texts)
    elsewhere = sum(n * len(h.devices_of(DeviceKind.GPU)) for h, n in zip(hosts, stands_for, strict=True) if n)
    return Snapshot(hosts, decoded, tenants, elsewhere, sum(stands_for))
