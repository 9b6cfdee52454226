"""The placing queries, written once, and what places with them: the claim and the move.

Every query is SQL text with ``:name`` parameters, run by an
:class:`~vnuma.inventory.executor.Executor` (``sqlite3`` or SQLAlchemy) in
a transaction its opener began; nothing here begins or commits.

* the snapshot a ``place`` decides on is :func:`.reading.read_snapshot`.
* :func:`claim` (one write transaction): lock the host, re-read what its
  VMs hold and what the tenant holds elsewhere, build the host's ledger
  and ask admission (:meth:`Fleet.admit`, the engine's own rule), then
  insert the VM and its claim rows; the unique indexes refuse whatever
  slipped past.
* :func:`move` (in the caller's write transaction): the same for a VM
  changing placement (a rebalance step), both hosts locked in name order.

A VM of a replica group also locks the group (its ``replica_groups`` row,
created with the group's first VM; locked after the host and the tenant, so
locks are always taken in one order) and reads the group's VMs on the other
hosts (``vms.group_name``) into the ledger (:func:`group_members`): affinity
is decided on every host the group holds, and two claims of one group, even
on two hosts, are decided one after the other, each seeing what the other
committed (PostgreSQL's row lock; SQLite's writers hold the whole file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from vnuma.errors import ConflictError, GroupModeError, InvalidInputError, NotFoundError
from vnuma.inventory import audit, devices, figures, hostledgers
from vnuma.inventory.changes import bump
from vnuma.inventory.claims import claim_rows, decode_placement, encode_placement
from vnuma.inventory.executor import Executor, Params, Refused, Row
from vnuma.inventory.gpuprofiles import PROFILES
from vnuma.inventory.hostledgers import Rows
from vnuma.inventory.reading import HOST, host_of, tenant_of
from vnuma.inventory.schema import VmState
from vnuma.placement.ledger.claim import REPLACE_HINT, gpu_count
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.placement.resctrl import format_asks
from vnuma.placement.result import Rejection
from vnuma.topology import Host, format_cpuset

VM = "SELECT id, placement, tenant_id FROM vms WHERE name = :name"
HOST_MARK = "SELECT id, host_generation FROM hosts WHERE name = :name"
TENANT = "SELECT id, name, isolation, max_vcpus, max_gpus, resctrl FROM tenants WHERE name = :name"
TENANT_BY_ID = "SELECT id, name, isolation, max_vcpus, max_gpus, resctrl FROM tenants WHERE id = :id"
NEW_TENANT = "INSERT INTO tenants (name, isolation) VALUES (:name, :isolation)"
CHANGED_TENANT = (
    "UPDATE tenants SET isolation = :isolation, max_vcpus = :max_vcpus, max_gpus = :max_gpus, resctrl = :resctrl "
    "WHERE id = :id"
)
TENANT_HOSTS = (
    "SELECT DISTINCT h.id, h.name FROM hosts h JOIN vms v ON v.host_id = h.id "
    "WHERE v.tenant_id = :tenant ORDER BY h.name"
)
_ON_HOST = (
    "SELECT v.name, v.placement, t.name, t.isolation, t.max_vcpus, t.max_gpus, t.resctrl FROM vms v "
    "JOIN tenants t ON t.id = v.tenant_id WHERE v.host_id = {host} AND v.id <> :vm ORDER BY v.name"
)
ON_HOST = _ON_HOST.format(host=":host")
"""The VMs on host ``:host`` (an id) but VM ``:vm``, with their tenants."""
_USED_ELSEWHERE = (
    "SELECT coalesce(sum(vcpus), 0), coalesce(sum(gpus), 0) FROM vms "
    "WHERE tenant_id = {tenant} AND host_id <> {host} AND id <> :vm"
)
USED_ELSEWHERE = _USED_ELSEWHERE.format(tenant=":tenant", host=":host")
"""What tenant ``:tenant`` holds on hosts other than ``:host`` (ids), VM ``:vm`` left out."""
_BY_NAME = {"host": "(SELECT id FROM hosts WHERE name = :host_name)",
            "tenant": "(SELECT id FROM tenants WHERE name = :tenant_name)"}
NAMED_ON_HOST = _ON_HOST.format(**_BY_NAME)
NAMED_USED_ELSEWHERE = _USED_ELSEWHERE.format(**_BY_NAME)
""":data:`ON_HOST` and :data:`USED_ELSEWHERE` by the host's and the tenant's names: a claim reads them in the
batch that locks both (no round trip more; an unknown tenant holds nothing)."""
NEW_VM = (
    "INSERT INTO vms (name, tenant_id, host_id, state, vcpus, gpus, placement, group_name) "
    "VALUES (:name, :tenant, :host, :state, :vcpus, :gpus, :placement, :group)"
)
NEW_GROUP = "INSERT INTO replica_groups (name) VALUES (:group) ON CONFLICT (name) DO NOTHING"
GROUP = "SELECT name FROM replica_groups WHERE name = :group"
GROUP_ELSEWHERE = (
    "SELECT name, placement FROM vms WHERE group_name = :group AND host_id <> :host AND id <> :vm ORDER BY name"
)
MOVED_VM = "UPDATE vms SET placement = :placement, host_id = :host, vcpus = :vcpus, gpus = :gpus WHERE id = :vm"
_VM_ID = "(SELECT id FROM vms WHERE name = :vm)"  # claim rows name their VM: inserted with it in one batch
NEW_CPUS = f"INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES ({_VM_ID}, :host, :cpu, :exclusive)"
NEW_PAGES = (
    "INSERT INTO page_claims (vm_id, host_id, cell_id, page_size_kib, count) "
    f"VALUES ({_VM_ID}, :host, :cell, :size, :count)"
)
NEW_DEVICES = f"INSERT INTO device_claims (vm_id, host_id, address) VALUES ({_VM_ID}, :host, :address)"
NEW_SLICES = (
    f"INSERT INTO resctrl_claims (vm_id, host_id, domain_id, ways, mem_bw) VALUES ({_VM_ID}, :host, :domain, "
    ":ways, :mem_bw)"
)
NEW_PARTITIONS = (
    "INSERT INTO partition_claims (vm_id, host_id, gpu, kind, name, vf, start, uuid) "
    f"VALUES ({_VM_ID}, :host, :gpu, :kind, :name, :vf, :start, :uuid)"
)
CLAIM_TABLES = ("cpu_claims", "page_claims", "device_claims", "resctrl_claims", "partition_claims")
DROP_CLAIMS = tuple(f"DELETE FROM {t} WHERE vm_id = :vm" for t in CLAIM_TABLES)


Refit = Callable[[Fleet], Placement | None]
"""A caller's engine choosing again on one host's ledger (see :func:`claim`)."""


class Claimed(NamedTuple):
    """What :func:`claim` wrote: the placement, and its host's mark (id, generation) once the claim counted."""

    placement: Placement
    mark: tuple[int, int]


