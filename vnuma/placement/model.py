"""Placement vocabulary: tenants, VM requests and placements.

Pure: no I/O. These frozen types cross every layer: the engine returns them,
the inventory stores them as claims, the renderer turns them into XML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vnuma.placement.altmodel import Alternative
from vnuma.placement.partitionmodel import PartitionAsk, PartitionAssignment
from vnuma.topology import DeviceKind
from vnuma.topology.pcie import Level


class Isolation(StrEnum):
    """How a tenant shares hardware with other tenants.

    ``core``: no physical core (SMT sibling group) ever holds CPUs claimed by
    two tenants; ``cell``: the tenant's VMs get NUMA cells no other tenant
    uses; ``none``: siblings may be shared.
    """

    CORE = "core"
    CELL = "cell"
    NONE = "none"


class CpuPolicy(StrEnum):
    """``dedicated``: each vCPU pinned 1:1 to its own pCPU; ``shared``: vCPUs float; ``mixed``: the
    VM's ``dedicated_vcpus`` are pinned as a dedicated VM's, the others float as a shared VM's (Nova's
    ``mixed``; see :func:`mixed_split`)."""

    DEDICATED = "dedicated"
    SHARED = "shared"
    MIXED = "mixed"


class ThreadPolicy(StrEnum):
    """How dedicated vCPUs use SMT siblings."""

    PREFER = "prefer"
    ISOLATE = "isolate"
    REQUIRE = "require"


class GpuAffinity(StrEnum):
    """``required``: each GPU on one of the VM's cells; ``preferred``: try so;
    ``socket``: on the socket of one of the VM's cells."""

    REQUIRED = "required"
    PREFERRED = "preferred"
    SOCKET = "socket"


class NicFunction(StrEnum):
    """What a VM's NICs are: ``pf`` whole physical functions, or ``vf`` SR-IOV virtual functions (a VF is
    claimed alone; its PF stays with the host and is not passed through while any of its VFs is)."""

    PF = "pf"
    VF = "vf"


class ColdTier(StrEnum):
    """Which memory-only cells may back a VM's cold tier (:mod:`vnuma.placement.cold`): ``any`` capacity
    tier (slower than local DRAM by HMAT, or of kind ``cxl``/``unknown``), or ``cxl`` cells only."""

    ANY = "any"
    CXL = "cxl"


class EmulatorThreads(StrEnum):
    """``share``: emulator threads float over the VM's pCPUs; ``isolate``:
    one extra dedicated pCPU on the VM's first cell."""

    SHARE = "share"
    ISOLATE = "isolate"


class MemoryMode(StrEnum):
    """How a guest cell's memory is bound to host memory (libvirt's ``<memnode mode>``).

    ``strict``: only from its host cell; ``restrictive``: the same, enforced
    by cgroups only, so the nodeset can change while the VM runs (a live
    re-pin across cells); ``preferred``: from its host cell while that has
    room, then elsewhere; ``interleave``: page by page across all the VM's
    host cells (one bandwidth-heavy cell spread over several memory
    controllers). The claims follow: an interleaved cell's pages are
    claimed evenly on every host cell of the VM
    (:func:`vnuma.placement.ledger.claim.page_needs`); the others' on their own
    host cell (``preferred`` claims its cell too: what spills is not promised).
    ``restrictive`` is all cells or none (libvirt requires it on ``<memory>``
    exactly when a memnode uses it).
    """

    STRICT = "strict"
    RESTRICTIVE = "restrictive"
    PREFERRED = "preferred"
    INTERLEAVE = "interleave"


MAX_IOTHREADS = 64
"""The most I/O threads a VM may ask for (a sanity bound of vnuma's, not libvirt's)."""


class IoThreadPolicy(StrEnum):
    """Where a VM's I/O threads run: ``emulator``: with the emulator threads (their pCPUs);
    ``device-local``: on the pCPUs of the guest cell its first passed-through device (by PCI
    address) is attached to, the cell nearest that device."""

    EMULATOR = "emulator"
    DEVICE_LOCAL = "device-local"


class AntiAffinity(StrEnum):
    """How far apart the VMs of one replica group stay (:mod:`vnuma.placement.groups`)."""

    HOST = "host"
    CELL = "cell"


class Affinity(StrEnum):
    """Where the VMs of one replica group stay together (:mod:`vnuma.placement.groups`)."""

    HOST = "host"


