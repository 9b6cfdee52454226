"""One host as one request sees it: per-cell capacity for that tenant, policy and strategy.

Pure: no I/O; reads the ledger only. ``raw`` is a cell's exact capacity for
the request's tenant and policy (:meth:`CellState.capacity`), -1 where cell
isolation or the request's ``avoid_cells`` keep it off the cell; ``caps``
is the same after the ``gpu-first`` reserve (:mod:`.rules`) for a VM
without GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnuma.placement.groups import group_cells
from vnuma.placement.ledger.cell import CellState, tenant_bucket
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import CpuPolicy, Isolation, ThreadPolicy, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.rules import cap_row, gpu_share, reserved_pages, reserved_threads

UNITS = {
    ThreadPolicy.PREFER: "pCPUs",
    ThreadPolicy.ISOLATE: "whole cores",
    ThreadPolicy.REQUIRE: "pCPUs on sibling pairs",
}


class HostView:
    """Per-cell capacity of one host for one request (exact, tenant-aware)."""

    __slots__ = ("bucket", "caps", "hs", "raw", "req", "reserve", "row", "slice_room")

    def __init__(
        self, hs: HostState, req: VmRequest, strategy: Strategy, isolations: Mapping[str, Isolation]
    ) -> None:
        self.hs = hs
        self.req = req
        self.bucket = tenant_bucket(req.tenant, req.isolation)
        self.reserve = strategy is Strategy.GPU_FIRST and req.takes_no_gpu
        self.row = cap_row(req.cpu_policy, req.thread_policy)
        self.raw: dict[int, int] = {}
        self.caps: dict[int, int] = {}
        self.slice_room: dict[int, Any] = {}
        """Cell id -> why its L3 domains have no room for the request's slice (None: room), as asked
        (the ``resctrl`` filter; every guest-cell count tried reads it)."""
        avoid = req.avoid_cells
        apart = group_cells(hs, req.name, req.group, req.anti_affinity)  # a replica group's other VMs' cells
        for cell in hs.cells:
            usable = cell.usable_by(req.tenant, req.isolation, isolations) and (
                not avoid or (hs.name, cell.id) not in avoid
            ) and cell.id not in apart
            raw = cell.capacity(self.bucket, req.cpu_policy, req.thread_policy) if usable else -1
            self.raw[cell.id] = raw
            self.caps[cell.id] = max(0, raw - self.reserved(cell)) if raw >= 0 and self.reserve else raw

    def reserved(self, cell: CellState) -> int:
        """Capacity ``gpu-first`` keeps on ``cell`` for its free GPUs (0 when nothing is kept)."""
        if not self.reserve or not cell.gpus_free:
            return 0
        share = gpu_share(cell.threads_total, len(cell.gpus))
        return int(reserved_threads(share, len(cell.gpus_free), cell.width, self.row))

    def pages(self, cell: CellState, size: int) -> int:
        """Free pages of ``size`` this request may take on ``cell``."""
        free = cell.pages_free.get(size, 0)
        if self.reserve and cell.gpus_free:
            share = gpu_share(cell.pages_total.get(size, 0), len(cell.gpus))
            free -= int(reserved_pages(share, len(cell.gpus_free)))
        return free

    def emulator_ok(self, cell: CellState, vcpus: int) -> bool:
        """Can the cell hold ``vcpus`` plus one isolated emulator pCPU?"""
        if self.req.thread_policy is ThreadPolicy.REQUIRE:
            spare = cell.free_threads(self.bucket) - self.reserved(cell)
            return self.caps[cell.id] >= vcpus and spare >= vcpus + 1
        return self.caps[cell.id] >= vcpus + 1

    def unit(self) -> str:
        """What the request's per-cell capacity counts, for messages."""
        if self.req.cpu_policy is CpuPolicy.SHARED:
            return "shared-pool pCPUs"
        return UNITS[self.req.thread_policy]
