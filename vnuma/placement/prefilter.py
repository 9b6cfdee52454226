"""Vectorized pre-filter: which hosts might fit a request, from the ledger's arrays.

Pure: no I/O. A relaxation of :func:`vnuma.placement.fit.fit_host`: it uses
tenant-independent upper bounds of per-cell capacity, ignores cell
isolation, avoided cells and the emulator pCPU, lets each cell pick its own
page size and sums GPUs over all cells that could hold a guest cell. The
``gpu-first`` reserve and the stranding need come from the very rules the
exact filters apply (:mod:`.rules`), computed over every cell at once. A
host it rules out can never fit (a property test checks it on random
fleets); a host it keeps is then checked exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vnuma.placement.ledger.arrays import SIZE_INDEX, FleetArrays, IntArray, count_true
from vnuma.placement.model import GpuAffinity, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.rules import (
    CAP_ISOLATE,
    cap_row,
    reserved_pages,
    reserved_threads,
    strand_guarded,
    usable_gpus,
)

BoolArray = npt.NDArray[np.bool_]


def _cell_checks(
    arrays: FleetArrays, req: VmRequest, n: int, sizes: Sequence[int], strategy: Strategy
) -> tuple[BoolArray, BoolArray]:
    """Per cell: enough pCPUs; enough pCPUs and pages of one of ``sizes``."""
    vs, ms = req.cell_sizes(n)
    v, m = min(vs), min(ms)  # every guest cell's host cell holds at least the smallest (a necessary condition)
    row = cap_row(req.cpu_policy, req.thread_policy)
    cap = arrays.cap[row]
    reserve = strategy is Strategy.GPU_FIRST and req.takes_no_gpu
    if reserve:
        cap = cap - reserved_threads(arrays.thread_share, arrays.gpus, arrays.cell_width, row)
    cpu_ok = cap >= v
    page_ok: BoolArray | None = np.broadcast_to(arrays.exotic, cpu_ok.shape) if arrays.any_exotic else None
    for size in sizes:
        i = SIZE_INDEX.get(size)
        if i is not None:
            free = arrays.pages[i]
            if reserve:
                free = free - reserved_pages(arrays.page_share[i], arrays.gpus)
            hit = free >= m // size
            page_ok = hit if page_ok is None else page_ok | hit
    return cpu_ok, (cpu_ok & page_ok if page_ok is not None else np.zeros_like(cpu_ok))


def _gpu_ok(
    arrays: FleetArrays, req: VmRequest, n: int, ok: BoolArray, strategy: Strategy
) -> BoolArray | None:
    if req.gpus == 0:
        return None
    if req.gpu_affinity is not GpuAffinity.REQUIRED:
        return arrays.gpus_free >= req.gpus
    need = _strand_need(arrays, req, n) if strategy is Strategy.GPU_FIRST else None
    if need is not None:
        ok = ok & (need <= req.gpus)
    if n == 1:
        return count_true(ok & (arrays.gpus >= req.gpus)) > 0
    # n cells hold at most the n largest free-GPU counts among the cells that could take a guest cell
    # (all of them when n covers every column: no sort needed).
    held = arrays.gpus * ok
    top = held.sum(axis=0) if n >= arrays.columns else np.sort(held, axis=0)[-n:].sum(axis=0)
    summed: BoolArray = top >= req.gpus
    if need is not None:
        # Any n cells must together take the sum of their needs: the n smallest needs must fit in the GPUs.
        needs = np.where(ok, need, req.gpus + 1)
        least = needs.sum(axis=0) if n >= arrays.columns else np.sort(needs, axis=0)[:n].sum(axis=0)
        summed &= least <= req.gpus
    return summed


def _strand_need(arrays: FleetArrays, req: VmRequest, n: int) -> IntArray:
    """Per cell, the fewest GPUs a GPU VM must take there not to strand the rest (gpu-first)."""
    row = cap_row(req.cpu_policy, req.thread_policy)
    cost = min(req.cell_sizes(n)[0]) * (arrays.width if row == CAP_ISOLATE else 1)
    usable = usable_gpus(arrays.threads_free - cost, arrays.thread_share)
    need: IntArray = np.where(strand_guarded(arrays.cell_gpus), np.maximum(arrays.gpus - usable, 0), 0)
    return need


@dataclass(slots=True)
class Assessment:
    """The pre-filter's checks of one request for ``n`` guest cells on every host."""

    n: int
    cpu_ok: BoolArray
    ok: BoolArray
    gpus: BoolArray | None

    def may_fit(self) -> BoolArray:
        """Hosts that pass every pre-filter check."""
        fits: BoolArray = count_true(self.ok) >= self.n
        return fits if self.gpus is None else fits & self.gpus

    def stages(self) -> IntArray:
        """Per host, how far the request gets: 0 short of pCPUs, 1 short of pages, 2 short of GPUs, 3 may fit."""
        stage: IntArray = (count_true(self.cpu_ok) >= self.n).astype(np.int64)
        stage += count_true(self.ok) >= self.n
        stage += (stage == 2) & (True if self.gpus is None else self.gpus)
        return stage


def assess(arrays: FleetArrays, req: VmRequest, n: int, sizes: Sequence[int], strategy: Strategy) -> Assessment:
    """Run the pre-filter's checks for ``n`` guest cells (page sizes ``sizes``) over the whole fleet."""
    cpu_ok, ok = _cell_checks(arrays, req, n, sizes, strategy)
    return Assessment(n, cpu_ok, ok, _gpu_ok(arrays, req, n, ok, strategy))


def may_fit(
    arrays: FleetArrays, req: VmRequest, n: int, sizes: Sequence[int], strategy: Strategy
) -> BoolArray:
    """Hosts that pass every pre-filter check for ``n`` guest cells."""
    return assess(arrays, req, n, sizes, strategy).may_fit()


def stages(arrays: FleetArrays, req: VmRequest, n: int, sizes: Sequence[int], strategy: Strategy) -> IntArray:
    """Per host, how far the request gets (see :meth:`Assessment.stages`)."""
    return assess(arrays, req, n, sizes, strategy).stages()
