"""What HMAT's figures make of a host's cells: each cell's memory kind and tier, and the ratings of CPU cells.

Pure: no I/O. The figures themselves are :mod:`vnuma.topology.hmat`'s; a cell's kind, the cell choice
(:func:`cpu_cell_ratings`) and the cold tier go by CPU initiators only (see there why).

A cell's **kind** (:func:`cell_kinds`): hwloc names it (its NUMA node
``subtype``: ``DRAM``, ``HBM``/``MCDRAM``, ``CXL``...); capabilities do not,
so a cell with CPUs is ``dram``, and a memory-only cell is ``hbm`` when its
best read bandwidth from a CPU cell beats every CPU cell's own, ``cxl`` when
HMAT rates it below, and ``unknown`` without HMAT figures from a CPU cell for
it. A GPU's own memory (:attr:`vnuma.topology.Cell.gpu_memory`) is ``gpu``
whatever HMAT says: it is no tier of the host's memory, and ranks last. A
cell's **tier** (:func:`cell_tiers`) ranks the kinds present on the host,
fastest first: ``hbm``, ``dram``, ``cxl``, ``unknown``, ``gpu`` (0 is the
fastest tier the host has).
"""

from __future__ import annotations

from collections.abc import Mapping

from vnuma.topology import Host
from vnuma.topology.hmat import cpu_initiated

KINDS = ("hbm", "dram", "cxl", "unknown", "gpu")
"""Memory kinds, fastest first (``gpu``, a GPU's own memory, is no host tier: last)."""
_SUBTYPES = {"DRAM": "dram", "HBM": "hbm", "MCDRAM": "hbm", "CXL": "cxl", "CXL-DRAM": "cxl", "NVM": "cxl"}


def _best(matrix: Mapping[int, Mapping[int, int]], target: int, *, low: bool) -> int | None:
    values = [row[target] for row in matrix.values() if target in row]
    if not values:
        return None
    return min(values) if low else max(values)


def cell_kinds(host: Host) -> dict[int, str]:
    """Each cell's memory kind (see the module doc), by cell id."""
    cpu_cells = [c.id for c in host.cells if c.cpus]
    bandwidth = cpu_initiated(host.hmat.bandwidth_kib_s, cpu_cells)
    latency = cpu_initiated(host.hmat.latency_ns, cpu_cells)
    own_bandwidth = [bandwidth.get(c, {}).get(c) for c in cpu_cells]
    own_latency = [latency.get(c, {}).get(c) for c in cpu_cells]
    dram_bandwidth = max((b for b in own_bandwidth if b is not None), default=None)
    dram_latency = min((v for v in own_latency if v is not None), default=None)
    kinds: dict[int, str] = {}
    for cell in host.cells:
        named = _SUBTYPES.get((cell.subtype or "").upper())
        if cell.gpu_memory:
            kinds[cell.id] = "gpu"
        elif named is not None:
            kinds[cell.id] = named
        elif cell.cpus:
            kinds[cell.id] = "dram"
        else:
            kinds[cell.id] = _memory_only_kind(cell.id, bandwidth, latency, dram_bandwidth, dram_latency)
    return kinds


def _memory_only_kind(
    cell: int, bandwidth: Mapping[int, Mapping[int, int]], latency: Mapping[int, Mapping[int, int]],
    dram_bandwidth: int | None, dram_latency: int | None,
) -> str:
    best = _best(bandwidth, cell, low=False)
    if best is not None and dram_bandwidth is not None:
        return "hbm" if best > dram_bandwidth else "cxl"
    nearest = _best(latency, cell, low=True)
    if nearest is not None and dram_latency is not None:
        return "hbm" if nearest < dram_latency else "cxl"
    return "unknown"


def cell_tiers(host: Host) -> dict[int, int]:
    """Each cell's tier: the rank of its kind among the kinds the host has, 0 the fastest."""
    kinds = cell_kinds(host)
    present = sorted(set(kinds.values()), key=KINDS.index)
    return {cell: present.index(kind) for cell, kind in kinds.items()}


UNRATED_LATENCY_NS = 1 << 40
"""The latency a pair HMAT does not rate counts as: worse than any rated one."""


def cpu_cell_ratings(host: Host) -> dict[tuple[int, int], tuple[int, int]] | None:
    """(read bandwidth KiB/s, read latency ns) per ordered pair (initiator, target) of the host's CPU cells,
    0 and :data:`UNRATED_LATENCY_NS` where HMAT rates one figure and not the other; pairs it rates neither for
    are left out. None when it rates no pair of CPU cells (the cell choice then goes by SLIT alone)."""
    cpu_cells = {c.id for c in host.cells if c.cpus}
    bandwidth = {(i, t): v for i, t, v in host.hmat.bandwidth_kib_s if i in cpu_cells and t in cpu_cells}
    latency = {(i, t): v for i, t, v in host.hmat.latency_ns if i in cpu_cells and t in cpu_cells}
    pairs = bandwidth.keys() | latency.keys()
    if not pairs:
        return None
    return {p: (bandwidth.get(p, 0), latency.get(p, UNRATED_LATENCY_NS)) for p in pairs}
