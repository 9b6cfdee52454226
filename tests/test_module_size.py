"""Every module of vnuma and bench keeps to the project's limit of 400 lines (split along a seam beyond)."""

from __future__ import annotations

from pathlib import Path

import pytest

MAX_LINES = 400
_ROOT = Path(__file__).resolve().parent.parent
_MODULES = sorted(p for d in ("vnuma", "bench") for p in (_ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", _MODULES, ids=lambda p: str(p.relative_to(_ROOT)))
def test_module_within_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(_ROOT)} has {lines} lines; split it along a seam"
