"""Numpy mirrors of the fleet's free capacity, for vectorized pre-filtering and scoring.

Pure: no I/O. Per-cell arrays are indexed [column, host] where hosts are in
name order and columns are a host's CPU cells in id order (padding columns
of smaller hosts hold zeros, so they never fit); column-major because
reductions over a host's few cells are then fast row additions. CPU columns hold *upper
bounds* of what any tenant can still get there (the exact, tenant-aware
figures live in :class:`vnuma.placement.ledger.cell.CellState`): a host the
arrays rule out can never fit, the converse is checked exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vnuma.placement.ledger.cell import CellState
from vnuma.placement.ledger.host import HostShape, HostState
from vnuma.placement.rules import gpu_share
from vnuma.topology import PAGE_1G, PAGE_2M, PAGE_4K

IntArray = npt.NDArray[np.int64]

SIZES = (PAGE_4K, PAGE_2M, PAGE_1G)
SIZE_INDEX = {size: i for i, size in enumerate(SIZES)}


def count_true(rows: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Per host, how many cells (rows) are True."""
    counted: npt.NDArray[np.int64] = np.add.reduce(rows, axis=0, dtype=np.int64)
    return counted


@dataclass(frozen=True, slots=True)
class Totals:
    """Per-host totals of some hosts (all, or a gathered subset), as the scorers read them."""

    threads_used: IntArray
    threads_total: IntArray
    threads_safe: IntArray
    mem_used: IntArray
    mem_total: IntArray
    mem_safe: IntArray
    gpus_free: IntArray
    gpus_total: IntArray
    gpus_safe: IntArray
    width: IntArray


class FleetArrays:
    """Per-cell and per-host capacity arrays of a fleet, kept in step with its claims."""

    def __init__(self, states: Sequence[HostState]) -> None:
        hosts = max(1, len(states))
        cols = max((len(s.shape.cells) for s in states), default=1) or 1
        # One block for everything a cell's claims change, so a cell is synced in one write;
        # the named arrays below are views into it.
        self.cells = np.zeros((4 + len(SIZES) + 2, cols, hosts), dtype=np.int64)
        self.cap = self.cells[0:4]
        self.pages = self.cells[4 : 4 + len(SIZES)]
        self.gpus = self.cells[4 + len(SIZES)]
        self.threads_free = self.cells[5 + len(SIZES)]
        # Static per-cell figures, as the capacity rules (:mod:`vnuma.placement.rules`) take them.
        self.cell_width = np.ones((cols, hosts), dtype=np.int64)
        self.cell_gpus = np.zeros((cols, hosts), dtype=np.int64)
        self.thread_share = np.zeros((cols, hosts), dtype=np.int64)
        self.page_share = np.zeros((len(SIZES), cols, hosts), dtype=np.int64)
        self.threads_total = np.zeros(hosts, dtype=np.int64)
        self.threads_used = np.zeros(hosts, dtype=np.int64)
        self.mem_total = np.zeros(hosts, dtype=np.int64)
        self.mem_used = np.zeros(hosts, dtype=np.int64)
        self.gpus_total = np.zeros(hosts, dtype=np.int64)
        self.gpus_free = np.zeros(hosts, dtype=np.int64)
        self.width = np.ones(hosts, dtype=np.int64)
        self.total_safe = np.ones(hosts, dtype=np.int64)
        self.mem_total_safe = np.ones(hosts, dtype=np.int64)
        self.gpus_total_safe = np.ones(hosts, dtype=np.int64)
        self.ncells = np.zeros(hosts, dtype=np.int64)
        self.columns = cols
        # Hosts with hugepage sizes the arrays do not track: never pre-filtered out on pages.
        self.exotic = np.zeros(hosts, dtype=bool)
        self._init_hosts(states)
        self.any_exotic = bool(self.exotic.any())
        np.maximum(self.threads_total, 1, out=self.total_safe)
        np.maximum(self.mem_total, 1, out=self.mem_total_safe)
        np.maximum(self.gpus_total, 1, out=self.gpus_total_safe)

    def _init_hosts(self, states: Sequence[HostState]) -> None:
        # Built hosts (claims may have changed them) are synced one by one; unbuilt ones are
        # unclaimed, so their columns are their shape's, written once per shape for all of them.
        by_shape: dict[int, tuple[HostShape, list[int]]] = {}
        for hs in states:
            if hs.built:
                self._init_host(hs.shape, [hs.index])
                for cell in hs.cells:
                    self.sync_cell(hs, cell)
                self.sync_host(hs)
            else:
                by_shape.setdefault(id(hs.shape), (hs.shape, []))[1].append(hs.index)
        for shape, indices in by_shape.values():
            self._init_host(shape, indices)

    def _init_host(self, shape: HostShape, indices: list[int]) -> None:
        """Write the static and the unclaimed columns of ``shape`` for the hosts at ``indices``."""
        h = np.array(indices, dtype=np.intp)
        self.threads_total[h] = shape.threads_total
        self.mem_total[h] = shape.mem_total_kib
        self.gpus_total[h] = shape.gpus_total
        self.gpus_free[h] = shape.gpus_total
        self.width[h] = shape.width
        self.ncells[h] = len(shape.cells)
        self.exotic[h] = any(s not in SIZE_INDEX for c in shape.cells for s in c.pages_total)
        for cell in shape.cells:
            self.cell_width[cell.col, h] = cell.width
            self.cell_gpus[cell.col, h] = len(cell.gpus)
            self.thread_share[cell.col, h] = gpu_share(cell.threads_total, len(cell.gpus))
            for size, i in SIZE_INDEX.items():
                self.page_share[i, cell.col, h] = gpu_share(cell.pages_total.get(size, 0), len(cell.gpus))
            self.cells[:, cell.col, h] = np.array(_columns(cell), dtype=np.int64)[:, None]

    def totals(self, hosts: IntArray | None = None) -> Totals:
        """Per-host totals of every host, or of the hosts at indices ``hosts``."""
        fields = (
            self.threads_used,
            self.threads_total,
            self.total_safe,
            self.mem_used,
            self.mem_total,
            self.mem_total_safe,
            self.gpus_free,
            self.gpus_total,
            self.gpus_total_safe,
            self.width,
        )
        if hosts is None:
            return Totals(*fields)
        return Totals(*(f[hosts] for f in fields))

    def sync_cell(self, hs: HostState, cell: CellState) -> None:
        """Copy one cell's current free capacity into the arrays (and its free totals onto the cell)."""
        cell.threads_free = cell.free_core_threads + sum(cell.partial_free.values())
        cell.free_kib = sum(size * n for size, n in cell.pages_free.items())
        self.cells[:, cell.col, hs.index] = _columns(cell)

    def sync_host(self, hs: HostState) -> None:
        """Copy one host's totals (used threads, memory, free GPUs) into the arrays."""
        h = hs.index
        self.threads_used[h] = hs.threads_total - sum(c.threads_free for c in hs.cells)
        self.mem_used[h] = hs.mem_total_kib - sum(c.free_kib for c in hs.cells)
        self.gpus_free[h] = hs.gpus_free


def _columns(cell: CellState) -> tuple[int, ...]:
    """One cell's column of ``FleetArrays.cells``: capacity bounds, free pages, GPUs, threads."""
    pages = cell.pages_free
    return (
        *cell.upper_bounds(),
        *(pages.get(size, 0) for size in SIZES),
        len(cell.gpus_free),
        cell.threads_free,
    )
