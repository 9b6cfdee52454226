"""One host's static shape (cells, distances, sockets, GPUs) plus its claim state.

Pure: no I/O. Built once per host by :class:`vnuma.placement.ledger.fleet.Fleet`;
the engine reads it, only the fleet changes it.

Hosts of one hardware shape (equal cells, devices and reserved CPUs) share a
:class:`HostShape`: the static tables and totals are computed once per shape,
and a host's per-cell claim state (:class:`CellState` objects, one per core
too) is only built, as a copy of the shape's pristine cells, when the fleet
first records a claim there (``HostState.built`` tells). Until then the host
is unclaimed, so it equals the shape's :attr:`HostShape.template` in every
respect but its name and index, and reading its per-cell state reads the
template's: reading never changes a host.
"""

from __future__ import annotations

from vnuma.placement.cold import ColdCell, Pools, cold_cells, cold_pools
from vnuma.placement.groups import NO_GROUPS, GroupIndex
from vnuma.placement.iommu import placed_mates
from vnuma.placement.ledger.cell import CellState, cell_states
from vnuma.placement.model import Placement, ThreadPolicy
from vnuma.placement.partitionmodel import PartitionAssignment
from vnuma.placement.partitions import gpu_offers
from vnuma.placement.resctrl import ResctrlUse, cell_domains
from vnuma.topology import PAGE_4K, DeviceKind, Host, PciDevice
from vnuma.topology.devstates import DeviceStateKind
from vnuma.topology.tiers import UNRATED_LATENCY_NS, cpu_cell_ratings

UNKNOWN_REMOTE_DISTANCE = 20  # libvirt's default when a host reports no SLIT table
NOTHING_BLOCKED: dict[str, DeviceStateKind] = {}


def blocked_holder(state: DeviceStateKind) -> str:
    """What ``devices_taken`` names as the holder of a blocked device no VM holds."""
    return f"({state.value} device)"


