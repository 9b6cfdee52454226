"""Host NUMA topology as frozen dataclasses, plus cpuset and size helpers.

Pure: no I/O. Every other layer speaks in these types. Units are in the
names (``memory_kib``, ``size_kib``); CPU sets are ``frozenset[int]`` and the
``"0-3,8"`` form only appears in :func:`parse_cpuset` / :func:`format_cpuset`.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from vnuma.errors import InvalidInputError
from vnuma.topology.devstates import NO_DEVICE_STATES, DeviceStates
from vnuma.topology.hmat import NO_HMAT, Hmat
from vnuma.topology.mig import MigGeometry
from vnuma.topology.nvlink import NvLink
from vnuma.topology.resctrl import NO_POLICY, NO_RESCTRL, Resctrl, ResctrlPolicy
from vnuma.topology.sizes import PAGE_1G as PAGE_1G
from vnuma.topology.sizes import PAGE_2M as PAGE_2M
from vnuma.topology.sizes import PAGE_4K as PAGE_4K
from vnuma.topology.sizes import count_of as count_of
from vnuma.topology.sizes import format_size_kib as format_size_kib
from vnuma.topology.sizes import parse_page_size as parse_page_size
from vnuma.topology.sizes import parse_size_kib as parse_size_kib
from vnuma.topology.sizes import shape_text as shape_text

KIB_PER_MIB = 1024
KIB_PER_GIB = 1024 * 1024
GPU_MEMORY_SUBTYPE = "GPUMemory"
"""hwloc's subtype of a NUMA node that is a GPU's own memory."""


class DeviceKind(StrEnum):
    """What a PCI device is for placement: GPUs/accelerators, NICs, the rest."""

    GPU = "gpu"
    NIC = "nic"
    OTHER = "other"


class Source(StrEnum):
    """Where a host's topology came from."""

    LIBVIRT = "libvirt"
    CAPABILITIES = "capabilities"
    HWLOC = "hwloc"
    TRACE = "trace"


def device_kind_for_class(pci_class: int | None, *, virtual_function: bool = False) -> DeviceKind:
    """Map a 24-bit PCI class code (0xCCSSPP) to a device kind.

    0x03xxxx display/3D controllers and 0x12xxxx processing accelerators
    (AI inference chips report 0x12) are GPUs; 0x02xxxx are NICs. A GPU's
    SR-IOV virtual function is not a GPU of its own (it carries a share of
    its physical function, e.g. a vGPU type): it is ``other``, so it is
    never counted or passed through as a whole GPU.
    """
    if pci_class is None:
        return DeviceKind.OTHER
    base = (pci_class >> 16) & 0xFF
    if base in (0x03, 0x12):
        return DeviceKind.OTHER if virtual_function else DeviceKind.GPU
    if base == 0x02:
        return DeviceKind.NIC
    return DeviceKind.OTHER


@dataclass(frozen=True, slots=True)
class Cpu:
    """One logical CPU (hardware thread); ``siblings`` includes ``id`` itself."""

    id: int
    socket: int | None
    die: int | None
    core: int | None
    siblings: frozenset[int]


@dataclass(frozen=True, slots=True)
class PagePool:
    """``count`` pages of ``size_kib`` KiB on one cell (4 KiB included)."""

    size_kib: int
    count: int


@dataclass(frozen=True, slots=True)
class MemoryCache:
    """A memory-side cache in front of a cell's memory (HMAT): level, size, line, associativity, policy."""

    level: int
    size_kib: int
    line_bytes: int
    associativity: str
    policy: str


@dataclass(frozen=True, slots=True)
class Cell:
    """One NUMA node. ``cpus`` sorted by id; empty for memory-only (CXL, HBM) cells.

    ``distances`` holds (other cell id, distance) pairs sorted by cell id,
    itself included (normally 10); empty when the source gives none.
    ``subtype`` is the memory's kind as hwloc names it (``DRAM``, ``HBM``,
    ``CXL-DRAM``...; None from capabilities); ``caches`` its memory-side caches.
    ``gpu`` is the PCI address (``dddd:bb:ss.f``, as :attr:`PciDevice.address`)
    of the GPU this CPU-less node belongs to: its own memory (hwloc's
    ``GPUMemory`` nodes: POWER9 with NVLink, Grace Hopper in NUMA mode; from
    libvirt, :mod:`vnuma.sources.gpunodes`), or a node that names the GPU as
    its HMAT initiator without memory of its own (Grace Hopper's nodes kept
    for MIG); None for every other cell. See :attr:`gpu_memory`.
    """

    id: int
    memory_kib: int
    cpus: tuple[Cpu, ...] = ()
    pages: tuple[PagePool, ...] = ()
    distances: tuple[tuple[int, int], ...] = ()
    subtype: str | None = None
    caches: tuple[MemoryCache, ...] = ()
    gpu: str | None = None

    @property
    def memory_only(self) -> bool:
        """True for a cell with memory and no CPUs."""
        return not self.cpus

    @property
    def empty(self) -> bool:
        """True for a node with no CPUs, no memory and no pages: one the kernel keeps for memory that may come
        (a Grace Hopper GPU's nodes kept for MIG). Kept as it is; it serves nothing."""
        return not self.cpus and self.memory_kib <= 0 and not any(p.count > 0 for p in self.pages)

    @property
    def gpu_memory(self) -> bool:
        """True for a GPU's own node (a GPU named, or hwloc's subtype ``GPUMemory`` without one).

        The one rule for such a cell: it is never guest memory and never a
        cold tier (it belongs to its GPU, and whoever has the GPU uses it).
        """
        return self.gpu is not None or self.subtype == GPU_MEMORY_SUBTYPE

    @property
    def cpu_ids(self) -> frozenset[int]:
        """Ids of this cell's CPUs."""
        return frozenset(c.id for c in self.cpus)

    def distance_to(self, other: int) -> int | None:
        """SLIT distance to cell ``other``, None when unknown."""
        for cell_id, dist in self.distances:
            if cell_id == other:
                return dist
        return None

    def pages_of(self, size_kib: int) -> int:
        """Number of pages of ``size_kib`` on this cell (0 if no such pool)."""
        for pool in self.pages:
            if pool.size_kib == size_kib:
                return pool.count
        return 0


