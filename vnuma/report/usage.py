"""Per-cell use, per-VM locality and fragmentation figures of a fleet.

Pure: no I/O. Everything is computed from hosts, placements and the
:class:`Fleet` built from them; fragmentation asks the real engine
(:func:`vnuma.placement.engine.place`) on a one-host dry fleet, so it can never
disagree with what ``vnuma place`` would do.

Definitions:

* claimed pCPUs of a cell: its CPUs that are neither reserved nor free
  (pins, isolated emulator pCPUs, siblings kept empty, the shared pool);
* largest free block of a cell: the largest one-cell dedicated VM of a new
  tenant the engine could still place on that cell (:func:`largest_vm`),
  None when not even one vCPU with one page fits;
* fragmentation of a host, per cell count k = 1..4: the largest k-cell VM
  the engine could still place there; for k = 1 the largest of the cells'
  free blocks;
* locality of a VM: the share of its vCPUs pinned inside their guest cell's
  host cell, of its memory on its own host cells, and of its devices whose
  NUMA node is one of its host cells (devices with no node are not counted);
  for a VM holding GPUs and NICs, each GPU's NIC and their PCIe level
  (:func:`nic_pairs`), flagged when worse than the level asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields

from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState, blocked_holder
from vnuma.placement.model import Isolation, Placement, VmRequest
from vnuma.placement.nics import NicPair, nic_pairs
from vnuma.placement.objectives import Strategy
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
    largest_free: Shape | None
    gpus_tainted: int = 0
    """Its tainted GPUs (held by a VM or not: never free)."""
    gpus_cleaning: int = 0
    """Its cleaning GPUs (never free)."""
    gpus_idle_blocked: int = 0
    """Its tainted or cleaning GPUs no VM holds (neither free nor used)."""


@dataclass(frozen=True, slots=True)
class HostUse:
    """Per-cell use of one host and, per cell count k, the largest VM the engine could still place."""

    host: str
    cells: tuple[CellUse, ...]
    fragmentation: tuple[tuple[int, Shape | None], ...]


@dataclass(frozen=True, slots=True)
class Locality:
    """Shares (0..1) of a VM's vCPUs, memory and devices on its own host cells (None: no devices), and its
    GPU–NIC pairs (:func:`nic_pairs`)."""

    vm: str
    tenant: str
    host: str
    cells: tuple[int, ...]
    vcpus_local: float
    memory_local: float
    devices_local: float | None
    nic_pairs: tuple[NicPair, ...] = ()


def cell_use(fleet: Fleet, host: str, *, largest: bool = True) -> tuple[CellUse, ...]:
    """Per-cell use of ``host`` as the fleet accounts it (CPU cells only, id order); ``largest=False``
    leaves each cell's largest free block out (None), which asks the engine and costs the most."""
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
                largest_free=largest_vm(fleet, host, 1, cs.id) if largest else None,
                **_blocked(hs, cs.gpus),
            )
        )
    return tuple(out)


def _blocked(hs: HostState, gpus: Iterable[str]) -> dict[str, int]:
    """A cell's tainted and cleaning GPUs, and how many of them no VM holds."""
    states = [(g, hs.blocked[g]) for g in gpus if g in hs.blocked]
    idle = sum(1 for g, s in states if hs.devices_taken.get(g) == blocked_holder(s) and not hs.partitions.get(g))
    return {"gpus_tainted": sum(1 for _g, s in states if s.value == "tainted"),
            "gpus_cleaning": sum(1 for _g, s in states if s.value == "cleaning"), "gpus_idle_blocked": idle}


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
        nic_pairs=nic_pairs(placement, host),
    )


def host_use(host: Host, placements: tuple[Placement, ...], isolation: dict[str, Isolation]) -> HostUse:
    """Per-cell use and fragmentation figures of one host (see :class:`UsageCache` for many hosts).

    Each cell's largest free block is :func:`largest_vm` on that cell alone;
    the one-cell fragmentation row is the largest of them (a one-cell VM
    lands on exactly one cell), so the two can never disagree. Work: per
    search, one probe per candidate bound (:func:`_max_true` tries the
    bound first) and a binary search only when the bound does not fit:
    O(log(threads) + sizes x log(pages) + gpus) engine calls at worst, per
    CPU cell and per cell count 2..4, on a one-host fleet.
    """
    fleet = Fleet([host], [p for p in placements if p.host == host.name], isolation)
    hs = fleet.state(host.name)
    cells = cell_use(fleet, host.name)
    blocks = [c.largest_free for c in cells if c.largest_free is not None]
    frag = [(1, max(blocks, key=_rank) if blocks else None)]
    frag += [(k, largest_vm(fleet, host.name, k)) for k in range(2, min(MAX_FRAGMENT_CELLS, len(hs.cells)) + 1)]
    return HostUse(host.name, cells, tuple(frag))


_NOT_THE_LEDGERS = frozenset({"name", "uri", "source"})
"""Host fields the ledger never reads: hosts differing only there share their figures."""


