"""Tenant rows: add, look up, remove, usage sums.

Functions take an open ``Session`` inside the caller's transaction and
return dataclasses; ORM rows never leave ``vnuma.inventory``.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.inventory.lookup import named_row
from vnuma.inventory.models import TenantRow, VmRow
from vnuma.placement.model import Isolation, Tenant
from vnuma.placement.resctrl import format_asks, parse_asks

_LIST_HINT = "see `vnuma tenant list`"


def _tenant(row: TenantRow) -> Tenant:
    return Tenant(row.name, Isolation(row.isolation), row.max_vcpus, row.max_gpus, *parse_asks(row.resctrl or ""))


def tenant_row(session: Session, name: str, *, lock: bool = False) -> TenantRow:
    """The row of tenant ``name``; ``lock`` takes its row lock (PostgreSQL).

    Raises:
        NotFoundError: no such tenant.
    """
    return named_row(session, TenantRow, name, "tenant", lock=lock)


def _check_quotas(t: Tenant) -> None:
    for label, value in (("max_vcpus", t.max_vcpus), ("max_gpus", t.max_gpus)):
        if value is not None and value < 0:
            raise InvalidInputError(f"tenant {t.name!r}: {label} is {value}, it must be 0 or more")


def add_tenant(session: Session, t: Tenant) -> None:
    """Insert a tenant.

    Raises:
        InvalidInputError: a negative quota.
        ConflictError: a tenant of that name exists.
    """
    _check_quotas(t)
    if session.scalar(select(TenantRow.id).where(TenantRow.name == t.name)) is not None:
        raise ConflictError(f"tenant {t.name!r} already exists", hint=_LIST_HINT)
    session.add(
        TenantRow(name=t.name, isolation=t.isolation.value, max_vcpus=t.max_vcpus, max_gpus=t.max_gpus,
                  resctrl=format_asks(t.llc_kib, t.llc_ways, t.mem_bw))
    )
    session.flush()


def ensure_tenant(session: Session, name: str, isolation: Isolation) -> TenantRow:
    """The locked row of tenant ``name``, created with ``isolation`` if it does not exist yet."""
    row = session.scalars(select(TenantRow).where(TenantRow.name == name).with_for_update()).one_or_none()
    if row is None:
        row = TenantRow(name=name, isolation=isolation.value, max_vcpus=None, max_gpus=None, resctrl="")
        session.add(row)
        session.flush()
    return row


def get_tenant(session: Session, name: str) -> Tenant:
    """One tenant."""
    return _tenant(tenant_row(session, name))


def list_tenants(session: Session) -> list[Tenant]:
    """Every tenant, sorted by name."""
    return [_tenant(r) for r in session.scalars(select(TenantRow).order_by(TenantRow.name))]


def remove_tenant(session: Session, name: str) -> None:
    """Delete a tenant that has no VMs.

    Raises:
        NotFoundError: no such tenant.
        ConflictError: it still has VMs.
    """
    row = tenant_row(session, name, lock=True)
    vms = list(session.scalars(select(VmRow.name).where(VmRow.tenant_id == row.id).order_by(VmRow.name)))
    if vms:
        shown = ", ".join(vms[:5]) + (f" and {len(vms) - 5} more" if len(vms) > 5 else "")
        raise ConflictError(
            f"tenant {name!r} still has {len(vms)} VM(s): {shown}",
            hint="release them first with `vnuma vm release NAME`",
        )
    session.execute(delete(TenantRow).where(TenantRow.id == row.id))


def tenant_usage(session: Session, name: str) -> tuple[int, int]:
    """(vCPUs, GPUs) held by the tenant's VMs; (0, 0) for a tenant with no VMs or no row yet."""
    stmt = (
        select(func.coalesce(func.sum(VmRow.vcpus), 0), func.coalesce(func.sum(VmRow.gpus), 0))
        .join(TenantRow, TenantRow.id == VmRow.tenant_id)
        .where(TenantRow.name == name)
    )
    vcpus, gpus = session.execute(stmt).one()
    return int(vcpus), int(gpus)
