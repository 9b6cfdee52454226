"""One host's static shape (cells, distances, sockets, GPUs) plus its claim state.

Pure: no I/O. Built once per host by :class:`vnuma.placement.fleet.Fleet`;
the engine reads it, only the fleet changes it.
"""

from __future__ import annotations

from vnuma.placement.state import CellState, cell_states
from vnuma.topology import PAGE_4K, DeviceKind, Host

UNKNOWN_REMOTE_DISTANCE = 20  # libvirt's default when a host reports no SLIT table


class HostState:
    """Shape and claims of one host; ``index`` is its position in name order."""

    __slots__ = (
        "cell_by_id",
        "cells",
        "cpu_cell",
        "distance",
        "gpu_home",
        "gpus_free",
        "gpus_total",
        "host",
        "hugepage_sizes",
        "index",
        "loose_gpus_free",
        "mem_total_kib",
        "min_pair_distance",
        "name",
        "neighbors",
        "socket_of",
        "threads_total",
        "width",
    )

    def __init__(self, host: Host, index: int) -> None:
        self.host = host
        self.name = host.name
        self.index = index
        self.cells: tuple[CellState, ...] = cell_states(host)
        self.cell_by_id = {c.id: c for c in self.cells}
        self.cpu_cell = {cpu: c for c in self.cells for cpu in c.core_of}
        ids = [c.id for c in self.cells]
        self.distance: dict[tuple[int, int], int] = {}
        for a in ids:
            cell = host.cell(a)
            for b in ids:
                d = cell.distance_to(b)
                self.distance[(a, b)] = d if d is not None else (10 if a == b else UNKNOWN_REMOTE_DISTANCE)
        pairs = [self.distance[(a, b)] for a in ids for b in ids if a != b]
        self.min_pair_distance = min(pairs, default=10)
        self.neighbors: dict[int, tuple[tuple[int, int], ...]] = {
            a: tuple(sorted((self.distance[(a, b)], b) for b in ids if b != a)) for a in ids
        }
        self.socket_of: dict[int, int | None] = {}
        for c in self.cells:
            sockets = {cpu.socket for cpu in host.cell(c.id).cpus}
            self.socket_of[c.id] = sockets.pop() if len(sockets) == 1 else None
        on_cells = {a for c in self.cells for a in c.gpus}
        gpus = host.devices_of(DeviceKind.GPU)
        self.gpu_home: dict[str, int | None] = {d.address: d.numa_node for d in gpus}
        self.loose_gpus_free: list[str] = sorted(d.address for d in gpus if d.address not in on_cells)
        self.gpus_total = len(gpus)
        self.gpus_free = len(gpus)
        self.threads_total = sum(c.threads_total for c in self.cells)
        self.mem_total_kib = sum(size * n for c in self.cells for size, n in c.pages_total.items())
        self.width = max((c.width for c in self.cells), default=1)
        self.hugepage_sizes: tuple[int, ...] = tuple(
            sorted({s for c in self.cells for s in c.pages_total if s > PAGE_4K}, reverse=True)
        )

    def socket_cells(self, socket: int | None, cell_id: int) -> tuple[int, ...]:
        """CPU cells on the same socket as ``cell_id`` (just the cell itself when unknown)."""
        if socket is None:
            return (cell_id,)
        return tuple(c for c, s in self.socket_of.items() if s == socket)

    def max_distance(self, cells: tuple[int, ...]) -> int:
        """Largest distance between two cells of a set (10 for one cell)."""
        return max((self.distance[(a, b)] for a in cells for b in cells), default=10)

    def sum_distance(self, cells: tuple[int, ...]) -> int:
        """Sum of pairwise distances of a set (ties between equally wide sets)."""
        return sum(self.distance[(a, b)] for i, a in enumerate(cells) for b in cells[i + 1 :])

    def is_adjacent(self, cells: tuple[int, ...]) -> bool:
        """True when no pair of the cells is farther apart than the host's closest pair."""
        return len(cells) < 2 or self.max_distance(cells) <= self.min_pair_distance