def _locked_host(x: Executor, name: str) -> tuple[int, Host]:
    return host_of(name, *x.batch([(HOST + x.lock, {"name": name}), (PROFILES, None)]))


def _claimant(x: Executor, name: str, isolation: Isolation | None, rows: list[Row]) -> tuple[int, Tenant, Row]:
    """The tenant's id, record and row from its locked ``rows``; created with ``isolation`` if missing and
    given."""
    row = rows[0] if rows else None
    if row is None:
        if isolation is None:
            raise NotFoundError(f"tenant {name!r} is not in the inventory", hint="see `vnuma tenant list`")
        x.run(NEW_TENANT, {"name": name, "isolation": isolation.value})
        row = x.one(TENANT + x.lock, {"name": name})
        assert row is not None
    return int(row[0]), tenant_of(row[1:]), row


def group_members(x: Executor, group: str | None, host_id: int, vm_id: int = -1) -> list[Placement]:
    """Lock replica group ``group`` (its row, made if missing) and read its VMs on hosts other than ``host_id``
    (VM ``vm_id`` left out); none without a group. The caller holds its host and tenant locks already."""
    if group is None:
        return []
    x.run(NEW_GROUP, {"group": group})
    # Read after the lock: a claim of the group that held it has committed, and this statement sees it.
    _locked, rows = x.batch(
        [(GROUP + x.lock, {"group": group}), (GROUP_ELSEWHERE, {"group": group, "host": host_id, "vm": vm_id})]
    )
    return [decode_placement(str(name), str(doc)) for name, doc in rows]


def host_ledger(
    x: Executor, host_id: int, host: Host, tenant_id: int, tenant: Tenant, vm_id: int = -1,
    members: list[Placement] | None = None,
) -> Fleet:
    """The ledger of one host as the transaction sees it, with ``tenant``'s usage elsewhere (VM ``vm_id`` left
    out) and the replica group's VMs on other hosts (``members``, :func:`group_members`)."""
    params = {"host": host_id, "vm": vm_id}
    on_host, used = x.batch([(ON_HOST, params), (USED_ELSEWHERE, {**params, "tenant": tenant_id})])
    return ledger_of(host, tenant, on_host, used, members)


