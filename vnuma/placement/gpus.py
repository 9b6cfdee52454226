"""Which of a cell set's free GPUs a VM takes, and whether that strands others.

Pure: no I/O. A GPU is *stranded* when its cell keeps it free but has too
few free pCPUs left for a VM to use it (:func:`vnuma.placement.rules.usable_gpus`).

``split_gpus`` takes each GPU from the guest cell whose free GPUs are most
at risk once the VM's pCPUs are taken there (ties: lower guest cell), so
GPUs are used where they would otherwise be stranded. Under ``gpu-first`` a
GPU VM may not leave a cell with fewer free pCPUs than its remaining free
GPUs keep (:func:`strands_gpus`); only the cells
:func:`~vnuma.placement.rules.strand_guarded` names are held to that.
"""

from __future__ import annotations

from collections.abc import Sequence

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import CpuPolicy, EmulatorThreads, ThreadPolicy, VmRequest
from vnuma.placement.rules import gpu_share, strand_guarded, usable_gpus


def threads_taken(req: VmRequest, hs: HostState, per_cell: Sequence[int]) -> list[int]:
    """Threads the VM takes on each of its guest cells, given their vCPUs in guest order (isolate: whole
    cores; emulator on cell 0)."""
    isolate = req.cpu_policy is not CpuPolicy.SHARED and req.thread_policy is ThreadPolicy.ISOLATE
    taken = [v * hs.width if isolate else v for v in per_cell]
    if req.emulator_threads is EmulatorThreads.ISOLATE and taken:
        taken[0] += hs.width if isolate else 1
    return taken


def _left(hs: HostState, cells: tuple[int, ...], taken: list[int]) -> list[int]:
    states = [hs.cell_by_id[c] for c in cells]
    return [s.threads_free - t for s, t in zip(states, taken, strict=True)]


def _usable(hs: HostState, cell: int, left: int) -> int:
    """Free GPUs a cell can still serve with ``left`` free pCPUs (each keeps its share)."""
    state = hs.cell_by_id[cell]
    return int(usable_gpus(left, gpu_share(state.threads_total, len(state.gpus))))


def split_gpus(
    hs: HostState, cells: tuple[int, ...], want: int, taken: list[int], free: Sequence[int] | None = None
) -> list[int]:
    """How many free GPUs to take from each guest cell (at most ``free``: what the cells have, or of those
    the ones the VM can use)."""
    if free is None:
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


def strands_gpus(hs: HostState, cells: tuple[int, ...], take: Sequence[int], taken: list[int]) -> bool:
    """True when taking ``take`` GPUs and ``taken`` threads per cell leaves some cell's free GPUs short of
    pCPUs (``take``: the builder's split, :func:`vnuma.placement.devices.gpu_split`)."""
    left = _left(hs, cells, taken)
    for i, c in enumerate(cells):
        if not strand_guarded(len(hs.cell_by_id[c].gpus)):
            continue
        remaining = len(hs.cell_by_id[c].gpus_free) - take[i]
        if remaining > _usable(hs, c, left[i]):
            return True
    return False
