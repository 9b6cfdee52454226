"""What the engine and the rebalance planner aim at: the host-choice strategy, and what a plan improves.

Pure: no I/O; data only.
"""

from __future__ import annotations

from enum import StrEnum


class Objective(StrEnum):
    """What a plan improves: locality of split VMs, room for a VM shape, a tenant's VMs spread
    over more memory controllers (host cells), fewer partly used cells (whole cells kept free for
    large VMs), measured memory bandwidth spread so no L3 domain carries more than its share, one
    host emptied (``vnuma host drain``), or one VM moved as the operator asks (``vnuma vm repin``,
    ``vnuma vm migrate``). The rebalance planner searches the first five (:data:`SEARCHED`)."""

    LOCALITY = "locality"
    ROOM = "room"
    SPREAD_TENANTS = "spread-tenants"
    FRAGMENTATION = "fragmentation"
    BANDWIDTH = "bandwidth"
    DRAIN = "drain"
    REPIN = "repin"
    MIGRATE = "migrate"


SEARCHED = (
    Objective.LOCALITY, Objective.ROOM, Objective.SPREAD_TENANTS, Objective.FRAGMENTATION, Objective.BANDWIDTH
)
"""The objectives ``vnuma rebalance --objective`` offers."""


class Strategy(StrEnum):
    """``pack``: fill partly used hosts and cells first; ``gpu-first``: keep
    GPU cells' CPUs and memory for GPU VMs so GPUs are not stranded;
    ``first-fit``: the first host in name order that fits, under the same
    rules (the classic baseline, kept as a reference)."""

    PACK = "pack"
    GPU_FIRST = "gpu-first"
    FIRST_FIT = "first-fit"