def ledger_of(
    host: Host, tenant: Tenant, on_host: list[Row], used: list[Row], members: list[Placement] | None = None
) -> Fleet:
    """The ledger of one host from the rows of :data:`ON_HOST` and :data:`USED_ELSEWHERE` (or their named
    forms), ``tenant`` the one asking."""
    placements, tenants = [], {tenant.name: tenant}
    for vm, doc, *tenant_row in on_host:
        owner = tenant_of(tuple(tenant_row))
        tenants.setdefault(owner.name, owner)
        placements.append(decode_placement(vm, doc))
    elsewhere = {tenant.name: Usage(int(used[0][0]), int(used[0][1]))}
    return Fleet([host], placements, tenants.values(), usage_elsewhere=elsewhere, members_elsewhere=members or ())


def _refuse(p: Placement, refusal: Rejection) -> None:
    if refusal.check == "shape":
        raise InvalidInputError(f"placement of VM {p.vm!r}: {refusal.reason}")
    if refusal.check == "group-mode":
        raise GroupModeError(refusal.reason, hint=refusal.hint)
    raise ConflictError(refusal.reason, hint=refusal.hint or REPLACE_HINT)


def _write_claims(
    x: Executor, first: list[tuple[str, Params]], p: Placement, ledger: Fleet, host_ids: list[int],
    last: tuple[tuple[str, Params], ...] = (),
) -> None:
    """The ``first`` statements (the VM's row), the claim rows of ``p`` on its host (the first of
    ``host_ids``), then every host's generation, the figures ``p``'s host keeps once ``ledger`` (that host's,
    admission passed) records it (:mod:`.figures`), and the ``last`` statements (its audit log row): one batch,
    one round trip where the backend can."""
    rows = claim_rows(p, ledger)
    ledger.record(p)
    ids = {"vm": p.vm, "host": host_ids[0]}
    x.write_batch(
        [
            *((sql, [params]) for sql, params in first),
            (NEW_CPUS, [{**ids, "cpu": cpu, "exclusive": excl} for cpu, excl in rows.cpus]),
            (NEW_PAGES, [{**ids, "cell": cell, "size": size, "count": n} for cell, size, n in rows.pages]),
            (NEW_DEVICES, [{**ids, "address": address} for address in rows.devices]),
            (NEW_SLICES, [{**ids, "domain": d, "ways": w, "mem_bw": bw} for d, w, bw in rows.slices]),
            (NEW_PARTITIONS, [
                {**ids, "gpu": gpu, "kind": kind, "name": name, "vf": vf, "start": start, "uuid": uuid}
                for gpu, kind, name, vf, start, uuid in rows.partitions
            ]),
            (bump(x), [{"host": h} for h in host_ids]),
            (figures.SET, [figures.params(host_ids[0], ledger.arrays.figures(ledger.state(p.host).index))]),
            *((sql, [params]) for sql, params in last),
        ]
    )


