"""Use cases: the only layer that combines inventory, hypervisor, sources and render.

Each service opens what it needs from :class:`Settings`, runs one
inventory transaction per change, and returns dataclasses for the CLI to
print. Settings are read once by the CLI and passed in; nothing here reads
the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved configuration: the inventory URL and an operator templates directory."""

    db_url: str
    templates_dir: Path | None = None
