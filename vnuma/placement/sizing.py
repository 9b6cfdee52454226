"""Size a GPU-only request (``vnuma place TENANT --gpus 2``) from the host it lands on.

Pure: no I/O. A VM asked for with GPUs but without vCPUs and/or memory gets
its GPUs' proportional share of the cells that hold GPUs on that host: a
cell with 32 placeable pCPUs, 256 GiB of pages and 2 GPUs gives 16 vCPUs
and 128 GiB per GPU. The share per GPU is the smallest over the host's GPU
cells (so it fits any of them), rounded down to whole cores (``isolate``:
one vCPU per core) and to whole pages of the page size tried: memory is
the share of that size's page pool, as only that pool can back it.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import CpuPolicy, ThreadPolicy, VmRequest
from vnuma.topology import format_size_kib


def size_candidates(request: VmRequest, hs: HostState) -> tuple[int, ...]:
    """Page sizes to try for ``request`` on ``hs``, preferred first."""
    return (request.page_size_kib,) if request.page_size_kib else hs.hugepage_sizes


def resolve_size(request: VmRequest, hs: HostState, page_size_kib: int) -> VmRequest | str:
    """``request`` with vcpus/memory filled from its GPUs' share of ``hs``, or why it cannot be sized."""
    gpu_cells = [c for c in hs.cells if c.gpus]
    if not gpu_cells:
        return "has no GPUs on CPU cells to size the VM from; give vcpus and memory"
    if request.cpu_policy is CpuPolicy.DEDICATED and request.thread_policy is ThreadPolicy.ISOLATE:
        per_gpu_vcpus = min(len(c.cores) // len(c.gpus) for c in gpu_cells)
    else:
        threads = min(c.threads_total // len(c.gpus) for c in gpu_cells)
        per_gpu_vcpus = threads // hs.width * hs.width if threads >= hs.width else threads
    per_gpu_kib = min(c.pages_total.get(page_size_kib, 0) // len(c.gpus) for c in gpu_cells) * page_size_kib
    vcpus = request.vcpus if request.vcpus is not None else request.gpus * per_gpu_vcpus
    memory = request.memory_kib if request.memory_kib is not None else request.gpus * per_gpu_kib
    if vcpus < 1:
        return "its GPU cells have too few cores per GPU to size the VM; give vcpus"
    if memory < 1:
        return f"its GPU cells have no {format_size_kib(page_size_kib)} pages to size the VM's memory from"
    return replace(request, vcpus=vcpus, memory_kib=memory, page_size_kib=page_size_kib)