def claim(
    x: Executor, p: Placement, isolation: Isolation | None = None, refit: Refit | None = None, *,
    url: str | None = None,
) -> Claimed:
    """Record VM ``p.vm`` and everything it holds, if admission accepts it on its host as it is now; the
    placement claimed and the host's mark after it (a reader that knew the host at the mark before, and holds
    that placement, knows the host as this claim leaves it: :meth:`vnuma.services.warm.WarmFleet.settle`).

    ``isolation`` creates the tenant with it when missing; None requires the tenant. ``refit``: when
    admission refuses ``p`` (someone claimed first), the placement the caller's engine would choose on
    this host's ledger as the locked transaction sees it (None: none fits); it is claimed instead if
    admission takes it, so a lost race costs no new decision on the whole fleet. ``url``: the inventory's,
    to keep the host's ledger for this process's next claim there (:mod:`.hostledgers`).

    Raises:
        NotFoundError: no such host, or no such tenant and no ``isolation``.
        InvalidInputError: a malformed placement.
        ConflictError: the VM name exists, or admission refuses (a resource taken or reserved,
            an isolation rule, a replica group or a quota broken), or a unique index refuses a claim row.
        GroupModeError: it asks affinity of a group whose VMs asked anti-affinity, or the reverse.
    """
    if p.tenant is None:
        raise InvalidInputError(f"placement of VM {p.vm!r} has no tenant")
    # The host's lock first, then the tenant's (its quota), in one round trip where the backend can.
    # The generation is read under the host's lock: this claim's bump makes it one more.
    # The host's VMs and what the tenant holds elsewhere are read after both locks, in the same round trip.
    named = {"host_name": p.host, "tenant_name": p.tenant, "vm": -1}
    host_rows, vm_rows, tenant_rows, profiles, mark, on_host, used = x.batch([
        (HOST + x.lock, {"name": p.host}), (VM, {"name": p.vm}), (TENANT + x.lock, {"name": p.tenant}),
        (PROFILES, None), (HOST_MARK, {"name": p.host}), (NAMED_ON_HOST, named), (NAMED_USED_ELSEWHERE, named),
    ])
    host_id, host = host_of(p.host, host_rows, profiles)
    if vm_rows:
        raise ConflictError(f"VM {p.vm!r} already exists", hint=f"release it first with `vnuma vm release {p.vm}`")
    tenant_id, tenant, tenant_row = _claimant(x, p.tenant, isolation, tenant_rows)
    members = group_members(x, p.group, host_id)

    def build() -> Fleet:
        return ledger_of(host, tenant, on_host, used, members)

    rows = None
    if url is None:
        ledger = build()
    else:
        rows = Rows.read(host_rows[0], profiles, tenant_row, on_host, used[0], members)
        ledger = hostledgers.KEPT.take(url, p.host, rows, build)
    refusal = ledger.admit(p)
    if refusal is not None and refit is not None:
        again = refit(ledger)
        if again is not None and again.vm == p.vm and again.host == p.host and ledger.admit(again) is None:
            p, refusal = again, None
    if refusal is not None:
        _refuse(p, refusal)
    row = {
        "name": p.vm, "tenant": tenant_id, "host": host_id, "state": VmState.PLACED.value,
        "vcpus": p.vcpus, "gpus": gpu_count(p), "placement": encode_placement(p), "group": p.group,
    }
    try:
        _write_claims(x, [(NEW_VM, row)], p, ledger, [host_id], (audit.entry("claim", **claim_change(p)),))
    except Refused as err:
        raise ConflictError(
            f"host {p.host!r}: the inventory refused VM {p.vm!r}: {err.cause}",
            hint="another command claimed the same resources first; place the VM again",
        ) from err
    if url is not None and rows is not None:
        hostledgers.KEPT.keep(url, p.host, rows.with_vm(p.vm, str(row["placement"])), ledger)
    return Claimed(p, (host_id, int(mark[0][1]) + 1))


def claim_change(p: Placement) -> dict[str, object]:
    """What the audit log says of a claim: the VM, its tenant and host, and what it holds there (GPU
    partitions as ``KIND NAME on GPU[@START]``, only when it holds any)."""
    change: dict[str, object] = {
        "vm": p.vm, "tenant": p.tenant, "host": p.host, "cells": sorted(set(p.host_cells)),
        "pcpus": format_cpuset(p.dedicated_pcpus | p.shared_pcpus), "devices": [d.address for d in p.devices],
        "memory_kib": p.memory_kib,
    }
    if p.partitions:
        change["partitions"] = [
            f"{a.kind.value} {a.name} on {a.vf or a.gpu}" + (f"@{a.start}" if a.start is not None else "")
            for a in p.partitions
        ]
    return change


def update_tenant(x: Executor, new: Tenant) -> Tenant:
    """Give tenant ``new.name`` the isolation and quotas of ``new``; return what it had.

    An isolation change is re-checked against every host the tenant's VMs are
    on: each of its VMs must be admitted again beside the others' under the
    new isolation (admission's ``core-isolation`` and ``cell-isolation``).
    Quotas may be set below what the tenant holds: that only refuses growth.

    Raises:
        NotFoundError: no such tenant.
        ConflictError: a VM of the tenant would break the new isolation.
    """
    row = x.one(TENANT + x.lock, {"name": new.name})
    if row is None:
        raise NotFoundError(f"tenant {new.name!r} is not in the inventory", hint="see `vnuma tenant list`")
    tenant_id, old = int(row[0]), tenant_of(row[1:])
    if new.isolation is not old.isolation:
        changed = []
        for host_id, host_name in x.rows(TENANT_HOSTS, {"tenant": tenant_id}):
            _, host = _locked_host(x, str(host_name))
            ledger = host_ledger(x, int(host_id), host, tenant_id, Tenant(new.name, old.isolation))
            _readmit(ledger, new)
            changed.append({"host": int(host_id)})
        # Its VMs' hosts are booked anew under the new isolation: a change to each (kept figures cleared).
        if changed:
            x.write_batch([(bump(x), changed)])
    x.run(
        CHANGED_TENANT,
        {"id": tenant_id, "isolation": new.isolation.value, "max_vcpus": new.max_vcpus, "max_gpus": new.max_gpus,
         "resctrl": format_asks(new.llc_kib, new.llc_ways, new.mem_bw)},
    )
    audit.record(x, "tenant-update", tenant=new.name, isolation=new.isolation.value, max_vcpus=new.max_vcpus,
                 max_gpus=new.max_gpus, llc_kib=new.llc_kib, llc_ways=new.llc_ways, mem_bw=new.mem_bw)
    return old


