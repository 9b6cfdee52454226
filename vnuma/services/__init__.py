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


def make_settings(db_option: str | None, env: Mapping[str, str]) -> Settings:
    """Resolve settings from the ``--db`` option and the environment (read once by the CLI)."""
    from vnuma.inventory.db import resolve_url

    templates = env.get("VNUMA_TEMPLATES")
    return Settings(db_url=resolve_url(db_option, env), templates_dir=Path(templates) if templates else None)
