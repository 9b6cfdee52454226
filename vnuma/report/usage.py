"""Per-cell use, per-VM locality and fragmentation figures of a fleet.

Pure: no I/O. Everything is computed from hosts, placements and the
:class:`Fleet` built from them; fragmentation asks the real engine
(:func:`vnuma.placement.engine.place`) on a one-host dry fleet, so it can never
disagree with what ``vnuma place`` would do.

Definitions:

* claimed pCPUs of a cell: its CPUs that are neither reserved nor free
  (pins, isolated emulator pCPUs, siblings kept empty, the shared pool);
* largest free block of a cell: the largest one-cell dedicated VM that cell
  could still take, ignoring tenants: the threads of its whole free cores,
  the free memory of its biggest free page pool, its free GPUs;
* locality of a VM: the share of its vCPUs pinned inside their guest cell's
  host cell, of its memory on its own host cells, and of its devices whose
  NUMA node is one of its host cells (devices with no node are not counted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, Strategy, VmRequest
from vnuma.topology import Host

MAX_FRAGMENT_CELLS = 4


@dataclass(frozen=True, slots=True)
class Shape:
    """A VM size: vCPUs, memory (from pages of ``page_size_kib``) and GPUs."""

    vcpus: int
    memory_kib: int
    page_size_kib: int
    gpus: int


@dataclass(frozen=True, slots=True)
class PoolUse:
    """One page pool of a cell: pages in total and claimed."""

    size_kib: int
    total: int
    claimed: int

    @property
    def free(self) -> int:
        """Pages still free."""
        return self.total - self.claimed


@dataclass(frozen=True, slots=True)
class CellUse:
    """How much of one CPU cell is claimed, and its largest free block."""

    cell: int
    pcpus_total: int
    pcpus_claimed: int
    pcpus_free: int
    pcpus_reserved: int
    pools: tuple[PoolUse, ...]
    gpus_total: int
    gpus_free: int
    largest_free: Shape


@dataclass(frozen=True, slots=True)
class HostUse:
    """Per-cell use of one host and, per cell count k, the largest VM the engine could still place."""

    host: str
    cells: tuple[CellUse, ...]
    fragmentation: tuple[tuple[int, Shape | None], ...]


@dataclass(frozen=True, slots=True)
class Locality:
    """Shares (0..1) of a VM's vCPUs, memory and devices on its own host cells (None: no devices)."""

    vm: str
    tenant: str
    host: str
    cells: tuple[int, ...]
    vcpus_local: float
    memory_local: float
    devices_local: float | None


def cell_use(fleet: Fleet, host: str) -> tuple[CellUse, ...]:
    """Per-cell use of ``host`` as the fleet accounts it (CPU cells only, id order)."""
    hs = fleet.state(host)
    free = fleet.free_pcpus(host)
    out: list[CellUse] = []
    for cs in hs.cells:
        cpus = hs.host.cell(cs.id).cpu_ids
        reserved = len(cpus & hs.host.reserved_cpus)
        n_free = len(cpus & free)
        pools = tuple(
            PoolUse(size, total, total - cs.pages_free.get(size, 0))
            for size, total in sorted(cs.pages_total.items())
        )
        out.append(
            CellUse(
                cell=cs.id,
                pcpus_total=len(cpus),
                pcpus_claimed=len(cpus) - reserved - n_free,
                pcpus_free=n_free,
                pcpus_reserved=reserved,
                pools=pools,
                gpus_total=len(cs.gpus),
                gpus_free=len(cs.gpus_free),
                largest_free=_largest_block(cs.free_core_threads, pools, len(cs.gpus_free)),
            )
        )
    return tuple(out)


def _largest_block(threads: int, pools: tuple[PoolUse, ...], gpus: int) -> Shape:
    best = max(pools, key=lambda p: (p.free * p.size_kib, p.size_kib), default=None)
    if best is None:
        return Shape(threads, 0, 0, gpus)
    return Shape(threads, best.free * best.size_kib, best.size_kib, gpus)


