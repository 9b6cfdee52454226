"""Look a host, tenant or VM row up by its unique name, or say it is not in the inventory."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from vnuma.errors import not_in_inventory

R = TypeVar("R")


def named_row(session: Session, model: type[R], name: str, what: str, *, lock: bool = False) -> R:
    """The ``model`` row called ``name``; ``lock`` takes its row lock (PostgreSQL) for a write.

    Raises:
        NotFoundError: no such row; the hint names ``vnuma WHAT list``.
    """
    column: Any = model.name  # type: ignore[attr-defined]
    stmt = select(model).where(column == name)
    row = session.scalars(stmt.with_for_update() if lock else stmt).one_or_none()
    if row is None:
        raise not_in_inventory(what, name)
    return row
