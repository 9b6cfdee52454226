"""Tenants in the inventory: add, look up, remove while VMs exist, usage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.builders import make_host
from tests.dbdump import dump
from tests.inventory.conftest import placement
from vnuma.errors import ConflictError, InvalidInputError, NotFoundError
from vnuma.inventory import Inventory
from vnuma.placement.model import Isolation, Tenant

TENANTS = [Tenant("zeta", Isolation.NONE), Tenant("acme", Isolation.CELL, 64, 8), Tenant("mid", max_gpus=0)]


def test_tenants_round_trip_sorted(inv: Inventory) -> None:
    for t in TENANTS:
        inv.add_tenant(t)
    assert inv.list_tenants() == sorted(TENANTS, key=lambda t: t.name)
    assert inv.get_tenant("acme") == TENANTS[1]
    assert {n: x.isolation for n, x in inv.tenants().items()} == {
        "zeta": Isolation.NONE, "acme": Isolation.CELL, "mid": Isolation.CORE
    }


def test_a_duplicate_tenant_is_a_conflict(inv: Inventory) -> None:
    inv.add_tenant(Tenant("acme"))
    with pytest.raises(ConflictError, match="tenant 'acme' already exists"):
        inv.add_tenant(Tenant("acme", Isolation.NONE))
    assert inv.get_tenant("acme") == Tenant("acme")


def test_a_negative_quota_is_invalid(inv: Inventory) -> None:
    with pytest.raises(InvalidInputError, match="max_gpus is -1"):
        inv.add_tenant(Tenant("acme", max_gpus=-1))
    assert inv.list_tenants() == []


def test_unknown_tenants(inv: Inventory) -> None:
    with pytest.raises(NotFoundError) as err:
        inv.get_tenant("ghost")
    assert err.value.hint == "see `vnuma tenant list`"
    with pytest.raises(NotFoundError):
        inv.remove_tenant("ghost")
    assert inv.tenant_usage("ghost") == (0, 0)


def test_a_tenant_with_vms_cannot_be_removed(inv: Inventory, db_path: Path) -> None:
    inv.add_host(make_host("host-a"))
    inv.add_tenant(Tenant("acme"))
    inv.claim(placement("vm1", (0, 1)), Isolation.CORE)
    inv.claim(placement("vm2", (2,)), Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(ConflictError, match=re.escape("tenant 'acme' still has 2 VM(s): vm1, vm2")):
        inv.remove_tenant("acme")
    assert dump(db_path) == before
    assert inv.tenant_usage("acme") == (3, 0)
    inv.release("vm1")
    inv.release("vm2")
    inv.remove_tenant("acme")
    assert inv.list_tenants() == []
