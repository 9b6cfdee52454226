"""GPU partitions in the placement vocabulary: their kinds, what a VM asks for, what it holds.

Pure: no I/O; data only. :mod:`vnuma.placement.model` builds the request and the placement on these;
:mod:`vnuma.placement.partitions` is the rule that places them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PartitionKind(StrEnum):
    """A fraction of a GPU: ``vgpu`` a mediated device of a vGPU type (time-sliced), ``mig`` a MIG instance
    of a profile (its own memory and compute slices)."""

    VGPU = "vgpu"
    MIG = "mig"


@dataclass(frozen=True, slots=True)
class PartitionAsk:
    """``count`` partitions of one vGPU type or MIG profile (``name``) (:mod:`vnuma.placement.partitions`)."""

    kind: PartitionKind
    name: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """One partition a VM holds: on physical GPU ``gpu`` (through its virtual function ``vf`` when the vGPU
    type is carried by SR-IOV VFs), of vGPU type or MIG profile ``name``, a MIG instance at memory slice
    ``start``; ``uuid`` names its mediated device; attached to guest cell ``guest_cell``."""

    kind: PartitionKind
    gpu: str
    name: str
    uuid: str
    guest_cell: int
    host_cell: int | None
    vf: str | None = None
    start: int | None = None
