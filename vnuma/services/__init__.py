"""Use cases: the only layer that combines inventory, hypervisor, sources and render.

Each service opens what it needs from :class:`Settings`, runs one
inventory transaction per change, and returns dataclasses for the CLI to
print. Settings are read once by the CLI and passed in; nothing here reads
the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved configuration: the inventory URL and an operator templates directory."""

    db_url: str
    templates_dir: Path | None = None


def make_settings(db_option: str | None, env: Mapping[str, str], *, create: bool = True) -> Settings:
    """Resolve settings from the ``--db`` option and the environment (read once by the CLI).

    An inventory file named explicitly (``--db`` or ``VNUMA_DB``) must exist
    unless ``create``: a mistyped path is refused, not silently created (with
    its directories) as an empty inventory. The default location is created
    on first use.

    Raises:
        InventoryError: an explicit SQLite path that does not exist, and not ``create``.
    """
    from vnuma.errors import InventoryError
    from vnuma.inventory.db import missing_sqlite_file, resolve_url

    url = resolve_url(db_option, env)
    explicit = db_option or env.get("VNUMA_DB")
    missing = missing_sqlite_file(url) if explicit and not create else None
    if missing is not None:
        raise InventoryError(
            f"inventory {missing} does not exist",
            hint=f"create it: vnuma --db {missing} db upgrade (or add --create before the command)",
        )
    templates = env.get("VNUMA_TEMPLATES")
    return Settings(db_url=url, templates_dir=Path(templates) if templates else None)