@dataclass(frozen=True, slots=True)
class Tenant:
    """An owner of VMs, with its isolation level, optional quotas, and the cache slice and bandwidth cap its
    VMs get unless they ask their own (``llc_kib`` or ``llc_ways``, ``mem_bw``: :mod:`vnuma.placement.resctrl`)."""

    name: str
    isolation: Isolation = Isolation.CORE
    max_vcpus: int | None = None
    max_gpus: int | None = None
    llc_kib: int | None = None
    llc_ways: int | None = None
    mem_bw: int | None = None


@dataclass(frozen=True, slots=True)
class VmRequest:
    """What an operator asks for one VM.

    ``vcpus``/``memory_kib`` may be None only when ``gpus`` > 0: the engine
    then sizes the VM as its GPUs' proportional share of the cells holding
    them. ``numa_nodes`` None means auto (one cell if the VM fits in one,
    else the fewest, closest cells). ``page_size_kib`` None means ``large``
    (the largest hugepage size the chosen cells can back); 4 opts out.
    ``isolation`` is the tenant's, copied in so the engine needs no lookup.
    ``tenant`` None asks for a newcomer (a capacity probe, room for a VM of
    no tenant yet): only what no tenant holds, and never claimable.
    ``avoid_hosts`` and ``avoid_cells`` (host, cell id) keep the VM off those
    hosts and off those host cells as guest cells (the rebalance planner
    moves a VM off its own cells or host with them). ``group`` with
    ``anti_affinity`` keeps the VM away from the group's other VMs, with
    ``affinity`` on their host (:mod:`vnuma.placement.groups`). ``memory_modes`` is one mode for every
    guest cell, or one per guest cell (then ``numa_nodes`` says how many).
    ``iothreads``/``iothread_policy``: I/O threads to render and where they
    run (:class:`IoThreadPolicy`); they claim nothing. ``cell_vcpus`` and
    ``cell_memory_kib`` (with ``cell_gpus`` when it has GPUs) give each guest
    cell its own size: an asymmetric guest (``numa_nodes`` is their length,
    ``vcpus``/``memory_kib``/``gpus`` their sums); None splits evenly.
    """

    name: str
    tenant: str | None
    vcpus: int | None
    memory_kib: int | None
    gpus: int = 0
    numa_nodes: int | None = None
    cpu_policy: CpuPolicy = CpuPolicy.DEDICATED
    thread_policy: ThreadPolicy = ThreadPolicy.PREFER
    page_size_kib: int | None = None
    gpu_affinity: GpuAffinity = GpuAffinity.REQUIRED
    emulator_threads: EmulatorThreads = EmulatorThreads.SHARE
    host: str | None = None
    isolation: Isolation = Isolation.CORE
    avoid_hosts: frozenset[str] = frozenset()
    avoid_cells: frozenset[tuple[str, int]] = frozenset()
    group: str | None = None
    anti_affinity: AntiAffinity | None = None
    affinity: Affinity | None = None
    memory_modes: tuple[MemoryMode, ...] = (MemoryMode.STRICT,)
    iothreads: int = 0
    iothread_policy: IoThreadPolicy = IoThreadPolicy.EMULATOR
    cell_vcpus: tuple[int, ...] | None = None
    cell_memory_kib: tuple[int, ...] | None = None
    cell_gpus: tuple[int, ...] | None = None
    nics: int = 0
    nics_per_gpu: bool = False
    nic_affinity: Level = Level.PXB
    nic_function: NicFunction = NicFunction.PF
    """``nics`` NICs, or one per GPU (``nics_per_gpu``), each within ``nic_affinity`` of a GPU, physical or
    virtual functions (``nic_function``; :mod:`vnuma.placement.nics`)."""
    llc_ways: int | None = None
    llc_kib: int | None = None
    mem_bw: int | None = None
    """A slice of the last-level cache on every L3 domain the VM's vCPUs touch (``llc_ways`` ways, or
    ``llc_kib`` rounded up to whole granules there) and a memory-bandwidth cap there (``mem_bw``, in the
    host's unit: percent on Intel MBA); None: none asked (:mod:`vnuma.placement.resctrl`)."""
    cold_memory_kib: int = 0
    cold_tier: ColdTier = ColdTier.ANY
    """Memory for one more guest cell with no vCPUs, backed by a host memory-only cell of a capacity tier
    (:mod:`vnuma.placement.cold`); 0: none."""
    partition: PartitionAsk | None = None
    """GPU partitions instead of whole GPUs (``gpus`` is then 0): vGPU instances or MIG instances on GPUs of
    the VM's cells (:mod:`vnuma.placement.partitions`)."""
    dedicated_vcpus: frozenset[int] = frozenset()
    """Under ``mixed``: the vCPU ids pinned 1:1 (the others float); empty under the other policies."""
    alternatives: tuple[Alternative, ...] = ()
    """What the VM takes instead when this request fits on no host, in order (alternative 1, 2, ...;
    :mod:`vnuma.placement.alternatives`); empty: none."""

    @property
    def wants_nics(self) -> bool:
        return self.nics_per_gpu or self.nics > 0

    @property
    def takes_no_gpu(self) -> bool:
        """Neither whole GPUs nor partitions: the request ``gpu-first`` keeps off a cell's GPU share."""
        return self.gpus == 0 and self.partition is None

    def cell_sizes(self, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Each of ``n`` guest cells' vCPUs and memory (KiB): the request's own lists, else an even split.
        The one place a request is cut into guest cells (filters, pre-filter, fit and build ask it)."""
        assert self.vcpus is not None and self.memory_kib is not None
        if self.cell_vcpus is not None and self.cell_memory_kib is not None:
            return self.cell_vcpus, self.cell_memory_kib
        return (self.vcpus // n,) * n, (self.memory_kib // n,) * n

    @property
    def asymmetric(self) -> bool:
        """True when the guest cells were given sizes of their own."""
        return self.cell_vcpus is not None

    def memory_mode(self, guest_cell: int) -> MemoryMode:
        """The memory mode of guest cell ``guest_cell``."""
        modes = self.memory_modes
        return modes[guest_cell] if len(modes) > 1 else modes[0]


@dataclass(frozen=True, slots=True)
class CellAssignment:
    """One guest cell mapped onto one host cell.

    ``vcpus`` are guest vCPU ids; for ``dedicated`` VMs ``pcpus[i]`` is the
    pCPU of ``vcpus[i]``; for ``shared`` VMs ``pcpus`` is the set the cell's
    vCPUs float over (sorted); for ``mixed`` VMs the pins of the cell's
    dedicated vCPUs, then its float set (:func:`mixed_split`). Memory comes from the host cell's pool of
    ``page_size_kib`` pages: ``memory_kib // page_size_kib`` of them, all
    from that cell unless ``memory_mode`` is ``interleave`` (:class:`MemoryMode`).
    """

    guest_cell: int
    host_cell: int
    vcpus: tuple[int, ...]
    pcpus: tuple[int, ...]
    memory_kib: int
    page_size_kib: int
    memory_mode: MemoryMode = MemoryMode.STRICT

    @property
    def pages(self) -> int:
        """Pages of ``page_size_kib`` this cell claims."""
        return self.memory_kib // self.page_size_kib


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """A host PCI device given to the VM, attached to guest cell ``guest_cell``; ``peer_of``: the device whose
    IOMMU group brought it along (:mod:`vnuma.placement.iommu`), None for a device asked for."""

    address: str
    kind: DeviceKind
    guest_cell: int
    host_cell: int | None
    peer_of: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a VM goes: everything the inventory claims and the renderer needs.

    ``threads_per_core`` is the guest topology's threads value decided by
    the engine (2 when vCPUs sit on sibling pairs, else 1). ``tenant`` is
    None only for a newcomer's probe, which is never claimed.
    ``numa_nodes`` is the guest shape the VM asked for: None when it was
    placed with ``auto`` (a move may change its cell count), else the count
    it asked for, which every move keeps (cells split evenly, so the count
    fixes each cell's vCPUs and memory too). ``group``/``anti_affinity``/``affinity``: the
    replica group it belongs to and what it asked of it (:mod:`vnuma.placement.groups`), kept by every move.
    ``iothreads``/``iothread_policy``: as asked (:class:`VmRequest`), kept by every move.
    ``llc``/``mem_bw``: its cache slice and bandwidth cap per L3 domain (:mod:`vnuma.placement.resctrl`).
    """

    vm: str
    tenant: str | None
    host: str
    cells: tuple[CellAssignment, ...]
    emulator_pcpus: tuple[int, ...] = ()
    devices: tuple[DeviceAssignment, ...] = ()
    cpu_policy: CpuPolicy = CpuPolicy.DEDICATED
    thread_policy: ThreadPolicy = ThreadPolicy.PREFER
    threads_per_core: int = 1
    numa_nodes: int | None = None
    group: str | None = None
    anti_affinity: AntiAffinity | None = None
    affinity: Affinity | None = None
    iothreads: int = 0
    iothread_policy: IoThreadPolicy = IoThreadPolicy.EMULATOR
    llc: tuple[tuple[int, int], ...] = ()
    """(L3 cache id, ways) the VM's allocation group holds on each L3 domain its vCPUs touch."""
    mem_bw: tuple[tuple[int, int], ...] = ()
    """(memory-bandwidth domain id, cap) on each of those domains."""
    cold: tuple[CellAssignment, ...] = ()
    """The cold tier: at most one guest cell with memory and no vCPUs (guest cell id after the CPU cells) on a
    host memory-only cell, chosen under ``cold_tier`` (:mod:`vnuma.placement.cold`). Not in ``cells``:
    ``memory_kib`` and everything about vCPUs count the CPU cells; ``cold_kib`` this one."""
    cold_tier: ColdTier = ColdTier.ANY
    nic_affinity: Level | None = None
    nics_per_gpu: bool = False
    nic_function: NicFunction = NicFunction.PF
    """How its NICs were asked (None ``nic_affinity``: no NICs asked, or a placement from before vnuma
    recorded it): within which level of its GPUs, one per GPU or a count (the NICs it holds), physical or
    virtual functions. ``stats`` flags pairs worse than the level; every move asks the same again."""
    partitions: tuple[PartitionAssignment, ...] = ()
    """The GPU partitions it holds (vGPU or MIG instances), in the order asked."""
    dedicated_vcpus: frozenset[int] = frozenset()
    """Under ``mixed``: the vCPUs pinned 1:1 (see :func:`mixed_split` for how a cell lists their pCPUs)."""
    alternative: int = 0
    """Which of its request's alternatives the VM got (0: the request itself)."""
    request: VmRequest | Mapping[str, Any] | None = field(default=None, compare=False)
    """The request the VM keeps, as asked: every move asks it again (:func:`vnuma.placement.kept.kept_request`).
    The engine's own request object for a placement it made (a move keeps the one its VM had), or the stored
    document (:func:`vnuma.placement.asks.as_asked`'s form, read when a move asks it); None only for a placement
    built by hand."""
    # Worked out once from the fields above (the ledger and admission read them many times).
    dedicated_pcpus: frozenset[int] = field(init=False, repr=False, compare=False)
    """pCPUs this VM holds exclusively (vCPU pins and an isolated emulator pCPU)."""
    shared_pcpus: frozenset[int] = field(init=False, repr=False, compare=False)
    """pCPUs a ``shared`` VM (or a ``mixed`` VM's floating vCPUs) floats over (held non-exclusively)."""
    vcpus: int = field(init=False, repr=False, compare=False)
    """Total guest vCPUs."""

    def __post_init__(self) -> None:
        pinned = frozenset().union(*(c.pcpus for c in self.cells))
        if self.cpu_policy is CpuPolicy.MIXED:
            splits = [mixed_split(c, self.dedicated_vcpus) for c in self.cells]
            own = frozenset(x for pins, _floats in splits for x in pins.values())
            floats = frozenset(x for _pins, f in splits for x in f)
        else:
            dedicated = self.cpu_policy is CpuPolicy.DEDICATED
            own, floats = (pinned, frozenset()) if dedicated else (frozenset(), pinned)
        object.__setattr__(self, "dedicated_pcpus", own | (frozenset(self.emulator_pcpus) - pinned))
        object.__setattr__(self, "shared_pcpus", floats)
        object.__setattr__(self, "vcpus", sum(len(c.vcpus) for c in self.cells))

    @property
    def memory_kib(self) -> int:
        """Guest memory of the CPU cells (the cold tier apart: :attr:`cold_kib`)."""
        return sum(c.memory_kib for c in self.cells)

    @property
    def cold_kib(self) -> int:
        """Guest memory of the cold tier (0: none)."""
        return sum(c.memory_kib for c in self.cold)

    @property
    def host_cells(self) -> tuple[int, ...]:
        """Host cell ids, in guest cell order."""
        return tuple(c.host_cell for c in self.cells)

    @property
    def memory_modes(self) -> tuple[MemoryMode, ...]:
        """Each guest cell's memory mode, in guest cell order."""
        return tuple(c.memory_mode for c in sorted(self.cells, key=lambda c: c.guest_cell))


def mixed_split(cell: CellAssignment, dedicated_vcpus: frozenset[int]) -> tuple[dict[int, int], tuple[int, ...]]:
    """A ``mixed`` VM's guest cell as (dedicated vCPU -> its pCPU, the float set of its other vCPUs).

    Such a cell's ``pcpus`` lists the pins of its dedicated vCPUs first (in vCPU order), then its
    float set (sorted; empty when every vCPU of the cell is dedicated).
    """
    pinned = [v for v in cell.vcpus if v in dedicated_vcpus]
    return dict(zip(pinned, cell.pcpus, strict=False)), cell.pcpus[len(pinned) :]