@dataclass(frozen=True, slots=True)
class MdevType:
    """A mediated-device type a PCI function can create (a vGPU type): its instances available now."""

    id: str
    name: str
    device_api: str
    available: int


@dataclass(frozen=True, slots=True)
class Mdev:
    """A mediated device that exists on the host (a vGPU instance): its UUID, its type, the PCI function it
    was created on (a GPU, or one of its SR-IOV virtual functions) and its own IOMMU group."""

    uuid: str
    type: str
    parent: str
    iommu_group: int | None = None


@dataclass(frozen=True, slots=True)
class PciLink:
    """A PCIe link: negotiated speed (GT/s) and width (lanes), and what the port can do (None: not said).

    A negotiated link below the capability is downtrained (a reseated card, a bad riser, power saving).
    """

    speed_gts: float
    width: int
    max_speed_gts: float | None = None
    max_width: int | None = None

    @property
    def downtrained(self) -> bool:
        return (self.max_speed_gts is not None and self.speed_gts < self.max_speed_gts) or (
            self.max_width is not None and self.width < self.max_width
        )


@dataclass(frozen=True, slots=True)
class PciDevice:
    """A PCI function: ``address`` is ``dddd:bb:ss.f``; ids are ``0x`` hex strings.

    ``parent`` is the address of the upstream bridge/port (None when unknown),
    so devices under one root port or switch can be grouped. Where it sits in
    the PCIe tree (:mod:`vnuma.topology.pcie`): ``root_complex`` (``pci0000:16``,
    None when unknown) and ``bridges`` (nearest first, up to the root port).
    ``iommu_group`` and ``iommu_peers`` (the group's other members) say what
    VFIO passes through with it; ``vfs``/``vf_max`` (a PF's virtual functions)
    and ``pf`` (a VF's physical function) its SR-IOV relations; ``pci_class``
    the 24-bit class code; ``link`` its PCIe link; ``mdev_types`` the
    mediated-device (vGPU) types it offers; ``product_name`` the model as the
    host names it (a node device's ``<product>`` text, hwloc's ``PCIDevice``
    info: ``GA100GL [A30 PCIe]``), None when it names none.
    """

    address: str
    kind: DeviceKind
    vendor_id: str
    product_id: str
    numa_node: int | None
    parent: str | None = None
    root_complex: str | None = None
    bridges: tuple[str, ...] = ()
    iommu_group: int | None = None
    iommu_peers: tuple[str, ...] = ()
    pci_class: int | None = None
    vfs: tuple[str, ...] = ()
    vf_max: int | None = None
    pf: str | None = None
    link: PciLink | None = None
    mdev_types: tuple[MdevType, ...] = ()
    product_name: str | None = None

    def model(self) -> str:
        """``A30 PCIe (10de:20b7)``: the marketing name of ``product_name`` (pci.ids writes it in brackets after
        the chip's) or the whole name, and the PCI ids; the ids alone (``10de:20b7``) when it has no name."""
        ids = f"{self.vendor_id.removeprefix('0x')}:{self.product_id.removeprefix('0x')}"
        name = self.product_name or ""
        bracketed = name[name.find("[") + 1 : name.rfind("]")].strip() if "[" in name and name.endswith("]") else ""
        return f"{bracketed or name} ({ids})" if name else ids