class HostShape:
    """What every host of one hardware shape shares: static tables, totals, pristine cells."""

    __slots__ = (
        "addresses",
        "base_page_kib",
        "cell_cpus",
        "cells",
        "cold",
        "cold_pools",
        "cpu_ids",
        "cpu_index",
        "device_at",
        "distance",
        "domains",
        "gpu_home",
        "gpu_offers",
        "gpus_total",
        "host",
        "hugepage_sizes",
        "iommu_mates",
        "loose_gpus",
        "mem_total_kib",
        "min_pair_distance",
        "near",
        "neighbors",
        "nics",
        "ratings",
        "rdma_near",
        "socket_of",
        "template",
        "threads_total",
        "vf_nics",
        "width",
    )

    def __init__(self, host: Host) -> None:
        self.host = host
        self.cells: tuple[CellState, ...] = cell_states(host)
        self.cpu_index: dict[int, int] = {cpu: i for i, c in enumerate(self.cells) for cpu in c.core_at}
        """Placeable CPU -> the position of its cell in ``cells`` (every host of the shape alike)."""
        self.cell_cpus: dict[int, frozenset[int]] = {c.id: c.cpu_ids for c in host.cells}
        """Every cell's CPUs, reserved ones included (admission's ``topology`` check)."""
        self.cpu_ids = host.cpu_ids
        self.addresses = frozenset(d.address for d in host.devices)
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
        self.cold: tuple[ColdCell, ...] = cold_cells(host)
        """The memory-only cells as the cold tier sees them (:mod:`vnuma.placement.cold`)."""
        self.cold_pools: Pools = cold_pools(host)
        """Their pages, unclaimed."""
        self.domains = cell_domains(host)
        """Each CPU cell's L3 cache ids (:mod:`vnuma.placement.resctrl`)."""
        self.ratings = cpu_cell_ratings(host)
        """HMAT's (bandwidth, latency) per ordered pair of CPU cells, None without (the cell choice's first
        criterion where present: :func:`vnuma.placement.order.cellset_key`)."""
        self.socket_of: dict[int, int | None] = {}
        for c in self.cells:
            sockets = {cpu.socket for cpu in host.cell(c.id).cpus}
            self.socket_of[c.id] = sockets.pop() if len(sockets) == 1 else None
        on_cells = {a for c in self.cells for a in c.gpus}
        gpus = host.devices_of(DeviceKind.GPU)
        self.gpu_home: dict[str, int | None] = {d.address: d.numa_node for d in gpus}
        self.loose_gpus: tuple[str, ...] = tuple(sorted(d.address for d in gpus if d.address not in on_cells))
        self.gpus_total = len(gpus)
        self.device_at: dict[str, PciDevice] = {d.address: d for d in host.devices}
        self.gpu_offers = gpu_offers(host)
        """Physical GPU -> the vGPU types and MIG geometry it offers (:mod:`vnuma.placement.partitions`)."""
        self.iommu_mates = placed_mates(host.devices)
        """GPU or NIC -> the GPUs and NICs sharing its IOMMU group (:mod:`vnuma.placement.iommu`)."""
        self.nics: tuple[PciDevice, ...] = tuple(d for d in host.devices if d.kind is DeviceKind.NIC and d.pf is None)
        """NICs a VM may be given whole (physical functions), in address order."""
        self.vf_nics: tuple[PciDevice, ...] = tuple(
            d for d in host.devices if d.kind is DeviceKind.NIC and d.pf is not None
        )
        """NICs' SR-IOV virtual functions, in address order."""
        self.near: dict[tuple[str, bool], tuple[tuple[int, PciDevice], ...]] = {}
        """(GPU, virtual functions?) -> (level rank, NIC) for every NIC (or VF), best first, filled as asked
        (:func:`vnuma.placement.nicchoice.near`)."""
        self.rdma_near: dict[tuple[str, str], tuple[PciDevice, ...]] = {}
        """(GPU, level) -> the NICs (physical functions) within that level of it, filled as asked
        (:func:`vnuma.placement.nicchoice.rdma_ready`)."""
        self.threads_total = sum(c.threads_total for c in self.cells)
        self.mem_total_kib = sum(size * n for c in self.cells for size, n in c.pages_total.items())
        self.width = max((c.width for c in self.cells), default=1)
        self.base_page_kib = host.base_page_kib
        self.hugepage_sizes: tuple[int, ...] = tuple(
            sorted({s for c in self.cells for s, n in c.pages_total.items() if s > self.base_page_kib and n > 0},
                   reverse=True)
        )
        """The hugepage sizes (above the base page) some CPU cell holds pages of, largest first (a pool of none
        backs nothing)."""
        self.template = HostState(host, -1, self)
        """An unclaimed host of this shape, never claimed on: what an unbuilt host answers."""
        self.template._own(self.cells)


class ShapeCache:
    """Finds the :class:`HostShape` of hosts, one per distinct shape (identical objects first).

    A shape is read-only once built, so one cache serves every ledger of the process (:data:`SHAPES`): the
    one-host ledger of each claim then builds no shape its host already has. It forgets everything past
    ``limit`` shapes (a process that saw that many hardware models and reservations)."""

    def __init__(self, limit: int = 1024) -> None:
        self._by_id: dict[tuple[object, ...], HostShape] = {}
        self._by_value: dict[object, HostShape] = {}
        self._limit = limit

    def shape(self, host: Host) -> HostShape:
        """The shared shape of ``host`` (hosts decoded from one topology share cell objects)."""
        fast = (id(host.cells), id(host.devices), id(host.hmat), id(host.resctrl), host.resctrl_policy,
                host.reserved_cpus, host.gpu_profiles)
        found = self._by_id.get(fast)
        if found is None:
            key = (host.cells, host.devices, host.hmat, host.resctrl, host.resctrl_policy, host.reserved_cpus,
                   host.gpu_profiles)
            found = self._by_value.get(key)
            if found is None:
                if len(self._by_value) >= self._limit:
                    self._by_value.clear()
                    self._by_id.clear()
                found = self._by_value[key] = HostShape(host)
            # The shape keeps a host holding these very objects alive, so their ids stay unique.
            held = found.host
            if held.cells is host.cells and held.devices is host.devices and held.hmat is host.hmat and (
                held.resctrl is host.resctrl
            ):
                self._by_id[fast] = found
        return found


