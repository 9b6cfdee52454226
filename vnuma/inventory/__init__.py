"""The inventory: hosts, tenants, VMs and their claims in SQLite or PostgreSQL.

The only package that imports SQLAlchemy or Alembic. Open it with
``open_inventory(resolve_url(option, os.environ))``.

The names below are loaded on first use (PEP 562), so importing a light
module of the package (``schema``, ``placer``, ``db``'s URL helpers)
does not import SQLAlchemy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnuma.inventory.db import (
        current_revision,
        head_revision,
        make_engine,
        masked_url,
        open_inventory,
        resolve_url,
        upgrade,
    )
    from vnuma.inventory.repo import Inventory
    from vnuma.inventory.schema import VmState

_HOMES = {
    "Inventory": "vnuma.inventory.repo",
    "VmState": "vnuma.inventory.schema",
    **dict.fromkeys(
        ("current_revision", "head_revision", "make_engine", "masked_url", "open_inventory", "resolve_url", "upgrade"),
        "vnuma.inventory.db",
    ),
}

__all__ = [
    "Inventory",
    "VmState",
    "current_revision",
    "head_revision",
    "make_engine",
    "masked_url",
    "open_inventory",
    "resolve_url",
    "upgrade",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vnuma.inventory' has no attribute {name!r}")
    return getattr(import_module(home), name)