@dataclass(frozen=True, slots=True)
class Host:
    """A hypervisor host: cells sorted by id, devices sorted by address.

    ``reserved_cpus`` are kept for the host itself; a ``cordoned`` host takes
    no new placements and no incoming moves (its VMs stay until moved away).
    ``resctrl``: its cache and memory-bandwidth allocation and monitoring
    (:mod:`vnuma.topology.resctrl`), empty when it reports none.
    """

    name: str
    cells: tuple[Cell, ...]
    devices: tuple[PciDevice, ...] = ()
    uri: str | None = None
    source: Source = Source.CAPABILITIES
    reserved_cpus: frozenset[int] = field(default_factory=frozenset)
    cordoned: bool = False
    resctrl: Resctrl = NO_RESCTRL
    hmat: Hmat = NO_HMAT
    """Rated latency and bandwidth between cells (:mod:`vnuma.topology.hmat`), empty when the host gives none."""
    resctrl_policy: ResctrlPolicy = NO_POLICY
    """The operator's cache ways for the host's own processes and memory-bandwidth limit (host reserve)."""
    mdevs: tuple[Mdev, ...] = ()
    """The mediated devices that exist on the host, by UUID (node devices with the ``mdev`` capability)."""
    gpu_profiles: tuple[MigGeometry, ...] = ()
    """The MIG geometries the inventory keeps for the models of this host's GPUs
    (:func:`vnuma.topology.partitions.with_gpu_profiles`); not part of the stored topology."""
    nvlinks: tuple[NvLink, ...] = ()
    """NVLinks between its GPUs (:mod:`vnuma.topology.nvlink`), empty when none are known."""
    device_states: DeviceStates = NO_DEVICE_STATES
    """Its tainted and cleaning devices and what a released device becomes (:mod:`vnuma.topology.devstates`);
    not part of the stored topology."""
    arch: str = "x86_64"
    """Its CPU architecture as libvirt names it (capabilities' ``<host><cpu><arch>``): its guests' arch."""

    @property
    def base_page_kib(self) -> int:
        """Its base page (the kernel's page size: 4 KiB, 64 KiB on a 64K-page arm64 kernel): the smallest size its
        cells' pools list (libvirt and hwloc list it first), 4 KiB when they list none. Hugepages are larger."""
        return min((p.size_kib for c in self.cells for p in c.pages), default=PAGE_4K)

    @property
    def cpu_ids(self) -> frozenset[int]:
        """Every CPU id on the host."""
        return frozenset(c.id for cell in self.cells for c in cell.cpus)

    @property
    def memory_kib(self) -> int:
        """Total memory over all cells but the GPUs' own (:attr:`Cell.gpu_memory`: never guest memory)."""
        return sum(c.memory_kib for c in self.cells if not c.gpu_memory)

    def cell(self, cell_id: int) -> Cell:
        """The cell with id ``cell_id``; KeyError if absent (a caller bug)."""
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    def devices_of(self, kind: DeviceKind) -> tuple[PciDevice, ...]:
        """Devices of one kind, in address order."""
        return tuple(d for d in self.devices if d.kind is kind)

    def cells_of(self, cpus: Iterable[int]) -> tuple[int, ...]:
        """Ids of the cells holding any of ``cpus`` (e.g. the cells an L3 cache id covers), in id order."""
        wanted = frozenset(cpus)
        return tuple(c.id for c in self.cells if not wanted.isdisjoint(c.cpu_ids))


_RANGE = re.compile(r"^\s*(\d{1,10})\s*(?:-\s*(\d{1,10})\s*)?$")
# Linux's NR_CPUS is at most 8,192: a cpuset naming more ids is a typo or an
# attack, and expanding "0-4294967295" would exhaust memory.
MAX_CPUSET_IDS = 1 << 16


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse libvirt/Linux cpuset syntax (``"0-3,8,^2"``) into a set of ids.

    Raises:
        InvalidInputError: malformed text, a reversed range, or more than
            MAX_CPUSET_IDS ids.
    """
    include: set[int] = set()
    exclude: set[int] = set()
    named = 0
    if not text.strip():
        return frozenset()
    for part in text.split(","):
        negate = part.strip().startswith("^")
        match = _RANGE.match(part.strip().lstrip("^"))
        if not match:
            raise InvalidInputError(f"bad cpuset {text!r}: cannot read {part.strip()!r}")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise InvalidInputError(f"bad cpuset {text!r}: range {lo}-{hi} is reversed")
        named += hi - lo + 1
        if named > MAX_CPUSET_IDS:
            raise InvalidInputError(f"bad cpuset {text[:40]!r}: names more than {MAX_CPUSET_IDS} CPU ids")
        (exclude if negate else include).update(range(lo, hi + 1))
    return frozenset(include - exclude)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Format ids as compact ranges: ``{0,1,2,3,8}`` -> ``"0-3,8"``."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that builds many small acyclic objects.

    Decoding a fleet's topologies and building the engine's per-core state
    allocate hundreds of thousands of such objects; each burst set off full
    collections that rescanned everything built so far (on 10,000 hosts,
    0.3-0.6 s of a 0.8 s decision). Nesting is safe: only the outermost block
    turns the collector back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
