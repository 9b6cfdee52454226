"""Each L3 domain's peak: the highest total the history *keeps* for it, one rule for a watch that runs on
and one that restarts.

Pure: no I/O. The history keeps a domain's raw totals for the raw window and one-minute means of them for
the days kept (:func:`vnuma.inventory.history.prune`); a domain's peak is the highest of those rows, so a
spike older than the raw window counts only through its minute's mean, and nothing older than the days kept
counts at all. :class:`Peaks` follows the retention as it prunes — each raw total as it is written, each
minute's mean as the retention writes it, both dropped at the retention's cuts — with a monotonic queue per
domain and kind (a value is kept only while no later one is as high), so a peak is read in O(1) and a
restarted watch, loading the same queues from the stored rows (:func:`vnuma.inventory.history.peak_rows`),
has the very same peaks as one that never stopped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

Key = tuple[str, int]  # (host, L3 domain)


class Peaks:
    """The peaks of every (host, domain) over the rows the history keeps (see the module docstring)."""

    def __init__(self) -> None:
        self._kept: dict[bool, dict[Key, deque[tuple[int, int]]]] = {False: {}, True: {}}

    def add(self, key: Key, at_ms: int, total_bps: int, *, minute: bool = False) -> None:
        """A row written: a raw total, or (``minute``) a one-minute mean; rows come in time order per kind."""
        q = self._kept[minute].setdefault(key, deque())
        while q and q[-1][1] <= total_bps:
            q.pop()
        q.append((at_ms, total_bps))

    def load(self, rows: Iterable[tuple[str, int, int, int, bool]]) -> None:
        """Stored rows (host, domain, at ms, total, minute), in time order."""
        for host, domain, at_ms, total, minute in rows:
            self.add((host, domain), at_ms, total, minute=minute)

    def expire(self, raw_cut_ms: int, means_cut_ms: int) -> None:
        """Drop what the retention dropped: raw rows before ``raw_cut_ms``, means before ``means_cut_ms``."""
        for minute, cut in ((False, raw_cut_ms), (True, means_cut_ms)):
            kept = self._kept[minute]
            for key in [k for k, q in kept.items() if q[0][0] < cut]:
                q = kept[key]
                while q and q[0][0] < cut:
                    q.popleft()
                if not q:
                    del kept[key]

    def peak(self, key: Key) -> int:
        """The highest total kept for ``key`` (0: none)."""
        return max((q[0][1] for q in (self._kept[False].get(key), self._kept[True].get(key)) if q), default=0)

    def snapshot(self) -> dict[Key, int]:
        """Every domain's peak."""
        return {k: self.peak(k) for k in self._kept[False].keys() | self._kept[True].keys()}