SHAPES = ShapeCache()
"""The process's shapes (every :class:`~vnuma.placement.ledger.fleet.Fleet` finds its hosts' here)."""


class HostState:
    """Shape and claims of one host; ``index`` is its position in name order."""

    __slots__ = (
        "_copied_cells",
        "blocked",
        "built",
        "cell_by_id",
        "cells",
        "cold_free",
        "devices_taken",
        "distance",
        "floaters",
        "gpu_home",
        "gpu_offers",
        "gpus_free",
        "gpus_total",
        "group_index",
        "groups",
        "holders",
        "host",
        "hugepage_sizes",
        "index",
        "loose_gpus_free",
        "mem_total_kib",
        "min_pair_distance",
        "name",
        "neighbors",
        "partitions",
        "resctrl_use",
        "shape",
        "socket_of",
        "threads_total",
        "width",
    )

    def __init__(self, host: Host, index: int, shape: HostShape | None = None) -> None:
        shape = shape if shape is not None else HostShape(host)
        self.host = host
        self.name = host.name
        self.index = index
        self.shape = shape
        self.built = False
        self.blocked = host.device_states.blocked if host.device_states.devices else NOTHING_BLOCKED
        """Address -> state of its tainted and cleaning devices (:mod:`vnuma.topology.devstates`): kept out of
        the free GPUs and held in ``devices_taken`` under :func:`blocked_holder` unless a VM holds them
        (:func:`.booking.block`)."""
        self.groups: dict[str, list[Placement]] = {}
        """The VMs of each replica group on this host (:mod:`vnuma.placement.groups`)."""
        self.group_index: GroupIndex = NO_GROUPS
        """The VMs of each replica group on every host its fleet knows of (the fleet's own index)."""
        self.resctrl_use = ResctrlUse()
        """The cache ways, classes of service and bandwidth caps its VMs hold (:mod:`vnuma.placement.resctrl`)."""
        # Static tables are shared by every host of the shape and never changed.
        self.distance = shape.distance
        self.min_pair_distance = shape.min_pair_distance
        self.neighbors = shape.neighbors
        self.socket_of = shape.socket_of
        self.gpu_home = shape.gpu_home
        self.gpu_offers = shape.gpu_offers
        self.hugepage_sizes = shape.hugepage_sizes
        self.gpus_total = shape.gpus_total
        self.gpus_free = shape.gpus_total
        self.threads_total = shape.threads_total
        self.mem_total_kib = shape.mem_total_kib
        self.width = shape.width
        template = getattr(shape, "template", None)  # unset while the shape builds its own template
        if template is not None:
            # Unbuilt, the host reads its shape's pristine state: reading never changes a host,
            # and build() gives it containers of its own before the fleet changes anything.
            self._copied_cells = None
            self.cells = template.cells
            self.cell_by_id = template.cell_by_id
            self.loose_gpus_free = template.loose_gpus_free
            self.holders = template.holders
            self.floaters = template.floaters
            self.devices_taken = template.devices_taken
            self.cold_free = template.cold_free
            self.partitions = template.partitions

    def page_sizes(self, asked_kib: int | None) -> tuple[int, ...]:
        """The page sizes a request of page size ``asked_kib`` takes here, preferred first: None (``large``) its
        hugepage sizes; 4 KiB (``4K`` or ``base``: no hugepages) its base page, whatever the kernel's page size
        (64 KiB on a 64K-page arm64 kernel); any other size as asked. The one rule for choosing and sizing."""
        if asked_kib is None:
            return self.hugepage_sizes
        return (self.shape.base_page_kib if asked_kib == PAGE_4K else asked_kib,)

    def build(self) -> None:
        """Give the host state of its own (the fleet calls this before its first change); its cells stay
        the shape's pristine ones until the fleet changes each (:meth:`own_cell`)."""
        if not self.built:
            self._own(self.shape.cells)
            self._copied_cells = set()

    def own_cell(self, cell: CellState) -> CellState:
        """This host's own copy of ``cell``, made the first time the fleet changes it."""
        copied = self._copied_cells
        if copied is None or cell.col in copied:
            return cell
        mine = cell.fresh_copy()
        self.cells = (*self.cells[: cell.col], mine, *self.cells[cell.col + 1 :])
        self.cell_by_id[mine.id] = mine
        copied.add(cell.col)
        return mine

    def _own(self, cells: tuple[CellState, ...]) -> None:
        self._copied_cells = None  # None: every cell is this state's own (the shape's template)
        self.cells: tuple[CellState, ...] = cells
        self.cell_by_id = {c.id: c for c in self.cells}
        self.loose_gpus_free: list[str] = list(self.shape.loose_gpus)
        self.holders: dict[int, str] = {}
        """pCPU -> the VM holding it exclusively."""
        self.floaters: dict[int, set[str]] = {}
        """pCPU -> the floating (``shared``) VMs whose pool holds it."""
        self.devices_taken: dict[str, str] = {}
        """PCI address -> the VM it is passed through to (every device kind)."""
        self.cold_free: Pools = dict(self.shape.cold_pools)
        """Free pages per (memory-only cell, page size): what cold tiers may still claim."""
        self.partitions: dict[str, list[tuple[str, PartitionAssignment]]] = {}
        """Physical GPU -> the (VM, partition) it holds (:mod:`vnuma.placement.partitions`)."""
        self.built = True

    def held_pcpus(self, p: Placement) -> frozenset[int]:
        """Every pCPU ``p`` keeps from other VMs: dedicated pins, an isolated emulator pCPU and, under the
        ``isolate`` thread policy, the other placeable threads of their cores (kept empty)."""
        if p.thread_policy is not ThreadPolicy.ISOLATE:
            return p.dedicated_pcpus
        held = set(p.dedicated_pcpus)
        for cpu in p.dedicated_pcpus:
            cell = self.cell_of(cpu)
            if cell is not None:
                held.update(cell.core(cpu).cpus)
        return frozenset(held)

    def gpu_cell(self, address: str) -> CellState | None:
        """The CPU cell whose GPUs include GPU ``address``; None for a loose GPU (no NUMA node, or one with
        no placeable CPU: it is in ``loose_gpus_free``). The one rule for which pool a GPU is counted in."""
        home = self.gpu_home.get(address)
        cell = self.cell_by_id.get(home) if home is not None else None
        return cell if cell is not None and address in cell.gpus else None

    def cell_of(self, cpu: int) -> CellState | None:
        """The CPU cell holding placeable CPU ``cpu`` (None for a reserved or unknown CPU)."""
        i = self.shape.cpu_index.get(cpu)
        return None if i is None else self.cells[i]

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

    def rated(self, cells: tuple[int, ...]) -> tuple[int, int, int, int]:
        """HMAT's verdict on a cell set, lower better: between its cells (minus the lowest bandwidth, the
        highest latency) over every ordered pair of two of them, then the same within them (each cell's own
        memory). A pair HMAT does not rate counts as bandwidth 0 and the worst latency; all four are 0 on a
        host whose HMAT rates no pair of CPU cells (and the first two for one cell)."""
        ratings = self.shape.ratings
        if ratings is None:
            return (0, 0, 0, 0)
        unrated = (0, UNRATED_LATENCY_NS)
        own = [ratings.get((a, a), unrated) for a in cells]
        between = [ratings.get((a, b), unrated) for a in cells for b in cells if a != b] or [(0, 0)]
        return (
            -min(bw for bw, _lat in between), max(lat for _bw, lat in between),
            -min(bw for bw, _lat in own), max(lat for _bw, lat in own),
        )

    def rated_pair(self, a: int, b: int) -> tuple[int, int]:
        """:meth:`rated` of the pair ``a``, ``b`` alone, without their own cells' figures."""
        ratings = self.shape.ratings
        if ratings is None:
            return (0, 0)
        unrated = (0, UNRATED_LATENCY_NS)
        ab, ba = ratings.get((a, b), unrated), ratings.get((b, a), unrated)
        return (-min(ab[0], ba[0]), max(ab[1], ba[1]))

    def is_adjacent(self, cells: tuple[int, ...]) -> bool:
        """True when no pair of the cells is farther apart than the host's closest pair."""
        return len(cells) < 2 or self.max_distance(cells) <= self.min_pair_distance