def locality(placement: Placement, host: Host) -> Locality:
    """Shares of a VM's vCPUs, memory and devices on its own host cells."""
    cells = frozenset(placement.host_cells)
    cell_of = {cpu.id: cell.id for cell in host.cells for cpu in cell.cpus}
    vcpus_local = 0.0
    for ca in placement.cells:
        if ca.pcpus:
            inside = sum(1 for p in ca.pcpus if cell_of.get(p) == ca.host_cell)
            vcpus_local += len(ca.vcpus) * inside / len(ca.pcpus)
    memory_local = sum(ca.memory_kib for ca in placement.cells if ca.host_cell in cells)
    home = {d.address: d.numa_node for d in host.devices}
    known = [home.get(d.address) for d in placement.devices if home.get(d.address) is not None]
    return Locality(
        vm=placement.vm,
        tenant=placement.tenant,
        host=placement.host,
        cells=placement.host_cells,
        vcpus_local=vcpus_local / placement.vcpus if placement.vcpus else 1.0,
        memory_local=memory_local / placement.memory_kib if placement.memory_kib else 1.0,
        devices_local=sum(1 for n in known if n in cells) / len(known) if known else None,
    )


def host_use(host: Host, placements: tuple[Placement, ...], isolation: dict[str, Isolation]) -> HostUse:
    """Per-cell use and fragmentation figures of one host.

    Work: per cell count k <= 4, a binary search over vCPUs, then over pages
    for each page size, then a scan over GPUs: O(log(threads) + sizes x
    log(pages) + gpus) engine calls on a one-host fleet.
    """
    fleet = Fleet([host], [p for p in placements if p.host == host.name], isolation)
    ncells = len(fleet.state(host.name).cells)
    frag = tuple((k, largest_vm(fleet, host.name, k)) for k in range(1, min(MAX_FRAGMENT_CELLS, ncells) + 1))
    return HostUse(host.name, cell_use(fleet, host.name), frag)


def _probe(fleet: Fleet, host: str, k: int, vcpus: int, memory_kib: int, size: int, gpus: int) -> bool:
    req = VmRequest(
        name="probe",
        tenant=None,
        vcpus=vcpus,
        memory_kib=memory_kib,
        gpus=gpus,
        numa_nodes=k,
        page_size_kib=size,
        host=host,
        isolation=Isolation.CORE,
    )
    return place(req, fleet, Strategy.PACK).chosen is not None


def _max_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest n in [lo, hi] with ok(n), assuming ok is monotone and ok(lo) holds."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _memory_probe(fleet: Fleet, host: str, k: int, vcpus: int, size: int) -> Callable[[int], bool]:
    return lambda n: _probe(fleet, host, k, vcpus, k * n * size, size, 0)


def largest_vm(fleet: Fleet, host: str, k: int) -> Shape | None:
    """The largest k-cell dedicated VM the engine could still place on ``host``: most vCPUs,
    then most memory (any page size), then most GPUs; None when not even the smallest fits."""
    hs = fleet.state(host)
    sizes = sorted({s for c in hs.cells for s, n in c.pages_free.items() if n > 0})
    if not sizes:
        return None
    small = sizes[0]
    threads = max(c.free_core_threads + sum(c.partial_free.values()) for c in hs.cells)
    if threads < 1 or not _probe(fleet, host, k, k, k * small, small, 0):
        return None
    per_cell = _max_true(1, threads, lambda v: _probe(fleet, host, k, v * k, k * small, small, 0))
    vcpus = per_cell * k
    best: tuple[int, int] = (k * small, small)
    for size in sizes:
        most = max(c.pages_free.get(size, 0) for c in hs.cells)
        if most < 1 or most * size * k <= best[0] or not _probe(fleet, host, k, vcpus, k * size, size, 0):
            continue
        pages = _max_true(1, most, _memory_probe(fleet, host, k, vcpus, size))
        best = max(best, (k * pages * size, size))
    gpus = 0
    for g in range(len(fleet.free_gpus(host)), 0, -1):
        if _probe(fleet, host, k, vcpus, best[0], best[1], g):
            gpus = g
            break
    return Shape(vcpus, best[0], best[1], gpus)
