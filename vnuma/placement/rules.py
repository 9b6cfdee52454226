"""Per-cell capacity rules written once over numbers: the exact filters pass ints, the pre-filter arrays.

Pure: no I/O. Each rule is plain arithmetic that works alike on Python
ints and numpy arrays (comparisons times values instead of ``max``/``where``),
so :mod:`.filters` (one cell, ints, no numpy overhead) and :mod:`.prefilter`
(every cell of every host at once, arrays) compute the very same numbers: the
pre-filter is a vectorized cache of these rules, never a restatement.

* ``gpu-first`` reserve: a cell keeps, for each of its free GPUs, the GPU's
  share of the cell (its placeable threads, and each page pool, divided by
  the cell's GPU count) away from VMs without GPUs;
* stranding: a free GPU stays usable while :data:`KEEP_PER_GPU` of its
  thread share is free beside it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from vnuma.placement.model import CpuPolicy, ThreadPolicy

CAP_PREFER, CAP_ISOLATE, CAP_REQUIRE, CAP_SHARED = range(4)
"""Capacity rows: what one vCPU of a policy takes (a thread, a whole core, a thread of a sibling pair,
a thread of the shared pool); the ledger keeps one upper bound per row and cell."""


def cap_row(cpu_policy: CpuPolicy, thread_policy: ThreadPolicy) -> int:
    """Which row of ``FleetArrays.cap`` bounds a policy's capacity (``mixed``: its thread policy's
    dedicated row, as :meth:`~vnuma.placement.ledger.cell.CellState.capacity` counts it)."""
    if cpu_policy is CpuPolicy.SHARED:
        return CAP_SHARED
    return _ROWS[thread_policy]


_ROWS = {ThreadPolicy.PREFER: CAP_PREFER, ThreadPolicy.ISOLATE: CAP_ISOLATE, ThreadPolicy.REQUIRE: CAP_REQUIRE}


KEEP_PER_GPU = Fraction(1, 2)
"""Fraction of a cell's per-GPU thread share a free GPU keeps beside it under ``gpu-first``."""

Num = Any  # an int or a numpy integer array: the rules broadcast


def _at_least_1(x: Num) -> Num:
    return x + (x == 0)


def gpu_share(total: Num, gpus_total: Num) -> Num:
    """A cell's per-GPU share of something it has ``total`` of (threads, a page pool); 0 without GPUs."""
    return total // _at_least_1(gpus_total) * (gpus_total > 0)


def reserved_threads(thread_share: Num, gpus_free: Num, width: Num, row: int) -> Num:
    """Capacity (in the policy row's units) a cell keeps for its free GPUs under ``gpu-first``.

    ``thread_share`` is the cell's :func:`gpu_share` of its threads; ``row`` the
    capacity row of the request's policy (:func:`cap_row`): ``isolate`` counts
    whole cores, ``require`` sibling pairs (an even count).
    """
    threads = thread_share * gpus_free
    if row == CAP_ISOLATE:
        return -(-threads // width)
    if row == CAP_REQUIRE:
        return threads + threads % 2
    return threads


def reserved_pages(page_share: Num, gpus_free: Num) -> Num:
    """Pages of one pool a cell keeps for its free GPUs under ``gpu-first`` (``page_share``: its gpu_share)."""
    return page_share * gpus_free


def usable_gpus(threads_left: Num, thread_share: Num) -> Num:
    """How many free GPUs a cell can still serve with ``threads_left`` free threads (each keeps its share)."""
    left = threads_left * (threads_left > 0)
    usable = left * KEEP_PER_GPU.denominator // _at_least_1(thread_share * KEEP_PER_GPU.numerator)
    return usable * (thread_share > 0)


def strand_guarded(gpus_total: Num) -> Num:
    """Cells held to the no-stranding rule: every cell with a GPU.

    On hosts with one GPU per cell (AMD NPS4, Intel SNC) a multi-cell VM
    asking fewer GPUs than cells fills some GPU cell without taking its GPU;
    ``gpu-first`` refuses it where that would strand the GPU (too few pCPUs
    left beside it), as it does on cells with more GPUs. Measured on the
    example traces (``bench/bench_quality.py``, 5 seeds): the GPUs allocated
    stay 100 % of the reachable on epyc-nps4-8cell while 10 % fewer VMs are
    placed there (median 85 against 94), and rise from 78-91 % to 94 % on
    snc-cxl-gpu with more VMs placed (median 131 against 110); ``gpu-first``
    is the strategy that puts GPUs first.
    """
    return gpus_total >= 1
