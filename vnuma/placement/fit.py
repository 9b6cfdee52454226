"""Exact fit of one request on one host: which cells and page size, or why not.

Pure: no I/O, reads host state only. A fit is decided on per-cell
capacities (exact, tenant-aware, see :meth:`CellState.capacity`); pCPUs and
devices are picked afterwards, only for the chosen host (:mod:`.build`).

Checks, in pipeline order (a rejection names the furthest one it reached,
see :data:`CHECKS`): requested host, number of cells, sizing, cell isolation,
SMT for ``require``, per-cell pCPUs, the ``gpu-first`` reserve, room for an
isolated emulator pCPU, per-cell pages, GPUs on the cell set, GPU stranding.

Memory comes from one page pool per VM: an explicit size, or for ``large``
(``page_size_kib`` None) the largest hugepage size whose pages divide the
per-cell memory and that every chosen cell can back, then smaller hugepage
sizes; ``large`` never falls back to 4 KiB pages (as Nova's ``large``):
those must be asked for, so a VM never silently loses its hugepages.

Under ``gpu-first`` a VM without GPUs may only use what a cell has beyond
the proportional share kept for each of its free GPUs (the cell's pCPUs and
page pool divided by its GPU count); a GPU VM may not leave its cells'
other free GPUs without pCPUs to use them (:mod:`.gpus`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vnuma.placement.cellsets import choose_cells
from vnuma.placement.gpus import KEEP_PER_GPU, strands_gpus, threads_taken
from vnuma.placement.ledger.cell import CellState, tenant_bucket
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import (
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    Isolation,
    Rejection,
    Strategy,
    ThreadPolicy,
    VmRequest,
)
from vnuma.topology import format_size_kib

CHECKS = (
    "host",
    "numa-nodes",
    "size",
    "cell-isolation",
    "smt",
    "cell-cpus",
    "gpu-reserve",
    "emulator",
    "cell-pages",
    "gpus",
    "gpu-strand",
)
STAGE = {name: i for i, name in enumerate(CHECKS)}
UNITS = {
    ThreadPolicy.PREFER: "pCPUs",
    ThreadPolicy.ISOLATE: "whole cores",
    ThreadPolicy.REQUIRE: "pCPUs on sibling pairs",
}


@dataclass(frozen=True, slots=True)
class HostFit:
    """A host that can take the VM: host cells in guest order, the page size, adjacency."""

    state: HostState
    cells: tuple[int, ...]
    page_size_kib: int
    adjacent: bool


class HostView:
    """One host as one request sees it: per-cell capacity for that tenant and policy."""

    __slots__ = ("bucket", "caps", "hs", "raw", "req", "reserve")

    def __init__(
        self, hs: HostState, req: VmRequest, strategy: Strategy, isolations: dict[str, Isolation]
    ) -> None:
        self.hs = hs
        self.req = req
        self.bucket = tenant_bucket(req.tenant, req.isolation)
        self.reserve = strategy is Strategy.GPU_FIRST and req.gpus == 0
        self.raw: dict[int, int] = {}
        self.caps: dict[int, int] = {}
        for cell in hs.cells:
            usable = cell.usable_by(req.tenant, req.isolation, isolations)
            raw = cell.capacity(self.bucket, req.cpu_policy, req.thread_policy) if usable else -1
            self.raw[cell.id] = raw
            self.caps[cell.id] = max(0, raw - self._reserved(cell)) if raw >= 0 and self.reserve else raw

    def _reserved(self, cell: CellState) -> int:
        if not cell.gpus or not cell.gpus_free:
            return 0
        threads = cell.threads_total // len(cell.gpus) * len(cell.gpus_free)
        if self.req.cpu_policy is CpuPolicy.DEDICATED and self.req.thread_policy is ThreadPolicy.ISOLATE:
            return -(-threads // cell.width)
        if self.req.cpu_policy is CpuPolicy.DEDICATED and self.req.thread_policy is ThreadPolicy.REQUIRE:
            return threads + threads % 2
        return threads

    def pages(self, cell: CellState, size: int) -> int:
        """Free pages of ``size`` this request may take on ``cell``."""
        free = cell.pages_free.get(size, 0)
        if self.reserve and cell.gpus and cell.gpus_free:
            free -= cell.pages_total.get(size, 0) // len(cell.gpus) * len(cell.gpus_free)
        return free

    def emulator_ok(self, cell: CellState, vcpus: int) -> bool:
        """Can the cell hold ``vcpus`` plus one isolated emulator pCPU?"""
        if self.req.thread_policy is ThreadPolicy.REQUIRE:
            spare = cell.free_threads(self.bucket) - (self._reserved(cell) if self.reserve else 0)
            return self.caps[cell.id] >= vcpus and spare >= vcpus + 1
        return self.caps[cell.id] >= vcpus + 1


def fit_host(
    hs: HostState, req: VmRequest, strategy: Strategy, isolations: dict[str, Isolation], n: int | None = None
) -> HostFit | Rejection:
    """Fit ``req`` (sized: vcpus and memory set) on ``hs`` with ``n`` guest cells
    (default: the request's, or the fewest that fit when it says auto)."""
    assert req.vcpus is not None and req.memory_kib is not None
    view = HostView(hs, req, strategy, isolations)
    nodes = n or req.numa_nodes
    if nodes is not None:
        if nodes > len(hs.cells):
            return Rejection(
                hs.name, "numa-nodes", f"has {len(hs.cells)} CPU cell(s), the VM asks for {nodes}"
            )
        return _fit_n(view, nodes, strategy)
    best: Rejection | None = None
    tried = 0
    for k in range(1, len(hs.cells) + 1):
        if req.vcpus % k or req.memory_kib % (4 * k):
            continue
        found = _fit_n(view, k, strategy)
        if isinstance(found, HostFit):
            return found
        tried += 1
        if best is None or STAGE[found.check] > STAGE[best.check]:
            best = found
    if best is not None and tried > 1:
        return Rejection(best.host, best.check, f"{best.reason} (and no split over up to {k} cells fits)")
    return best or Rejection(
        hs.name, "numa-nodes", f"{req.vcpus} vCPUs cannot be split evenly over its cells"
    )


def _fit_n(view: HostView, n: int, strategy: Strategy) -> HostFit | Rejection:
    hs, req = view.hs, view.req
    assert req.vcpus is not None and req.memory_kib is not None
    v, m = req.vcpus // n, req.memory_kib // n
    if req.cpu_policy is CpuPolicy.DEDICATED and req.thread_policy is ThreadPolicy.REQUIRE:
        if hs.width < 2:
            return Rejection(hs.name, "smt", "has no SMT siblings; thread policy require needs sibling pairs")
        if v % 2:
            return Rejection(hs.name, "smt", f"{v} vCPUs per cell cannot be packed on sibling pairs")
    cpu_ok = [c for c in hs.cells if view.caps[c.id] >= v]
    if len(cpu_ok) < n:
        return _cpu_rejection(view, n, v, len(cpu_ok))
    emulator = req.emulator_threads is EmulatorThreads.ISOLATE
    anchors = [c.id for c in cpu_ok if view.emulator_ok(c, v)] if emulator else None
    if anchors == []:
        return Rejection(
            hs.name, "emulator", f"no cell has {v} {_unit(req)} plus 1 for the isolated emulator thread"
        )
    wanted = (req.page_size_kib,) if req.page_size_kib else hs.hugepage_sizes
    sizes = [s for s in wanted if m % s == 0]
    if not sizes:
        sizes_text = ", ".join(format_size_kib(s) for s in wanted) or "no hugepages"
        return Rejection(
            hs.name,
            "cell-pages",
            f"{format_size_kib(m)} per cell is not a whole number of pages ({sizes_text})"
            + ("" if req.page_size_kib else "; page size 4K opts out of hugepages"),
        )
    worst: Rejection | None = None
    for size in sizes:
        found = _fit_size(view, n, v, m, size, cpu_ok, anchors, strategy)
        if isinstance(found, HostFit):
            return found
        worst = worst if worst and STAGE[worst.check] >= STAGE[found.check] else found
    assert worst is not None
    return worst


def _fit_size(
    view: HostView,
    n: int,
    v: int,
    m: int,
    size: int,
    cpu_ok: list[CellState],
    anchors: list[int] | None,
    strategy: Strategy,
) -> HostFit | Rejection:
    hs, req = view.hs, view.req
    need = m // size
    ok = [c for c in cpu_ok if view.pages(c, size) >= need]
    if len(ok) < n:
        best = max(cpu_ok, key=lambda c: (view.pages(c, size), -c.id))
        where = f"cell {best.id}: needs" if n == 1 else f"needs {n} cells with"
        has = "has" if n == 1 else f"{len(ok)} have them; most: cell {best.id} with"
        pages = f"{need} free {format_size_kib(size)} pages ({format_size_kib(m)})"
        return Rejection(
            hs.name,
            "cell-pages",
            f"{where} {pages} beside {v} {_unit(req)}, {has} {max(0, view.pages(best, size))}",
        )
    ids = [c.id for c in ok]
    gpus = {c.id: len(c.gpus_free) for c in hs.cells}
    pref = {c.id: _preference(view, c, strategy) for c in ok}
    anchor_ids = [a for a in anchors if a in set(ids)] if anchors is not None else None
    if anchor_ids == []:
        return Rejection(
            hs.name, "emulator", "no cell with the pages has room for the isolated emulator thread"
        )
    keep = strategy is Strategy.GPU_FIRST and req.gpus > 0
    accept = _no_stranding(hs, req, v) if keep else None
    cells = choose_cells(hs, ids, n, req.gpus, gpus, pref, anchors=anchor_ids, accept=accept)
    stranding = cells is None and keep and choose_cells(hs, ids, n, req.gpus, gpus, pref, anchors=anchor_ids)
    if cells is None and req.gpus and req.gpu_affinity is not GpuAffinity.REQUIRED:
        accept = _socket_test(hs, req.gpus) if req.gpu_affinity is GpuAffinity.SOCKET else None
        cells = choose_cells(hs, ids, n, 0, gpus, pref, anchors=anchor_ids, accept=accept)
        if cells is not None and req.gpu_affinity is GpuAffinity.PREFERRED and hs.gpus_free < req.gpus:
            cells = None
    if cells is not None:
        return HostFit(hs, cells, size, hs.is_adjacent(cells))
    if stranding:
        return Rejection(
            hs.name,
            "gpu-strand",
            f"gpu-first: every cell set with {req.gpus} free GPUs would leave other free GPUs there without "
            f"{float(KEEP_PER_GPU):.0%} of their pCPU share",
        )
    return _gpu_rejection(view, n, v, size, need, ids, gpus)


def _no_stranding(hs: HostState, req: VmRequest, v: int) -> Callable[[tuple[int, ...]], bool]:
    def accept(cells: tuple[int, ...]) -> bool:
        return not strands_gpus(hs, cells, req.gpus, threads_taken(req, hs, v, len(cells)))

    return accept


def _socket_test(hs: HostState, want: int) -> Callable[[tuple[int, ...]], bool]:
    def accept(cells: tuple[int, ...]) -> bool:
        near = {s for c in cells for s in hs.socket_cells(hs.socket_of.get(c), c)}
        return sum(len(hs.cell_by_id[c].gpus_free) for c in near if c in hs.cell_by_id) >= want

    return accept


def _preference(view: HostView, cell: CellState, strategy: Strategy) -> int:
    # Lower is better: best fit (least free capacity left) under pack; under
    # gpu-first cells that still have free GPUs come last (a GPU VM still gets
    # the GPU cells it needs: the set search adds them for the GPU count).
    if strategy is Strategy.GPU_FIRST:
        return len(cell.gpus_free) * 1_000_000 + view.caps[cell.id]
    return view.caps[cell.id]


def _unit(req: VmRequest) -> str:
    return "shared-pool pCPUs" if req.cpu_policy is CpuPolicy.SHARED else UNITS[req.thread_policy]


def _cpu_rejection(view: HostView, n: int, v: int, have: int) -> Rejection:
    hs, req = view.hs, view.req
    usable = [c for c in hs.cells if view.raw[c.id] >= 0]
    if not usable:
        return Rejection(
            hs.name,
            "cell-isolation",
            "every CPU cell is used by a tenant with cell isolation (or, "
            "for a cell-isolated tenant, by other tenants)",
        )
    best = max(usable, key=lambda c: (view.caps[c.id], -c.id))
    raw_ok = sum(1 for c in usable if view.raw[c.id] >= v)
    if view.reserve and raw_ok >= n:
        return Rejection(
            hs.name,
            "gpu-reserve",
            f"needs {n} cell(s) with {v} {_unit(req)}; gpu-first keeps the rest for free GPUs "
            f"(most left: cell {best.id} with {view.caps[best.id]})",
        )
    check = "cell-cpus" if len(usable) >= n else "cell-isolation"
    if n == 1:
        return Rejection(hs.name, check, f"cell {best.id}: needs {v} {_unit(req)}, {view.caps[best.id]} free")
    return Rejection(
        hs.name,
        check,
        f"needs {n} cells with {v} {_unit(req)} each, {have} have them (most free: cell {best.id}, "
        f"{view.caps[best.id]})",
    )


def _gpu_rejection(
    view: HostView, n: int, v: int, size: int, pages: int, ids: list[int], gpus: dict[int, int]
) -> Rejection:
    req = view.req
    most = sum(sorted((gpus[c] for c in ids), reverse=True)[:n])
    where = "cell" if n == 1 else f"cell set of {n}"
    return Rejection(
        view.hs.name,
        "gpus",
        f"no {where} with {req.gpus} free GPUs beside {v} {_unit(req)} and {pages} x {format_size_kib(size)} "
        f"pages per cell (at most {most} on such cells)",
    )
