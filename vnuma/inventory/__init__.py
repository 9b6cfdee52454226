"""The inventory: hosts, tenants, VMs and their claims in SQLite or PostgreSQL.

The only package that imports SQLAlchemy or Alembic. Open it with
``open_inventory(resolve_url(option, os.environ))``.
"""

from vnuma.inventory.db import (
    current_revision,
    head_revision,
    make_engine,
    masked_url,
    open_inventory,
    resolve_url,
    upgrade,
)
from vnuma.inventory.models import VmState
from vnuma.inventory.repo import Inventory

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
