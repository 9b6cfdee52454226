"""How a long use case reports progress: a protocol the CLI's bar implements, and a silent default.

Called from the calling thread only. ``total`` None means the count is
not known in advance (capacity without ``--count``, resuming a run).
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, total: int | None) -> None:
        """Work on ``total`` items begins."""

    def advance(self, label: str = "", *, failed: bool = False, n: int = 1) -> None:
        """``n`` items are finished; ``label`` names the last, ``failed`` says it failed."""


class Silent:
    """Progress that shows nothing."""

    def start(self, total: int | None) -> None:
        """Nothing to show."""

    def advance(self, label: str = "", *, failed: bool = False, n: int = 1) -> None:
        """Nothing to show."""


SILENT = Silent()
