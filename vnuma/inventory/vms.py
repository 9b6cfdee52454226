"""VM rows and their claims: claim, release, look up, change state.

Functions take an open ``Session`` inside the caller's transaction and
return dataclasses; ORM rows never leave ``vnuma.inventory``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, exc, func, select, update
from sqlalchemy.orm import Session

from vnuma.errors import ConflictError, InvalidInputError, InventoryError
from vnuma.inventory import hosts, tenants
from vnuma.inventory.claims import (
    Holder,
    HostClaims,
    check_claim,
    check_tenant_quota,
    claim_rows,
    decode_placement,
    encode_placement,
    gpu_count,
    host_claims,
)
from vnuma.inventory.guard import cause_of
from vnuma.inventory.lookup import named_row
from vnuma.inventory.models import CpuClaim, DeviceClaim, HostRow, PageClaim, TenantRow, VmRow, VmState
from vnuma.placement.model import Isolation, Placement
from vnuma.topology import Host

_LIST_HINT = "see `vnuma vm list`"


def load_claims(session: Session, host_id: int, host: Host) -> HostClaims:
    """What the VMs on a host hold now, read inside the caller's transaction."""
    holder = (VmRow.name, TenantRow.name, TenantRow.isolation)
    cpu_rows = session.execute(
        select(CpuClaim.cpu_id, CpuClaim.exclusive, *holder)
        .join(VmRow, VmRow.id == CpuClaim.vm_id)
        .join(TenantRow, TenantRow.id == VmRow.tenant_id)
        .where(CpuClaim.host_id == host_id)
        .order_by(VmRow.name, CpuClaim.cpu_id)
    ).all()
    cpus = tuple((cpu, excl, Holder(vm, t, Isolation(iso))) for cpu, excl, vm, t, iso in cpu_rows)
    pages = session.execute(
        select(PageClaim.cell_id, PageClaim.page_size_kib, func.sum(PageClaim.count))
        .where(PageClaim.host_id == host_id)
        .group_by(PageClaim.cell_id, PageClaim.page_size_kib)
    ).all()
    page_users = session.execute(
        select(PageClaim.cell_id, *holder)
        .join(VmRow, VmRow.id == PageClaim.vm_id)
        .join(TenantRow, TenantRow.id == VmRow.tenant_id)
        .where(PageClaim.host_id == host_id)
        .distinct()
    ).all()
    devices = session.execute(
        select(DeviceClaim.address, VmRow.name).join(VmRow).where(DeviceClaim.host_id == host_id)
    ).all()
    return host_claims(
        cpus,
        ((cell, size, n) for cell, size, n in pages),
        ((cell, Holder(vm, t, Isolation(iso))) for cell, vm, t, iso in page_users),
        ((a, vm) for a, vm in devices),
        host,
    )


def claim(session: Session, p: Placement, isolation: Isolation | None) -> None:
    """Record a VM and everything it holds, after re-checking the host as it is now.

    The host row is locked first, so claims on one host are serialised; the
    tenant row (created with ``isolation`` if missing and given) is locked
    for its quota.

    Raises:
        NotFoundError: no such host, or no such tenant and no ``isolation``.
        InvalidInputError: a malformed placement.
        ConflictError: the VM name exists, a resource is taken or reserved,
            an isolation rule or a tenant quota would be broken.
    """
    host_row = hosts.host_row(session, p.host, lock=True)
    if session.scalar(select(VmRow.id).where(VmRow.name == p.vm)) is not None:
        raise ConflictError(
            f"VM {p.vm!r} already exists", hint=f"release it first with `vnuma vm release {p.vm}`"
        )
    if isolation is None:
        tenant_row = tenants.tenant_row(session, p.tenant, lock=True)
    else:
        tenant_row = tenants.ensure_tenant(session, p.tenant, isolation)
    host = hosts.row_host(host_row)
    check_claim(p, Isolation(tenant_row.isolation), host, load_claims(session, host_row.id, host))
    used = tenants.tenant_usage(session, tenant_row.name)
    check_tenant_quota(tenant_row.name, tenant_row.max_vcpus, tenant_row.max_gpus, used, p)
    vm = VmRow(
        name=p.vm,
        tenant_id=tenant_row.id,
        host_id=host_row.id,
        state=VmState.PLACED.value,
        vcpus=p.vcpus,
        gpus=gpu_count(p),
        placement=encode_placement(p),
    )
    session.add(vm)
    try:
        session.flush()
        session.add_all(_claim_rows(p, host, vm.id, host_row.id))
        session.flush()
    except exc.IntegrityError as err:
        raise ConflictError(
            f"host {p.host!r}: the inventory refused VM {p.vm!r}: {cause_of(err)}",
            hint="another command claimed the same resources first; place the VM again",
        ) from err
    hosts.bump_generation(session, host_row.id)


def _claim_rows(p: Placement, host: Host, vm_id: int, host_id: int) -> list[Any]:
    rows = claim_rows(p, host)
    orm: list[Any] = [
        CpuClaim(vm_id=vm_id, host_id=host_id, cpu_id=c, exclusive=excl) for c, excl in rows.cpus
    ]
    orm += [
        PageClaim(vm_id=vm_id, host_id=host_id, cell_id=cell, page_size_kib=size, count=n)
        for cell, size, n in rows.pages
    ]
    orm += [DeviceClaim(vm_id=vm_id, host_id=host_id, address=a) for a in rows.devices]
    return orm


