"""One request on one host with ``n`` guest cells, as the filters narrow it, and what a filter is.

Pure: no I/O. The cell filters (:mod:`vnuma.placement.filters`, :mod:`vnuma.placement.pagefilters`) each narrow
an :class:`Attempt`; the fit (:mod:`vnuma.placement.fit`) then picks its cell set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from vnuma.placement.ledger.cell import CellState
from vnuma.placement.result import Rejection
from vnuma.placement.view import HostView


@dataclass(slots=True)
class Attempt:
    """One request on one host with ``n`` guest cells of ``vs`` vCPUs and ``ms`` KiB each (guest order),
    narrowed by the filters; ``v``/``m`` are the smallest cell's, which every chosen cell must hold
    (:mod:`.fit` then matches each guest cell to a host cell when they differ)."""

    view: HostView
    n: int
    vs: tuple[int, ...]
    ms: tuple[int, ...]
    v: int = field(init=False)
    m: int = field(init=False)
    cells: list[CellState] = field(default_factory=list)
    anchors: list[int] | None = None
    sizes: list[int] = field(default_factory=list)
    size: int = 0

    def __post_init__(self) -> None:
        self.v, self.m = min(self.vs), min(self.ms)

    def reject(
        self, check: str, reason: str, *, hint: str | None = None, gist: str | None = None, missing: int | None = None
    ) -> Rejection:
        """A rejection of this attempt's host (``gist``, ``missing``: see :class:`Rejection`)."""
        return Rejection(self.view.hs.name, check, reason, hint, gist, missing)


class Filter(Protocol):
    """A named filter: narrows the attempt, or says why the host cannot take the request."""

    name: str

    def apply(self, a: Attempt) -> Rejection | None:
        """Narrow ``a``; a rejection when too little is left."""
        ...
