"""Exact fit of one sized request on one host: the filter pipeline, then the cell set.

Pure: no I/O, reads the ledger only. A fit is decided on per-cell
capacities (exact, tenant-aware, see :meth:`CellState.capacity`) by the
filters of :mod:`.filters`; pCPUs and devices are picked afterwards, only
for the chosen host (:mod:`.build`), and admission checks what was picked.

Memory comes from one page pool per VM: an explicit size, or for ``large``
(``page_size_kib`` None) the largest hugepage size whose pages divide the
per-cell memory and that every chosen cell can back, then smaller hugepage
sizes; ``large`` never falls back to 4 KiB pages (as Nova's ``large``):
those must be asked for, so a VM never silently loses its hugepages.

The cell set (``gpus``): the closest set of the candidate cells holding the
request's free GPUs (:mod:`.cellsets`). Under ``gpu-first`` a GPU VM may not
strand other free GPUs of its cells (:mod:`.gpus`); refused only for that,
the host's rejection is ``gpu-strand``. GPU affinity ``preferred`` or
``socket`` falls back to any set (``socket``: with the GPUs on the sets'
sockets) when no set holds the GPUs. A request with guest cells of their
own sizes, or with interleaved guest cells, takes a cell set only in a
guest order where each host cell holds its guest cell's vCPUs, GPUs and
the pages the claims will take (interleaved pages spread over the set).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vnuma.placement.attempt import Attempt
from vnuma.placement.cellsets import rank_cells
from vnuma.placement.devices import gpu_split, pick_devices
from vnuma.placement.filters import CELL_FILTERS, COLD_MEMORY, PARTITIONS, SIZE_FILTERS, STAGE
from vnuma.placement.gpus import strands_gpus, threads_taken
from vnuma.placement.iommu import GroupSplit
from vnuma.placement.ledger.claim import pages_by_cell
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import GpuAffinity, Isolation, MemoryMode, VmRequest
from vnuma.placement.nicchoice import NicShortage
from vnuma.placement.objectives import Strategy
from vnuma.placement.order import cell_preference
from vnuma.placement.pagefilters import NO_HUGEPAGES
from vnuma.placement.partitionchoice import PartitionShortage, pick_partitions
from vnuma.placement.refusal import gist
from vnuma.placement.result import Rejection
from vnuma.placement.rules import KEEP_PER_GPU
from vnuma.placement.view import HostView
from vnuma.topology import format_size_kib


@dataclass(frozen=True, slots=True)
class HostFit:
    """A host that can take the VM: host cells in guest order, the page size, adjacency, and the criterion
    that chose these cells over the next best set (:func:`vnuma.placement.order.decided_by`)."""

    state: HostState
    cells: tuple[int, ...]
    page_size_kib: int
    adjacent: bool
    decided_by: str = "only-choice"


def further(old: Rejection | None, new: Rejection) -> Rejection:
    """The rejection that got further down the pipeline (the older one on a tie)."""
    if old is None or STAGE.get(new.check, -1) > STAGE.get(old.check, -1):
        return new
    return old


def fit_host(
    hs: HostState, req: VmRequest, strategy: Strategy, isolations: Mapping[str, Isolation], n: int | None = None
) -> HostFit | Rejection:
    """Fit ``req`` (sized: vcpus and memory set) on ``hs`` with ``n`` guest cells
    (default: the request's, or the fewest that fit when it says auto).

    The host-level filters (``host``, ``avoid``) are the caller's: the engine
    runs them per host, before fits it shares between hosts of one shape; but
    ``cold-memory`` is asked here too, since the pre-filtered path runs none of
    them and its arrays know nothing of memory-only cells.
    """
    assert req.vcpus is not None and req.memory_kib is not None
    for needed, host_filter in ((req.cold_memory_kib, COLD_MEMORY), (req.partition, PARTITIONS)):
        refused = host_filter.apply(hs, req) if needed else None
        if refused is not None:
            return refused
    view = HostView(hs, req, strategy, isolations)
    nodes = n or req.numa_nodes
    if nodes is not None:
        return _fit_n(view, nodes, strategy)
    best: Rejection | None = None
    tried = 0
    for k in range(1, len(hs.cells) + 1):
        if req.vcpus % k or req.memory_kib % (4 * k):
            continue
        found = _fit_n(view, k, strategy)
        if isinstance(found, HostFit):
            return found
        if found.gist == NO_HUGEPAGES:  # no split makes up for a host without hugepages
            return found
        tried += 1
        best = further(best, found)
    if best is not None and tried > 1:
        return Rejection(best.host, best.check, f"{best.reason} (and no split over up to {k} cells fits)", best.hint,
                         gist(best), best.missing)
    return best or Rejection(hs.name, "numa-nodes", f"{req.vcpus} vCPUs cannot be split evenly over its cells")


def _fit_n(view: HostView, n: int, strategy: Strategy) -> HostFit | Rejection:
    req = view.req
    assert req.vcpus is not None and req.memory_kib is not None
    if req.cell_vcpus is not None and len(req.cell_vcpus) != n:
        given = len(req.cell_vcpus)
        return Rejection(view.hs.name, "numa-nodes", f"its per-cell sizes give {given} guest cells, not {n}")
    a = Attempt(view, n, *req.cell_sizes(n))
    for unit in CELL_FILTERS:
        refused = unit.apply(a)
        if refused is not None:
            return refused
    cells, anchors = a.cells, a.anchors
    worst: Rejection | None = None
    for size in a.sizes:
        a.cells, a.anchors, a.size = cells, anchors, size
        found = _fit_size(a, strategy)
        if isinstance(found, HostFit):
            return found
        worst = worst if worst and STAGE[worst.check] >= STAGE[found.check] else found
    assert worst is not None
    return worst


def _fit_size(a: Attempt, strategy: Strategy) -> HostFit | Rejection:
    for unit in SIZE_FILTERS:
        refused = unit.apply(a)
        if refused is not None:
            return refused
    view, hs, req = a.view, a.view.hs, a.view.req
    ids = [c.id for c in a.cells]
    gpus = {c.id: len(c.gpus_free) for c in hs.cells}
    keep = strategy is Strategy.GPU_FIRST and req.gpus > 0
    pref = {c.id: cell_preference(c, view.caps[c.id], strategy) for c in a.cells}
    ordered = a.n > 1 and (req.asymmetric or MemoryMode.INTERLEAVE in req.memory_modes)
    nics: Accept | None = None  # GPUs as the builder takes them (whole IOMMU groups) with their NICs, or partitions
    if req.wants_nics or (req.gpus and hs.shape.iommu_mates):
        nics = _picks(lambda cells: pick_devices(hs, cells, req, a.vs), NicShortage, GroupSplit)
    elif req.partition is not None:
        nics = _picks(lambda cells: pick_partitions(hs, cells, req), PartitionShortage)
    strand = _no_stranding(hs, req, a.vs) if keep else None

    def sets(need: int, test: Accept | None) -> tuple[tuple[int, ...], str] | None:
        return rank_cells(hs, ids, a.n, need, gpus, pref, anchors=a.anchors, accept=_in_order(a, ordered, test))

    ranked = sets(req.gpus, _both(strand, nics))
    stranding = ranked is None and keep and sets(req.gpus, nics) is not None
    if ranked is None and req.gpus and req.gpu_affinity is not GpuAffinity.REQUIRED:
        socket = _socket_test(hs, req.gpus) if req.gpu_affinity is GpuAffinity.SOCKET else None
        ranked = sets(0, _both(socket, nics))
        if ranked is not None and req.gpu_affinity is GpuAffinity.PREFERRED and hs.gpus_free < req.gpus:
            ranked = None
    if ranked is not None:
        cells, why = ranked
        if ordered:
            cells = guest_order(a, cells) or cells  # accepted: an order exists
        return HostFit(hs, cells, a.size, hs.is_adjacent(cells), why)
    best = sets(0, None) if req.partition is not None else None
    if best is not None:
        try:
            pick_partitions(hs, best[0], req)
        except PartitionShortage as err:
            short = err.short
            return a.reject("partitions", f"{err} (and on every other cell set)", gist=short.gist,
                            missing=short.missing)
    short = _device_shortage(hs, req, a, sets(req.gpus, None)) if nics is not None and not stranding else None
    if short is not None:
        return a.reject(*short)
    if stranding:
        return a.reject(
            "gpu-strand",
            f"gpu-first: every cell set with {req.gpus} free GPUs would leave other free GPUs there without "
            f"{float(KEEP_PER_GPU):.0%} of their pCPU share",
        )
    most = sum(sorted((gpus[c] for c in ids), reverse=True)[: a.n])
    where = "cell" if a.n == 1 else f"cell set of {a.n}"
    reason = (f"no {where} with {req.gpus} free GPUs beside {a.v} {view.unit()} and {a.m // a.size} x "
              f"{format_size_kib(a.size)} pages per cell (at most {most} on such cells)")
    loose = _loose_gpus(hs, req)
    return a.reject("gpus", f"{reason}; {loose}" if loose else reason, gist=loose and LOOSE_GPUS,
                    missing=req.gpus - most)


LOOSE_GPUS = "the host's free GPUs have no NUMA node: `--gpu-affinity preferred` places them"
"""Why GPU affinity ``required`` cannot use a host's free GPUs that no CPU cell holds."""


def _loose_gpus(hs: HostState, req: VmRequest) -> str | None:
    """:data:`LOOSE_GPUS`, naming them, when the request's GPUs are free on the host only counting GPUs with no
    NUMA node (a PCIe locality spanning several nodes, or none reported), which GPU affinity ``required`` finds
    on no cell; None otherwise."""
    loose = hs.loose_gpus_free
    if req.gpu_affinity is not GpuAffinity.REQUIRED or not loose or hs.gpus_free < req.gpus:
        return None
    verb = "has" if len(loose) == 1 else "have"
    return (f"GPU {', '.join(loose)} of the host {verb} no NUMA node (its PCIe locality spans several nodes, "
            "or none is reported), so GPU affinity required finds it on no cell: "
            "`--gpu-affinity preferred` places it")


Accept = Callable[[tuple[int, ...]], bool]


def _both(first: Accept | None, second: Accept | None) -> Accept | None:
    if first is None or second is None:
        return first or second
    return lambda cells: first(cells) and second(cells)


def _in_order(a: Attempt, ordered: bool, test: Accept | None) -> Accept | None:
    """``test`` asked of a cell set in the guest order the fit returns it in: for ``ordered`` requests the
    first order :func:`guest_order` finds (none: refused), else the order given (the set search's)."""
    if not ordered:
        return test

    def accept(cells: tuple[int, ...]) -> bool:
        order = guest_order(a, cells)
        return order is not None and (test is None or test(order))

    return accept


def guest_order(a: Attempt, cells: tuple[int, ...]) -> tuple[int, ...] | None:
    """``cells`` in a guest order where each host cell holds its guest cell, None when no order does.

    The cell filters asked each cell for the smallest guest cell; guest cells of their own sizes
    (``--cell-vcpus/--cell-memory/--cell-gpus``) need the vCPUs, pages and GPUs of their own, and
    interleaved guest cells take pages from every cell of the set (:func:`pages_by_cell`), so a
    strict cell beside one takes more. Orders tried: the one given, then (up to 6 cells) every other.
    """
    view, req, size = a.view, a.view.req, a.size
    by_id = view.hs.cell_by_id
    cap = view.caps if view.reserve else view.raw
    gpus = req.cell_gpus

    def holds(order: tuple[int, ...]) -> bool:
        if a.anchors is not None and order[0] not in a.anchors:  # an isolated emulator pCPU goes on guest cell 0
            return False
        if any(cap[c] < a.vs[g] for g, c in enumerate(order)):
            return False
        if gpus is not None and any(len(by_id[c].gpus_free) < gpus[g] for g, c in enumerate(order)):
            return False
        needs = pages_by_cell([(c, size, a.ms[g] // size, req.memory_mode(g)) for g, c in enumerate(order)])
        return all(view.pages(by_id[c], s) >= n for (c, s), n in needs.items())

    orders = itertools.permutations(cells) if len(cells) <= 6 else iter((cells,))
    return next((order for order in orders if holds(order)), None)


def _no_stranding(hs: HostState, req: VmRequest, vs: tuple[int, ...]) -> Accept:
    def accept(cells: tuple[int, ...]) -> bool:
        taken = threads_taken(req, hs, vs)
        return not strands_gpus(hs, cells, gpu_split(hs, cells, req, taken), taken)

    return accept


def _picks(pick: Callable[[tuple[int, ...]], object], *short: type[Exception]) -> Accept:
    """Accept a cell set on which ``pick`` (the builder's own choice of devices or partitions) finds what the
    request asks for; ``short`` are the exceptions by which it says it cannot."""

    def accept(cells: tuple[int, ...]) -> bool:
        try:
            pick(cells)
        except short:
            return False
        return True

    return accept


def _device_shortage(
    hs: HostState, req: VmRequest, a: Attempt, ranked: tuple[tuple[int, ...], str] | None
) -> tuple[str, str] | None:
    """(check, reason) of the best set that fits but for its devices (``ranked``: NICs near enough, whole
    IOMMU groups); None when no set fits even so."""
    if ranked is None:
        return None
    try:
        pick_devices(hs, ranked[0], req, a.vs)
    except NicShortage as err:
        return "nic-affinity", f"{err} (and on every other cell set)"
    except GroupSplit as err:
        return "iommu-group", f"{err} (and on every other cell set)"
    return None


def _socket_test(hs: HostState, want: int) -> Accept:
    def accept(cells: tuple[int, ...]) -> bool:
        near = {s for c in cells for s in hs.socket_cells(hs.socket_of.get(c), c)}
        return sum(len(hs.cell_by_id[c].gpus_free) for c in near if c in hs.cell_by_id) >= want

    return accept