def _vm_row(session: Session, name: str) -> VmRow:
    return named_row(session, VmRow, name, "vm")


def release(session: Session, name: str) -> None:
    """Delete a VM and all its claims."""
    row = _vm_row(session, name)
    for table in (CpuClaim, PageClaim, DeviceClaim):
        session.execute(delete(table).where(table.vm_id == row.id))
    session.execute(delete(VmRow).where(VmRow.id == row.id))
    hosts.bump_generation(session, row.host_id)


def get_vm(session: Session, name: str) -> tuple[Placement, VmState]:
    """A VM's placement and state."""
    row = _vm_row(session, name)
    return decode_placement(row.name, row.placement), VmState(row.state)


def list_vms(
    session: Session, tenant: str | None = None, host: str | None = None
) -> list[tuple[Placement, VmState]]:
    """VMs sorted by name, optionally only one tenant's and/or one host's."""
    stmt = (
        select(VmRow.name, VmRow.placement, VmRow.state)
        .join(HostRow, HostRow.id == VmRow.host_id)
        .join(TenantRow, TenantRow.id == VmRow.tenant_id)
        .order_by(VmRow.name)
    )
    if tenant is not None:
        stmt = stmt.where(TenantRow.name == tenant)
    if host is not None:
        stmt = stmt.where(HostRow.name == host)
    return [(decode_placement(name, doc), VmState(state)) for name, doc, state in session.execute(stmt)]


def set_vm_state(session: Session, name: str, state: str) -> None:
    """Record a VM's lifecycle state (placed, defined, running, stopped)."""
    try:
        value = VmState(state)
    except ValueError:
        choices = ", ".join(s.value for s in VmState)
        raise InvalidInputError(f"VM {name!r}: unknown state {state!r} (one of {choices})") from None
    row = _vm_row(session, name)
    session.execute(update(VmRow).where(VmRow.id == row.id).values(state=value.value))


def record_defined(session: Session, name: str, rendering: dict[str, Any]) -> None:
    """The VM's domain was defined: state ``defined`` and how it was rendered, in one update.

    One write, so a process killed after libvirt's define leaves either the
    old state and rendering or both new ones (reconcile settles the former).
    """
    row = _vm_row(session, name)
    doc = json.dumps(rendering, sort_keys=True, separators=(",", ":"))
    values = {"rendering": doc, "state": VmState.DEFINED.value}
    session.execute(update(VmRow).where(VmRow.id == row.id).values(**values))


def get_rendering(session: Session, name: str) -> dict[str, Any] | None:
    """How the VM's domain was last rendered by `vnuma apply`, None if never applied."""
    doc = _vm_row(session, name).rendering
    if doc is None:
        return None
    try:
        value = json.loads(doc)
    except ValueError as err:
        raise InventoryError(f"inventory: stored rendering of VM {name!r} is unreadable: {err}") from err
    if not isinstance(value, dict):
        raise InventoryError(f"inventory: stored rendering of VM {name!r} is not an object")
    return value


def move(session: Session, name: str, before: Placement, after: Placement) -> None:
    """Move a VM's claims from ``before`` to ``after`` in the caller's transaction.

    The VM must still be placed as ``before``. Both hosts' rows are locked in
    name order (no deadlock between two moves), the VM's own claims are
    dropped and ``after`` is checked against what the others hold, exactly
    as a new claim is; quotas are untouched (a move changes no totals).

    Raises:
        NotFoundError: unknown VM or host.
        ConflictError: the VM is no longer placed as ``before``, or ``after``
            does not fit what the host holds now.
    """
    row = _vm_row(session, name)
    if decode_placement(row.name, row.placement) != before:
        raise ConflictError(
            f"VM {name!r} is no longer placed as the plan expected (it changed since the plan was made)",
            hint="plan again: vnuma rebalance",
        )
    rows = {h: hosts.host_row(session, h, lock=True) for h in sorted({before.host, after.host})}
    dest = rows[after.host]
    tenant_row = session.get(TenantRow, row.tenant_id)
    assert tenant_row is not None
    for table in (CpuClaim, PageClaim, DeviceClaim):
        session.execute(delete(table).where(table.vm_id == row.id))
    host = hosts.row_host(dest)
    check_claim(after, Isolation(tenant_row.isolation), host, load_claims(session, dest.id, host))
    doc = encode_placement(after)
    session.execute(
        update(VmRow).where(VmRow.id == row.id).values(
            placement=doc, host_id=dest.id, vcpus=after.vcpus, gpus=gpu_count(after)
        )
    )
    try:
        session.add_all(_claim_rows(after, host, row.id, dest.id))
        session.flush()
    except exc.IntegrityError as err:
        raise ConflictError(
            f"host {after.host!r}: the inventory refused moving VM {name!r}: {cause_of(err)}",
            hint="another command claimed the same resources first; plan again",
        ) from err
    for host_row in rows.values():
        hosts.bump_generation(session, host_row.id)


def placements_on(session: Session, host_names: Iterable[str] | None = None) -> list[Placement]:
    """Placements of every VM (or of the VMs on the named hosts), sorted by host then VM."""
    stmt = (
        select(VmRow.name, VmRow.placement)
        .join(HostRow, HostRow.id == VmRow.host_id)
        .order_by(HostRow.name, VmRow.name)
    )
    if host_names is not None:
        stmt = stmt.where(HostRow.name.in_(sorted(set(host_names))))
    return [decode_placement(name, doc) for name, doc in session.execute(stmt)]
