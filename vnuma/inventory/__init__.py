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

from vnuma.inventory.db import DEFAULT_BUSY_TIMEOUT_MS

if TYPE_CHECKING:
    from vnuma.inventory.db import current_revision, head_revision, make_engine, masked_url, resolve_url, upgrade
    from vnuma.inventory.repo import Inventory
    from vnuma.inventory.schema import VmState

_HOMES = {
    "Inventory": "vnuma.inventory.repo",
    "VmState": "vnuma.inventory.schema",
    **dict.fromkeys(
        ("current_revision", "head_revision", "make_engine", "masked_url", "resolve_url", "upgrade"),
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


def open_inventory(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Inventory:
    """The inventory at ``url``, creating a new SQLite file at head; a schema other than head is refused.

    Raises:
        InventoryError: unreachable or locked database, not a vnuma inventory,
            or a schema revision other than head, which includes a server
            database never upgraded (hint: ``vnuma db upgrade``).
    """
    from vnuma.inventory.db import open_engine
    from vnuma.inventory.repo import Inventory  # imports SQLAlchemy: only when an inventory is opened

    engine, shared = open_engine(url, busy_timeout_ms=busy_timeout_ms)
    return Inventory(engine, url, owns_engine=not shared)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vnuma.inventory' has no attribute {name!r}")
    return getattr(import_module(home), name)
