"""Tenant reporting: each tenant with its quota and what it uses."""

from __future__ import annotations

from typing import Any

from vnuma.inventory.db import open_inventory
from vnuma.services import Settings


def tenant_rows(settings: Settings, only: str | None = None) -> list[dict[str, Any]]:
    """One dict per tenant (``only``: just that one; NotFoundError if unknown)."""
    inventory = open_inventory(settings.db_url)
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
                "vms": len(inventory.list_vms(tenant=t.name)),
                "vcpus": vcpus,
                "gpus": gpus,
            }
        )
    return rows
