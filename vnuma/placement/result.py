"""The engine's answer: the placement it chose (if any), and why each host it did not choose was refused.

Pure: no I/O; data only.
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.placement.model import Placement


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one host (or one of its cells) cannot take the VM; ``check`` names the filter or admission
    check that refused it, ``hint`` (when given) what to do about it. ``gist``: the reason in words that hold
    for every host refused for the same cause, where the check has several (None: the check's own words);
    ``missing``: how many units (vCPUs, KiB of pages, GPUs, partitions, cells) the host lacks, where the check
    counts them (:mod:`vnuma.placement.refusal`)."""

    host: str
    check: str
    reason: str
    hint: str | None = None
    gist: str | None = None
    missing: int | None = None


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """The engine's answer: ``chosen`` (None when nothing fits), every rejection,
    the total score of each host that could take the VM, and what set the chosen cells apart from the next
    best set on their host (a :data:`vnuma.placement.order.SET_CRITERIA` name, or ``only-choice``)."""

    chosen: Placement | None
    rejections: tuple[Rejection, ...] = ()
    scores: tuple[tuple[str, int], ...] = ()
    cells_decided_by: str | None = None
    unfit: tuple[Unfit, ...] = ()
    """A request with alternatives: each alternative tried before the chosen one (every one, when none fits),
    with why it fits nowhere; ``rejections`` and ``scores`` are then the chosen alternative's (the request's
    own, when none fits) (:mod:`vnuma.placement.alternatives`)."""


@dataclass(frozen=True, slots=True)
class Unfit:
    """An alternative that fits on no host: its number (0: the request as asked), how it was written, and
    every host's rejection of it, or the one refusal that kept it off every host (a tenant's quota)."""

    index: int
    text: str
    rejections: tuple[Rejection, ...] = ()
    refused: str | None = None