class UsageCache:
    """:func:`host_use` of many hosts, computed once per distinct host state.

    Hosts of one shape holding the same claims (most often: empty hosts of
    one model) have the same figures: the key is every field of the host the
    ledger reads (all but :data:`_NOT_THE_LEDGERS`: its cells, devices, reserved
    CPUs, cordon, device states, ...), and what each of its VMs holds with its
    tenant and isolation (VM names do not matter to a newcomer's probe). Each
    field's value is hashed once per distinct object (hosts read from one stored
    topology share them), not once per host.
    """

    def __init__(self, isolation: dict[str, Isolation]) -> None:
        self.isolation = isolation
        self._seen: dict[tuple[object, ...], HostUse] = {}
        self._ids: dict[int, int] = {}  # id() of a field value -> the index of its value
        self._values: dict[object, int] = {}
        self._alive: list[object] = []  # keeps every id() above meaning its object

    def _index(self, value: object) -> int:
        found = self._ids.get(id(value))
        if found is None:
            found = self._ids[id(value)] = self._values.setdefault(value, len(self._values))
            self._alive.append(value)
        return found

    def host_use(self, host: Host, placements: Iterable[Placement]) -> HostUse:
        """As :func:`host_use`, for the VMs of ``placements`` on ``host``."""
        mine = [p for p in placements if p.host == host.name]
        held = sorted(
            repr((p.tenant, self.isolation.get(p.tenant or ""), p.cells, p.emulator_pcpus, p.devices,
                  p.cpu_policy, p.thread_policy, tuple(sorted(p.dedicated_vcpus))))
            for p in mine
        )
        read = (f.name for f in dataclass_fields(host) if f.name not in _NOT_THE_LEDGERS)
        kept = tuple(self._index(getattr(host, name)) for name in read)
        key = (kept, tuple(held))
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = host_use(host, tuple(mine), self.isolation)
        return replace(found, host=host.name)


def _rank(shape: Shape) -> tuple[int, int, int, int]:
    """The order :func:`largest_vm` maximises in: vCPUs, then memory (larger pages first), then GPUs."""
    return (shape.vcpus, shape.memory_kib, shape.page_size_kib, shape.gpus)


def _probe(fleet: Fleet, host: str, k: int, vcpus: int, memory_kib: int, size: int, gpus: int,
           avoid: frozenset[tuple[str, int]] = frozenset()) -> bool:
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
        avoid_cells=avoid,
    )
    return place(req, fleet, Strategy.PACK).chosen is not None


def _max_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """Largest n in [lo, hi] with ok(n), assuming ok is monotone; None when not even ok(lo).

    ``hi`` (a bound that is often reached) is tried first, then ``lo``, then a binary search.
    """
    if hi < lo:
        return None
    if ok(hi):
        return hi
    if hi == lo or not ok(lo):
        return None
    hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _kth_largest(values: list[int], k: int) -> int:
    """The most each of k distinct cells can give (0 when fewer than k cells)."""
    return sorted(values, reverse=True)[k - 1] if len(values) >= k else 0


def largest_vm(fleet: Fleet, host: str, k: int, cell: int | None = None) -> Shape | None:
    """The largest k-cell dedicated VM the engine could still place on ``host`` (on ``cell`` alone when
    given, k = 1): most vCPUs, then most memory (any page size), then most GPUs; None when not even
    one vCPU with one page fits. Bounds: each of k cells gives at most the k-th largest free threads,
    free pages of a size, free GPUs; the engine decides."""
    hs = fleet.state(host)
    cells = [c for c in hs.cells if cell is None or c.id == cell]
    avoid = frozenset((host, c.id) for c in hs.cells if cell is not None and c.id != cell)
    sizes = sorted({s for c in cells for s, n in c.pages_free.items() if n > 0})
    if not sizes or len(cells) < k:
        return None

    def fits(vcpus: int, memory_kib: int, size: int, gpus: int = 0) -> bool:
        return _probe(fleet, host, k, vcpus, memory_kib, size, gpus, avoid)

    small = sizes[0]
    threads = _kth_largest([c.free_core_threads + sum(c.partial_free.values()) for c in cells], k)
    per_cell = _max_true(1, threads, lambda v: fits(v * k, k * small, small))
    if per_cell is None:
        return None
    vcpus = per_cell * k
    best: tuple[int, int] = (k * small, small)
    for size in reversed(sizes):  # largest pages first: a smaller pool that cannot beat them is not searched
        most = _kth_largest([c.pages_free.get(size, 0) for c in cells], k)
        if most * size * k <= best[0]:
            continue
        pages = _max_true(1, most, lambda n, size=size: fits(vcpus, k * n * size, size))
        if pages is not None:
            best = max(best, (k * pages * size, size))
    free_gpus = sum(sorted((len(c.gpus_free) for c in cells), reverse=True)[:k]) + len(hs.loose_gpus_free)
    gpus = next((g for g in range(free_gpus, 0, -1) if fits(vcpus, best[0], best[1], g)), 0)
    return Shape(vcpus, best[0], best[1], gpus)
