"""Host scorers: named, weighted, each 0..100 (higher is better), vectorized over hosts.

Pure: no I/O. A scorer sees per-host totals (:class:`Totals`, for all hosts
or a gathered subset) and the request's demand, and scores those hosts at
once in integer numpy arithmetic, so the fast and the explaining paths of
the engine get identical numbers. A host score does not depend on which
cells a fit picks; cells are chosen inside the host by distance and the
strategy's cell preference (:mod:`.fit`).

Strategies map to explicit scorer tuples (:data:`POLICIES`):

* ``pack``: ``cpu-fill`` x2 + ``memory-fill`` x1 -- best fit: the host
  that is fullest after the VM lands wins, so partly used hosts fill first
  and empty hosts stay empty for large VMs.
* ``gpu-first``: ``gpu-keep`` x3 + ``cpu-fill`` + ``memory-fill`` -- VMs
  without GPUs go to hosts whose GPUs are already taken (or that have
  none); GPU VMs go to the host whose GPUs they fill best.
* ``first-fit``: ``in-order`` -- every host scores the same, so the tie-break
  (:mod:`.order`: host name) decides: the first host that fits wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from vnuma.placement.ledger.arrays import IntArray, Totals
from vnuma.placement.model import CpuPolicy, EmulatorThreads, ThreadPolicy, VmRequest
from vnuma.placement.objectives import Strategy


@dataclass(frozen=True, slots=True)
class Demand:
    """What a request takes from each host: threads (isolate counts whole cores), KiB, GPUs."""

    threads: IntArray
    memory_kib: int
    gpus: int


def demand_of(req: VmRequest, totals: Totals) -> Demand:
    """A sized request's demand on each host of ``totals``."""
    assert req.vcpus is not None and req.memory_kib is not None
    isolate = req.cpu_policy is not CpuPolicy.SHARED and req.thread_policy is ThreadPolicy.ISOLATE
    per_vcpu = totals.width if isolate else np.ones_like(totals.width)
    extra = 1 if req.emulator_threads is EmulatorThreads.ISOLATE else 0
    return Demand(per_vcpu * (req.vcpus + extra), req.memory_kib, req.gpus)


def _fill(used: IntArray, add: IntArray | int, total: IntArray, safe: IntArray) -> IntArray:
    # Percentage in use once ``add`` lands; hosts with nothing of the kind score 0.
    out: IntArray = 100 * np.minimum(used + add, total) // safe
    return out


class Scorer(Protocol):
    """A named host scorer."""

    name: str

    def score(self, totals: Totals, demand: Demand) -> IntArray:
        """0..100 per host; higher is better."""
        ...


class CpuFill:
    """``cpu-fill``: percentage of the host's placeable threads in use once the VM lands."""

    name = "cpu-fill"

    def score(self, totals: Totals, demand: Demand) -> IntArray:
        """Fuller hosts score higher (best fit)."""
        return _fill(totals.threads_used, demand.threads, totals.threads_total, totals.threads_safe)


class MemoryFill:
    """``memory-fill``: percentage of the host's page pools in use once the VM lands."""

    name = "memory-fill"

    def score(self, totals: Totals, demand: Demand) -> IntArray:
        """Fuller hosts score higher (best fit)."""
        return _fill(totals.mem_used, demand.memory_kib, totals.mem_total, totals.mem_safe)


class GpuKeep:
    """``gpu-keep``: keep free GPUs reachable.

    A VM without GPUs scores the share of the host's GPUs already taken
    (100 on hosts without GPUs); a GPU VM scores how full the host's GPUs
    are once it lands (best fit on GPUs).
    """

    name = "gpu-keep"

    def score(self, totals: Totals, demand: Demand) -> IntArray:
        """Higher where free GPUs are least at risk."""
        taken = totals.gpus_total - totals.gpus_free
        if demand.gpus == 0:
            without: IntArray = np.where(
                totals.gpus_total == 0, 100, _fill(taken, 0, totals.gpus_total, totals.gpus_safe)
            )
            return without
        return _fill(taken, demand.gpus, totals.gpus_total, totals.gpus_safe)


class InOrder:
    """``in-order``: no preference; hosts are tried in name order (first fit)."""

    name = "in-order"

    def score(self, totals: Totals, demand: Demand) -> IntArray:
        """0 for every host."""
        flat: IntArray = np.zeros_like(totals.threads_total)
        return flat


POLICIES: dict[Strategy, tuple[tuple[Scorer, int], ...]] = {
    Strategy.PACK: ((CpuFill(), 2), (MemoryFill(), 1)),
    Strategy.GPU_FIRST: ((GpuKeep(), 3), (CpuFill(), 1), (MemoryFill(), 1)),
    Strategy.FIRST_FIT: ((InOrder(), 1),),
}


def total_scores(strategy: Strategy, totals: Totals, req: VmRequest) -> IntArray:
    """Weighted sum of the strategy's scorers for each host of ``totals``."""
    demand = demand_of(req, totals)
    scorers = POLICIES[strategy]
    first, weight = scorers[0]
    total: IntArray = weight * first.score(totals, demand)
    for scorer, weight in scorers[1:]:
        total += weight * scorer.score(totals, demand)
    return total
