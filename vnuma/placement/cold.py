"""The cold tier: which host memory-only cell backs a VM's cold memory, and with which pages.

Pure: no I/O. One rule, asked by the host filter (``cold-memory``: is there any cell for it on this
host?) and by the build (which one, for the CPU cells chosen):

* **Eligible** cells are memory-only cells of a *capacity* tier: kind ``cxl`` or ``unknown``
  (:func:`vnuma.topology.tiers.cell_kinds`), or ``dram`` that HMAT rates below the host's best local
  DRAM bandwidth. ``hbm`` (HBM, MCDRAM: faster than local DRAM) is a hot tier and never serves cold
  memory. A GPU's own memory (:attr:`vnuma.topology.Cell.gpu_memory`, kind ``gpu``) is never eligible,
  whatever HMAT says of it: it belongs to its GPU. ``--cold-tier cxl`` keeps the ``cxl`` cells only.
* **Pages**: the largest page size the cell offers that divides the cold memory and has the pages
  free (its hugepage pool, else its 4 KiB memory).
* **Choice**: among the eligible cells with room, the best HMAT read bandwidth from the VM's CPU cells
  (the worst of them counts), then the lowest latency (the worst counts), then the smallest SLIT
  distance sum, then the lowest id. Without HMAT figures the bandwidth and latency tie and SLIT decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vnuma.placement.model import ColdTier, VmRequest
from vnuma.topology import Host, format_size_kib
from vnuma.topology.hmat import nested
from vnuma.topology.tiers import UNRATED_LATENCY_NS, cell_kinds

Pools = dict[tuple[int, int], int]
"""Pages per (memory-only cell, page size KiB)."""


@dataclass(frozen=True, slots=True)
class ColdCell:
    """A memory-only cell as the cold tier sees it: its kind, whether it is a capacity tier, its page sizes
    (largest first), and HMAT read bandwidth (KiB/s), latency (ns) and SLIT distance from each CPU cell."""

    id: int
    kind: str
    capacity: bool
    sizes: tuple[int, ...]
    bandwidth: Mapping[int, int]
    latency: Mapping[int, int]
    distance: Mapping[int, int]


def cold_cells(host: Host) -> tuple[ColdCell, ...]:
    """The host's memory-only cells that hold memory, by id: an empty node (no memory yet, one the kernel keeps
    for memory that may come, such as a GH200's nodes for MIG) serves nothing and is named in no refusal."""
    kinds = cell_kinds(host)
    bandwidth, latency = nested(host.hmat.bandwidth_kib_s), nested(host.hmat.latency_ns)
    cpu_cells = [c for c in host.cells if c.cpus]
    local = max((bandwidth.get(c.id, {}).get(c.id, 0) for c in cpu_cells), default=0)
    out = []
    for cell in sorted(host.cells, key=lambda c: c.id):
        if not cell.memory_only or cell.empty:
            continue
        kind = kinds[cell.id]
        rated = {c.id: row[cell.id] for c in cpu_cells if cell.id in (row := bandwidth.get(c.id, {}))}
        slower = bool(rated) and local > 0 and max(rated.values()) < local
        capacity = cell.memory_kib > 0 and not cell.gpu_memory and (
            kind in ("cxl", "unknown") or (kind == "dram" and slower)
        )
        sizes = tuple(sorted(pools_of(host, cell.id), reverse=True))
        out.append(ColdCell(
            cell.id, kind, capacity, sizes, rated,
            {c.id: row[cell.id] for c in cpu_cells if cell.id in (row := latency.get(c.id, {}))},
            {c.id: d for c in cpu_cells if (d := c.distance_to(cell.id)) is not None},
        ))
    return tuple(out)


def pools_of(host: Host, cell_id: int) -> dict[int, int]:
    """A cell's page pools by size (its memory in base pages when it lists none)."""
    cell, base = host.cell(cell_id), host.base_page_kib
    return {p.size_kib: p.count for p in cell.pages} or {base: cell.memory_kib // base}


def cold_pools(host: Host) -> Pools:
    """Every memory-only cell's pools: what the cold tier can claim on an empty host."""
    return {(c.id, size): n for c in host.cells if c.memory_only for size, n in pools_of(host, c.id).items()}


def eligible(cells: Iterable[ColdCell], tier: ColdTier) -> list[ColdCell]:
    """The cells that may serve cold memory under ``tier``."""
    return [c for c in cells if c.capacity and (tier is ColdTier.ANY or c.kind == "cxl")]


def page_size(cell: ColdCell, free: Mapping[tuple[int, int], int], need_kib: int) -> int | None:
    """The page size ``need_kib`` is claimed in on ``cell`` (see the module doc); None when it has no room."""
    for size in cell.sizes:
        if need_kib % size == 0 and free.get((cell.id, size), 0) >= need_kib // size:
            return size
    return None


def _rank(cell: ColdCell, cpu_cells: tuple[int, ...]) -> tuple[int, int, int, int]:
    bandwidth = min((cell.bandwidth.get(c, 0) for c in cpu_cells), default=0)
    latency = max((cell.latency.get(c, UNRATED_LATENCY_NS) for c in cpu_cells), default=UNRATED_LATENCY_NS)
    return (-bandwidth, latency, sum(cell.distance.get(c, 255) for c in cpu_cells), cell.id)


def choose(
    cells: Iterable[ColdCell], free: Mapping[tuple[int, int], int], req: VmRequest, cpu_cells: tuple[int, ...]
) -> tuple[ColdCell, int] | None:
    """The cell and page size of ``req``'s cold memory for a VM on ``cpu_cells``; None when none has room."""
    found = []
    for cell in eligible(cells, req.cold_tier):
        size = page_size(cell, free, req.cold_memory_kib)
        if size is not None:
            found.append((_rank(cell, cpu_cells), cell, size))
    if not found:
        return None
    _key, cell, size = min(found, key=lambda x: x[0])
    return cell, size


def refusal(cells: tuple[ColdCell, ...], free: Mapping[tuple[int, int], int], req: VmRequest) -> str | None:
    """Why no memory-only cell of the host can take ``req``'s cold memory; None when one can."""
    if choose(cells, free, req, ()) is not None:
        return None
    asked = format_size_kib(req.cold_memory_kib)
    if not cells:
        return f"no memory-only cell for {asked} of cold memory"
    usable = eligible(cells, req.cold_tier)
    if not usable:
        seen = ", ".join(f"cell {c.id} {c.kind}" for c in cells)
        hot = "hbm is a hot tier" + (", gpu is a GPU's own memory" if any(c.kind == "gpu" for c in cells) else "")
        why = "of kind cxl" if req.cold_tier is ColdTier.CXL else f"of a capacity tier ({hot})"
        return f"no memory-only cell {why} for cold memory ({seen})"
    most = max(usable, key=lambda c: (_free_kib(c, free), -c.id))
    return (
        f"memory-only cell {most.id} has {format_size_kib(_free_kib(most, free))} free, "
        f"VM asks {asked} of cold memory"
    )


def _free_kib(cell: ColdCell, free: Mapping[tuple[int, int], int]) -> int:
    return max((size * free.get((cell.id, size), 0) for size in cell.sizes), default=0)
