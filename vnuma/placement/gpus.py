"""Which of a cell set's free GPUs a VM takes, and whether that strands others.

Pure: no I/O. A GPU is *stranded* when its cell keeps it free but has too
few free pCPUs left for a VM to use it. Each cell's GPU share is its
placeable pCPUs divided by its GPUs; :data:`KEEP_PER_GPU` of that share is
what a free GPU needs left beside it to stay usable.

``split_gpus`` takes each GPU from the guest cell whose free GPUs are most
at risk once the VM's pCPUs are taken there (ties: lower guest cell), so
GPUs are used where they would otherwise be stranded. Under ``gpu-first`` a
GPU VM may not leave a cell with fewer free pCPUs than its remaining free
GPUs keep (:func:`strands_gpus`). Only cells with two or more GPUs are held
to that: on hosts with one GPU per cell (AMD NPS4-style), a multi-cell VM
asking fewer GPUs than cells always fills some GPU cell without taking its
GPU, and refusing it would give up a GPU used now to guard one that no
later VM may come for.
"""

from __future__ import annotations

from fractions import Fraction

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import CpuPolicy, EmulatorThreads, ThreadPolicy, VmRequest

KEEP_PER_GPU = Fraction(1, 2)
"""Fraction of a cell's per-GPU pCPU share a free GPU keeps beside it under ``gpu-first``."""


def threads_taken(req: VmRequest, hs: HostState, per_cell: int, cells: int) -> list[int]:
    """Threads the VM takes on each of its guest cells (isolate: whole cores; emulator on cell 0)."""
    isolate = req.cpu_policy is CpuPolicy.DEDICATED and req.thread_policy is ThreadPolicy.ISOLATE
    each = per_cell * hs.width if isolate else per_cell
    taken = [each] * cells
    if req.emulator_threads is EmulatorThreads.ISOLATE and cells:
        taken[0] += hs.width if isolate else 1
    return taken


def _share(hs: HostState, cell: int) -> int:
    state = hs.cell_by_id[cell]
    return state.threads_total // len(state.gpus) if state.gpus else 0


def _left(hs: HostState, cells: tuple[int, ...], taken: list[int]) -> list[int]:
    states = [hs.cell_by_id[c] for c in cells]
    return [
        s.free_core_threads + sum(s.partial_free.values()) - t for s, t in zip(states, taken, strict=True)
    ]


def _usable(hs: HostState, cell: int, left: int) -> int:
    """Free GPUs a cell can still serve with ``left`` free pCPUs (each keeps its share)."""
    share = _share(hs, cell)
    if not share:
        return 0
    if not KEEP_PER_GPU:
        return len(hs.cell_by_id[cell].gpus)
    return max(0, left) * KEEP_PER_GPU.denominator // (share * KEEP_PER_GPU.numerator)


def split_gpus(hs: HostState, cells: tuple[int, ...], want: int, taken: list[int]) -> list[int]:
    """How many free GPUs to take from each guest cell (at most what the cells have)."""
    free = [len(hs.cell_by_id[c].gpus_free) for c in cells]
    left = _left(hs, cells, taken)
    usable = [_usable(hs, c, lt) for lt, c in zip(left, cells, strict=True)]
    take = [0] * len(cells)
    for _ in range(min(want, sum(free))):
        i = max(
            (i for i in range(len(cells)) if take[i] < free[i]),
            key=lambda i: (free[i] - take[i] - usable[i], -i),
        )
        take[i] += 1
    return take


def strands_gpus(hs: HostState, cells: tuple[int, ...], want: int, taken: list[int]) -> bool:
    """True when taking ``want`` GPUs and ``taken`` threads leaves some cell's free GPUs short of pCPUs."""
    take = split_gpus(hs, cells, want, taken)
    left = _left(hs, cells, taken)
    for i, c in enumerate(cells):
        if len(hs.cell_by_id[c].gpus) < 2:
            continue  # a cell's only GPU is never held back (see the module docstring)
        remaining = len(hs.cell_by_id[c].gpus_free) - take[i]
        if remaining > _usable(hs, c, left[i]):
            return True
    return False
