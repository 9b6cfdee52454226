"""The inventory as ``vnuma place`` uses it: one snapshot to decide on, one claim, on either backend.

``vnuma place`` is one process per decision; it reads one snapshot
(:func:`.reading.read_snapshot`) in one transaction and claims
(:func:`.placing.claim`) in one more, through :func:`.access.open_access`
(``sqlite3`` or psycopg directly at head, SQLAlchemy Core otherwise). The
queries, the checks and the rows are the same on every backend (:mod:`.placing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack

from vnuma.inventory.access import DEFAULT_BUSY_TIMEOUT_MS, open_access
from vnuma.inventory.narrowed import Rank, read_narrowed
from vnuma.inventory.placing import Claimed, Refit, claim
from vnuma.inventory.reading import Reader, Snapshot
from vnuma.inventory.warm import Changes, Mark, WarmSnapshot, Watermark, read_changes, read_warm_snapshot
from vnuma.placement.model import Isolation, Placement


class Placer(Reader):
    """The reads (a snapshot to decide on) and a claim, each one transaction."""

    def changes(self, known: Mapping[str, Mark], since: Watermark) -> Changes:
        """See :func:`.warm.read_changes` (one transaction)."""
        with self._access.begin(False) as x:
            return read_changes(x, known, since)

    def warm_snapshot(self) -> WarmSnapshot:
        """See :func:`.warm.read_warm_snapshot` (one transaction)."""
        with self._access.begin(False) as x:
            return read_warm_snapshot(x)

    def narrowed(self, named: frozenset[str], *, group: str | None = None, rank: Rank | None = None) -> Snapshot:
        """See :func:`.narrowed.read_narrowed` (one transaction)."""
        with self._access.begin(False) as x:
            return read_narrowed(x, named, group=group, rank=rank)

    def claim(
        self, placement: Placement, isolation: Isolation | None = None, refit: Refit | None = None, *,
        guard: AbstractContextManager[object] | None = None, on_commit: Callable[[Claimed], None] | None = None,
    ) -> Claimed:
        """Claim the placement in one write transaction (see :func:`.placing.claim`, the host's ledger kept for
        this process's next claim there: :mod:`.hostledgers`); the placement claimed and
        its host's mark after the claim. ``guard`` is entered just before the transaction commits and left once
        ``on_commit`` has seen the claim committed (a caller keeping a ledger settles it there, with nothing of
        its own read in between)."""
        with ExitStack() as held:
            with self._access.begin(True) as x:
                claimed = claim(x, placement, isolation, refit, url=self.url)
                if guard is not None:
                    held.enter_context(guard)
            if on_commit is not None:
                on_commit(claimed)
            return claimed


def open_placer(url: str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Placer:
    """The inventory at ``url`` for placing (see :mod:`.access` for which executor).

    Raises:
        InventoryError: as ``open_inventory`` raises it (unreachable, not a vnuma
            inventory, a schema other than head).
    """
    return Placer(open_access(url, busy_timeout_ms=busy_timeout_ms))