def _readmit(ledger: Fleet, new: Tenant) -> None:
    """Admit the tenant's VMs on a one-host ledger again under its new isolation (the ledger knows
    no quota of the tenant: a quota lowered below its usage refuses growth only)."""
    theirs = [p for p in ledger.placements() if p.tenant == new.name]
    for p in theirs:
        ledger.remove(p.vm)
    ledger.set_isolation(new.name, new.isolation)
    for p in theirs:
        refusal = ledger.admit(p)
        if refusal is not None:
            raise ConflictError(
                f"tenant {new.name!r} cannot have {new.isolation} isolation: {refusal.reason}",
                hint=f"move or release VM {p.vm!r} first (vnuma vm release {p.vm})",
            )
        ledger.record(p)


def move(
    x: Executor, name: str, before: Placement, after: Placement, arriving: frozenset[str] = frozenset(),
    *, returning: bool = False,
) -> None:
    """Move VM ``name``'s claims from ``before`` to ``after``, if admission accepts ``after`` now.

    Both hosts are locked in name order (two moves never deadlock). Quotas
    count the VM once: its own row is left out of what its tenant holds.
    ``arriving``: VMs of its replica group that the same journaled run takes to ``after``'s host too (an
    affine group drained together): admission judges the group as it will be, without them elsewhere.
    ``returning``: ``after`` is what the VM held before the run (an undo; a cordoned host takes it back).

    Raises:
        NotFoundError: unknown VM or host.
        ConflictError: the VM is no longer placed as ``before``, or admission refuses ``after`` (a move
            that would take a VM of an affine group away from the others among them).
        GroupModeError: ``after`` asks affinity of an anti-affine group or the reverse.
    """
    hosts = {h: _locked_host(x, h) for h in sorted({before.host, after.host})}
    row = x.one(VM, {"name": name})
    if row is None:
        raise NotFoundError(f"VM {name!r} is not in the inventory", hint="see `vnuma vm list`")
    vm_id, doc, tenant_id = int(row[0]), str(row[1]), int(row[2])
    if decode_placement(name, doc) != before:
        raise ConflictError(
            f"VM {name!r} is no longer placed as the plan expected (it changed since the plan was made)",
            hint="plan again: vnuma rebalance",
        )
    tenant_row = x.one(TENANT_BY_ID, {"id": tenant_id})
    assert tenant_row is not None
    tenant = tenant_of(tenant_row[1:])
    host_id, host = hosts[after.host]
    members = [m for m in group_members(x, after.group, host_id, vm_id) if m.vm not in arriving]
    ledger = host_ledger(x, host_id, host, tenant_id, tenant, vm_id, members)
    refusal = ledger.admit(after, returning=returning)
    if refusal is not None:
        _refuse(after, refusal)
    values = {"placement": encode_placement(after), "host": host_id, "vcpus": after.vcpus, "gpus": gpu_count(after)}
    others = [locked_id for locked_id, _host in hosts.values() if locked_id != host_id]
    try:
        first = [*((sql, {"vm": vm_id}) for sql in DROP_CLAIMS), (MOVED_VM, {**values, "vm": vm_id})]
        _write_claims(x, first, after, ledger, [host_id, *others])
    except Refused as err:
        raise ConflictError(
            f"host {after.host!r}: the inventory refused moving VM {name!r}: {err.cause}",
            hint="another command claimed the same resources first; plan again",
        ) from err
    devices.after_release(x, hosts[before.host][0], before, after)
    if returning:
        devices.after_return(x, host_id, after)
