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
from vnuma.placement.ledger.kinds import FIGURES
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


def totals_of(figures: Sequence[Sequence[int]]) -> Totals:
    """The totals of hosts given by their :data:`~.kinds.FIGURES` (one row per host), as
    :meth:`FleetArrays.totals` gives them for hosts of a ledger: a host's scores need nothing else of it."""
    used, total, mem_used, mem_total, gpus_free, gpus_total, width = np.array(
        figures, dtype=np.int64
    ).reshape(-1, len(FIGURES)).T
    return Totals(used, total, np.maximum(total, 1), mem_used, mem_total, np.maximum(mem_total, 1), gpus_free,
                  gpus_total, np.maximum(gpus_total, 1), width)


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
        self.hosts = len(states)
        self._mirror: FleetArrays | None = None
        self._mirror_hosts: IntArray | None = None
        self._room: dict[str, npt.NDArray[np.generic]] = {}
        """The mirror's arrays' buffers, with room for more hosts (:meth:`mirror_insert`)."""
        # Hosts with hugepage sizes the arrays do not track: never pre-filtered out on pages.
        self.exotic = np.zeros(hosts, dtype=bool)
        self._init_hosts(states)
        self.any_exotic = bool(self.exotic.any())
        self.most_cells = int(self.ncells.max(initial=0))
        """The most CPU cells a host of the fleet has."""
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

    def subset(self, hosts: IntArray) -> FleetArrays:
        """The arrays of the hosts at indices ``hosts`` (ascending) only, in that order, to read (the pre-filter
        and the scorers take them as they take the whole fleet's). The mirrored hosts' (:meth:`mirror`) cost
        nothing; other sets are gathered."""
        if len(hosts) == self.hosts:
            return self
        if hosts is self._mirror_hosts and self._mirror is not None:
            return self._mirror
        view = object.__new__(FleetArrays)
        for name in (*_STATIC, *_DYNAMIC):
            setattr(view, name, getattr(self, name)[..., hosts])
        view._derive(self, len(hosts))
        return view

    def mirror(self, hosts: IntArray) -> None:
        """Keep the arrays of the hosts at ``hosts`` (ascending) gathered, in step with every sync, so that
        :meth:`subset` of that very array is free (the fleet's candidates, :mod:`.candidates`)."""
        self._mirror = self.subset(hosts) if len(hosts) != self.hosts else None
        self._mirror_hosts = hosts
        self._room = {}

    def mirror_insert(self, hosts: IntArray, at: int) -> None:
        """The mirrored hosts are now ``hosts``: the previous array with ``hosts[at]`` inserted at ``at``.
        Amortized O(1) array writes: the mirror's arrays are views of buffers with room to grow (doubled when
        full), its columns after ``at`` shifted by one."""
        mirror = self._mirror
        if mirror is None or len(hosts) == self.hosts:
            self.mirror(hosts)
            return
        index, n = int(hosts[at]), len(hosts)
        for name in (*_STATIC, *_DYNAMIC):
            buffer = self._room.get(name)
            if buffer is None or buffer.shape[-1] < n:
                old = getattr(mirror, name)
                buffer = np.zeros((*old.shape[:-1], max(2 * n, 64)), dtype=old.dtype)
                buffer[..., : n - 1] = old
                self._room[name] = buffer
            buffer[..., at + 1 : n] = buffer[..., at : n - 1].copy()
            buffer[..., at] = getattr(self, name)[..., index]
            setattr(mirror, name, buffer[..., :n])
        mirror._derive(self, n)
        self._mirror_hosts = hosts

    def _derive(self, whole: FleetArrays, hosts: int) -> None:
        """The views and scalars of gathered arrays, ``whole`` the fleet's."""
        self.cap = self.cells[0:4]
        self.pages = self.cells[4 : 4 + len(SIZES)]
        self.gpus = self.cells[4 + len(SIZES)]
        self.threads_free = self.cells[5 + len(SIZES)]
        self.columns, self.hosts, self.most_cells = whole.columns, hosts, whole.most_cells
        self.any_exotic = bool(self.exotic.any())
        self._mirror, self._mirror_hosts = None, None

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

    def figures(self, index: int) -> tuple[int, ...]:
        """Host ``index``'s :data:`~.kinds.FIGURES` as the ledger holds them now."""
        return tuple(int(getattr(self, name)[index]) for name in FIGURES)

    def sync_cell(self, hs: HostState, cell: CellState) -> None:
        """Copy one cell's current free capacity into the arrays (and its free totals onto the cell)."""
        cell.threads_free = cell.free_core_threads + sum(cell.partial_free.values())
        cell.free_kib = sum(size * n for size, n in cell.pages_free.items())
        column = _columns(cell)
        self.cells[:, cell.col, hs.index] = column
        at = self._mirrored(hs.index)
        if at is not None:
            self._mirror.cells[:, cell.col, at] = column  # type: ignore[union-attr]

    def sync_host(self, hs: HostState) -> None:
        """Copy one host's totals (used threads, memory, free GPUs) into the arrays."""
        h = hs.index
        self.threads_used[h] = hs.threads_total - sum(c.threads_free for c in hs.cells)
        self.mem_used[h] = hs.mem_total_kib - sum(c.free_kib for c in hs.cells)
        self.gpus_free[h] = hs.gpus_free
        at = self._mirrored(h)
        if at is not None:
            mirror = self._mirror
            assert mirror is not None
            mirror.threads_used[at], mirror.mem_used[at], mirror.gpus_free[at] = (
                self.threads_used[h], self.mem_used[h], self.gpus_free[h]
            )

    def _mirrored(self, index: int) -> int | None:
        """The position of host ``index`` in the mirror, None when not mirrored."""
        hosts = self._mirror_hosts
        if self._mirror is None or hosts is None:
            return None
        at = int(np.searchsorted(hosts, index))
        return at if at < len(hosts) and int(hosts[at]) == index else None


_STATIC = (
    "cell_width", "cell_gpus", "thread_share", "page_share", "threads_total", "mem_total", "gpus_total", "width",
    "total_safe", "mem_total_safe", "gpus_total_safe", "ncells", "exotic",
)
"""The arrays no claim changes."""
_DYNAMIC = ("cells", "threads_used", "mem_used", "gpus_free")
"""The arrays claims change (``cells`` holds every per-cell one)."""


def _columns(cell: CellState) -> tuple[int, ...]:
    """One cell's column of ``FleetArrays.cells``: capacity bounds, free pages, GPUs, threads."""
    pages = cell.pages_free
    return (
        *cell.upper_bounds(),
        *(pages.get(size, 0) for size in SIZES),
        len(cell.gpus_free),
        cell.threads_free,
    )
