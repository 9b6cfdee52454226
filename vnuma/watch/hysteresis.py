"""Persistence and hysteresis: when a rule's samples become an event, and when the event is cleared.

Pure: no I/O. A subject's :class:`Track` is its last ``n`` verdicts, whether an
event is open, and how many quiet (false) samples came last. An event opens
when the rule is true in at least ``k`` of the last ``n`` samples (one spike
opens nothing) and is cleared after ``m`` quiet samples in a row. The track is
a function of the stored verdicts and of whether an event is open
(:func:`rebuilt`), so a restarted watch continues where it stopped; a subject
without a sample in a round (its VM restarted, its host stale) keeps its
track unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vnuma.watch.rules import Thresholds


@dataclass(frozen=True, slots=True)
class Track:
    """A subject's recent verdicts (oldest first, at most ``n``), whether its event is open, and its trailing
    quiet samples."""

    window: tuple[bool, ...] = ()
    open: bool = False
    quiet: int = 0


def step(track: Track, true: bool, t: Thresholds) -> tuple[Track, str | None]:
    """The track after one more verdict, and what changed: ``"open"``, ``"close"`` or None."""
    window = (*track.window, true)[-t.n:]
    quiet = 0 if true else track.quiet + 1
    if not track.open and sum(window) >= t.k:
        return Track(window, True, quiet), "open"
    if track.open and quiet >= t.m:
        return Track(window, False, quiet), "close"
    return Track(window, track.open, quiet), None


def rebuilt(verdicts: Sequence[bool], is_open: bool, t: Thresholds) -> Track:
    """The track of a subject whose stored verdicts (oldest first) are ``verdicts`` and whose event is open
    or not: what :func:`step` would hold after them."""
    quiet = 0
    for v in reversed(verdicts):
        if v:
            break
        quiet += 1
    return Track(tuple(verdicts[-t.n:]), is_open, quiet)
