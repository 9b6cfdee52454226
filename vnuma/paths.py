"""Where vnuma's shipped files live, installed or in a source checkout.

Templates and migrations sit at the repository root; a wheel carries them
as ``vnuma/_templates`` and ``vnuma/_migrations``. Code finds them only here.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _shipped(installed: str, source: str) -> Path:
    inside = _PACKAGE / installed
    return inside if inside.is_dir() else _PACKAGE.parent / source


def templates_dir() -> Path:
    """Directory holding ``domain.xml.j2`` and its partials."""
    return _shipped("_templates", "templates")


def migrations_dir() -> Path:
    """Alembic script directory (``env.py`` and ``versions/``)."""
    return _shipped("_migrations", "migrations")


def data_dir() -> Path:
    """Package data: the demo host's capabilities and test-driver node file."""
    return _PACKAGE / "data"
