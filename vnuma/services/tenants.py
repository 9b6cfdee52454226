"""Tenant use cases: create, change isolation and quotas, and report each tenant's usage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vnuma.errors import InvalidInputError, not_in_inventory
from vnuma.inventory import open_inventory
from vnuma.placement.model import Isolation, Tenant
from vnuma.services import Settings
from vnuma.services.names import check_name, natural_key

KEEP = object()
"""An :func:`update_tenant` argument left as it is."""


def parse_quota(text: str | int | None, flag: str) -> object:
    """A quota as ``tenant update`` takes it: ``N`` -> N, ``none``/``unlimited`` -> None (no quota), not
    given (None) -> :data:`KEEP` the current one.

    Raises:
        InvalidInputError: anything else.
    """
    if text is None:
        return KEEP
    value = str(text).strip().lower()
    if value in ("none", "unlimited"):
        return None
    # isdecimal, not isdigit: "²" is a digit that int() refuses.
    if not value.isdecimal() or len(value) > 9:
        raise InvalidInputError(f"bad {flag} {text!r}: use a whole number, or none for no quota")
    return int(value)


def _check_quotas(max_vcpus: int | None, max_gpus: int | None) -> None:
    for value, flag in ((max_vcpus, "--max-vcpus"), (max_gpus, "--max-gpus")):
        if value is not None and value < 0:
            raise InvalidInputError(f"{flag} must be 0 or more, got {value}")


def create_tenant(settings: Settings, tenant: Tenant) -> Tenant:
    """Record a new tenant.

    Raises:
        InvalidInputError: a bad name or a negative quota.
        ConflictError: the name exists.
    """
    check_name(tenant.name, "tenant")
    _check_quotas(tenant.max_vcpus, tenant.max_gpus)
    with open_inventory(settings.db_url) as inventory:
        inventory.add_tenant(tenant)
    return tenant


def update_tenant(
    settings: Settings, name: str, *, isolation: Isolation | None = None, max_vcpus: Any = KEEP, max_gpus: Any = KEEP,
    slices: dict[str, int | None] | None = None,
) -> tuple[Tenant, Tenant]:
    """Change a tenant's isolation, quotas (None: unlimited; :data:`KEEP`: unchanged) and/or its VMs' default
    cache slice and bandwidth cap (``slices``: the fields to change, as
    :func:`vnuma.services.requests.slice_changes` gives them); (before, after).

    An isolation change is refused when the tenant's VMs would break it (the
    admission rule decides, on each host they are on); a quota below the
    tenant's usage is accepted and refuses growth only.

    Raises:
        InvalidInputError: nothing to change, or a negative quota.
        NotFoundError: unknown tenant.
        ConflictError: a VM of the tenant shares a core or cell the new isolation forbids.
    """
    if isolation is None and max_vcpus is KEEP and max_gpus is KEEP and not slices:
        raise InvalidInputError(
            f"tenant {name!r}: nothing to change",
            hint="give --isolation, --max-vcpus, --max-gpus, --llc/--llc-ways and/or --mem-bw",
        )
    with open_inventory(settings.db_url) as inventory:
        current = inventory.get_tenant(name)
        new = replace(
            current,
            isolation=isolation or current.isolation,
            max_vcpus=current.max_vcpus if max_vcpus is KEEP else max_vcpus,
            max_gpus=current.max_gpus if max_gpus is KEEP else max_gpus,
            **(slices or {}),
        )
        _check_quotas(new.max_vcpus, new.max_gpus)
        old = inventory.update_tenant(new)
    return old, new


def tenant_rows(settings: Settings, only: str | None = None, *, seen_by: str | None = None) -> list[dict[str, Any]]:
    """One dict per tenant in natural order (``only``: just that one; NotFoundError if unknown). ``seen_by``
    (a tenant's API token): that tenant alone; any other is unknown, as one that does not exist."""
    if seen_by is not None:
        if only not in (None, seen_by):
            raise not_in_inventory("tenant", only)
        only = seen_by
    with open_inventory(settings.db_url) as inventory:
        tenants = [inventory.get_tenant(only)] if only else inventory.list_tenants()
        rows = []
        for t in tenants:
            vcpus, gpus = inventory.tenant_usage(t.name)
            rows.append(
                {
                    "name": t.name,
                    "isolation": str(t.isolation),
                    "max_vcpus": t.max_vcpus,
                    "max_gpus": t.max_gpus,
                    "llc_kib": t.llc_kib,
                    "llc_ways": t.llc_ways,
                    "mem_bw": t.mem_bw,
                    "vms": len(inventory.list_vms(tenant=t.name)),
                    "vcpus": vcpus,
                    "gpus": gpus,
                }
            )
    return sorted(rows, key=lambda r: natural_key(r["name"]))
