"""Admission: may this placement be claimed on its host, given what is claimed there now?

Pure: no I/O. This is the one rule for what fits. The engine asks it about
the placement it built before choosing it; :meth:`Fleet.add` asks it before
recording a placement (simulations, rebalance plans); the inventory asks it
inside the claiming transaction, on a one-host ledger built from the rows
read under the host lock. The database constraints stay behind it as the
last line.

Checks, in order; each is a named unit and its name tags the refusal:

``topology``
    the placement names this host, and only cells, CPUs and devices it has;
``cordoned``
    the host is not cordoned (a cordoned host takes no new placement, not
    even a re-pin of its own VMs: they only leave it); the engine's host
    filter of the same name asks :func:`cordon_refusal` too;
``shape``
    it is well formed in itself: at least one guest cell, each with at
    least one vCPU and a whole number (at least one) of pages; no vCPU in
    two guest cells; dedicated vCPUs pinned 1:1 and no pCPU pinned twice (a
    ``mixed`` VM's pins apart from its float sets, :func:`vnuma.placement.mixed.mixed_shape_problem`); no
    device listed twice (two guest cells may share a host cell, as an adopted
    domain can: their pages add up);
``reserved``
    no pCPU the host keeps for itself;
``pcpus``
    every pCPU it holds (see :meth:`HostState.held_pcpus`) is free; a
    floating (``shared``, or a ``mixed`` VM's float set) VM's pCPUs are free
    or in the shared pool, and never ones it holds itself;
``core-isolation``
    no physical core it touches is used by another tenant, unless both
    have isolation ``none`` (the core's bucket, :mod:`.cell`);
``cell-isolation``
    no cell it touches is used by another tenant when either has isolation ``cell``;
``cell-pages``
    each (cell, page size) has the pages it takes (:func:`page_needs`: an
    interleaved guest cell takes from all the VM's host cells; the cold tier
    from its memory-only cell);
``devices``
    each device is the host's and not passed through to another VM;
``partitions``
    each GPU partition fits its GPU beside those held there, and no GPU is
    both passed through whole and partitioned
    (:func:`vnuma.placement.partitions.partition_problem`);
``sr-iov``
    a NIC's physical function and its virtual functions are never both passed
    through (:func:`vnuma.placement.nics.sriov_problem`);
``iommu-group``
    no IOMMU group is split (:func:`vnuma.placement.iommu.group_problem`: a
    device's companions go with it, GPUs or NICs sharing a group go together);
``resctrl``
    the cache ways and memory-bandwidth caps it takes are free on every L3
    domain its vCPUs touch (:func:`vnuma.placement.resctrl.refusal`);
``group-mode``
    a group is either affine or anti-affine (:func:`vnuma.placement.groups.group_clash`:
    a VM asking affinity of a group whose VMs asked anti-affinity, or the
    reverse; the inventory raises ``GroupModeError`` for it, not a conflict);
``group``
    a replica group's rule (:func:`vnuma.placement.groups.group_refusal`):
    under affinity the host is the one the group's other VMs are on (the
    ledger's group index knows them on every host; a claim's one-host ledger
    is told them); under anti-affinity no other VM of the group on the host,
    or on the VM's cells;
``quota``
    the tenant's quotas (:mod:`vnuma.placement.quota`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from vnuma.placement.groups import MODE_HINT, group_clash, group_refusal
from vnuma.placement.iommu import group_problem
from vnuma.placement.ledger.cell import CoreState, tenant_bucket
from vnuma.placement.ledger.host import HostState
from vnuma.placement.mixed import mixed_shape_problem
from vnuma.placement.model import CpuPolicy, Isolation, MemoryMode, Placement, Rejection, Tenant
from vnuma.placement.nics import sriov_problem
from vnuma.placement.partitions import partition_problem
from vnuma.placement.quota import Usage, quota_problem
from vnuma.placement.resctrl import refusal as slice_refusal
from vnuma.topology import DeviceKind, format_cpuset, format_size_kib

T = TypeVar("T")
REPLACE_HINT = "the host changed since the placement was computed; place the VM again"


class Claim:
    """One placement as admission sees it: the host's ledger, the tenant, what the tenant holds, and
    (worked out once for every check) the pCPUs it holds, their cores and the cells it touches."""

    __slots__ = ("cells", "cores", "held", "hs", "isolations", "p", "pcpus", "tenant", "used")

    def __init__(
        self, p: Placement, hs: HostState, tenant: Tenant, isolations: Mapping[str, Isolation], used: Usage
    ) -> None:
        self.p, self.hs, self.tenant, self.isolations, self.used = p, hs, tenant, isolations, used
        self.held = hs.held_pcpus(p) if p.host == hs.name else frozenset()
        self.pcpus = self.held | p.shared_pcpus if p.shared_pcpus else self.held
        """Every pCPU it holds or floats over."""
        self.cores: dict[int, CoreState] = {}
        """Each of those (placeable) pCPUs' core."""
        cells = {ca.host_cell for ca in p.cells}
        index, host_cells = hs.shape.cpu_index, hs.cells
        for cpu in self.pcpus:
            i = index.get(cpu)
            if i is not None:
                cell = host_cells[i]
                self.cores[cpu] = cell.cores[cell.core_at[cpu]]
                cells.add(cell.id)
        self.cells = frozenset(cells)
        """The CPU cells it uses: its guest cells' host cells and the cells of its pCPUs."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a check refuses a claim; ``hint`` says what to do about it."""

    reason: str
    hint: str | None = None


class Check(Protocol):
    """A named admission check."""

    name: str

    def check(self, c: Claim) -> Refusal | None:
        """Why ``c`` is refused, or None."""
        ...


class Topology:
    """``topology``: the placement names this host and only cells, CPUs and devices it has."""

    name = "topology"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse cells, CPUs or devices the host lacks."""
        name, shape = c.hs.name, c.hs.shape
        if c.p.host != name:
            return Refusal(f"the placement is for host {c.p.host!r}, not {name!r}")
        for ca in c.p.cells:
            cpus = shape.cell_cpus.get(ca.host_cell)
            if cpus is None:
                return Refusal(f"host {name!r} has no NUMA cell {ca.host_cell}", REPLACE_HINT)
            if not cpus.issuperset(ca.pcpus):
                stray = format_cpuset(set(ca.pcpus) - cpus)
                return Refusal(f"host {name!r}: cell {ca.host_cell} has no CPU(s) {stray}", REPLACE_HINT)
            if ca.host_cell not in c.hs.cell_by_id:
                return Refusal(f"host {name!r}: cell {ca.host_cell} has no placeable CPUs", REPLACE_HINT)
        for ca in c.p.cold:
            if not any(cold.id == ca.host_cell for cold in shape.cold):
                return Refusal(f"host {name!r} has no memory-only cell {ca.host_cell} for the cold tier", REPLACE_HINT)
        if not shape.cpu_ids.issuperset(c.p.emulator_pcpus):
            stray = format_cpuset(set(c.p.emulator_pcpus) - shape.cpu_ids)
            return Refusal(f"host {name!r} has no CPU(s) {stray}", REPLACE_HINT)
        for dev in c.p.devices:
            if dev.address not in shape.addresses:
                return Refusal(f"host {name!r} has no device {dev.address}", REPLACE_HINT)
        return None


def cordon_refusal(hs: HostState) -> Refusal | None:
    """Why a cordoned host takes nothing (the one cordon rule: admission and the engine's filter)."""
    if hs.host.cordoned:
        return Refusal(
            f"host {hs.name!r} is cordoned: it takes no new placements or incoming moves",
            hint=f"`vnuma host uncordon {hs.name}` to place there again",
        )
    return None


class Cordoned:
    """``cordoned``: the host takes placements (see :func:`cordon_refusal`)."""

    name = "cordoned"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse any claim on a cordoned host."""
        return cordon_refusal(c.hs)


class Shape:
    """``shape``: guest cells with vCPUs and whole pages; pins 1:1, never twice."""

    name = "shape"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a malformed placement."""
        p = c.p
        if not p.cells:
            return Refusal("the placement has no guest cells")
        if len(frozenset().union(*(ca.vcpus for ca in p.cells))) != p.vcpus:
            return Refusal("a vCPU is in two guest cells")
        if p.cpu_policy is CpuPolicy.MIXED:
            mixed = mixed_shape_problem(p)
            if mixed is not None:
                return Refusal(mixed)
        for ca in p.cells:
            g = ca.guest_cell
            if not ca.vcpus or not ca.pcpus:
                return Refusal(f"guest cell {g} has no vCPUs")
            if p.cpu_policy is CpuPolicy.DEDICATED and len(ca.vcpus) != len(ca.pcpus):
                return Refusal(f"guest cell {g} pins {len(ca.vcpus)} vCPUs to {len(ca.pcpus)} pCPUs")
            if ca.page_size_kib <= 0 or ca.memory_kib < ca.page_size_kib or ca.memory_kib % ca.page_size_kib:
                return Refusal(
                    f"guest cell {g} memory {ca.memory_kib} KiB is not a whole number of "
                    f"{ca.page_size_kib} KiB pages"
                )
        # The fast test first (no pCPU or device twice); the slow one only to name what is.
        pins = sum(len(ca.pcpus) for ca in p.cells)
        if p.cpu_policy is CpuPolicy.DEDICATED and pins != len(frozenset().union(*(ca.pcpus for ca in p.cells))):
            twice = _twice(x for ca in p.cells for x in ca.pcpus)
            if twice:
                return Refusal(f"pCPU(s) {format_cpuset(twice)} pinned to more than one vCPU")
        if len(p.cold) > 1:
            return Refusal("the placement has more than one cold guest cell")
        for ca in p.cold:
            if ca.vcpus or ca.pcpus:
                return Refusal(f"cold guest cell {ca.guest_cell} has vCPUs")
            if ca.guest_cell != len(p.cells):
                return Refusal(f"cold guest cell {ca.guest_cell} is not the last guest cell ({len(p.cells)})")
            if ca.page_size_kib <= 0 or ca.memory_kib < ca.page_size_kib or ca.memory_kib % ca.page_size_kib:
                return Refusal(f"cold guest cell memory {ca.memory_kib} KiB is not a whole number of pages")
        doubled = _twice(d.address for d in p.devices) if len(p.devices) > 1 else []
        if doubled:
            return Refusal(f"device(s) {', '.join(sorted(doubled))} listed more than once")
        return None


def _twice(items: Iterable[T]) -> list[T]:
    """The items that occur more than once."""
    seen: set[T] = set()
    twice: list[T] = []
    for x in items:
        if x in seen:
            twice.append(x)
        else:
            seen.add(x)
    return twice


class Reserved:
    """``reserved``: no pCPU the host keeps for itself."""

    name = "reserved"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse reserved pCPUs."""
        kept = c.hs.host.reserved_cpus
        if kept and not (kept.isdisjoint(c.pcpus) and kept.isdisjoint(c.p.emulator_pcpus)):
            reserved = (c.pcpus | frozenset(c.p.emulator_pcpus)) & kept
            return Refusal(f"host {c.hs.name!r}: CPU(s) {format_cpuset(reserved)} are reserved", REPLACE_HINT)
        return None


class Pcpus:
    """``pcpus``: held pCPUs are free; a floating VM's pCPUs are free or in the shared pool."""

    name = "pcpus"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse pCPUs other VMs hold."""
        hs, cores = c.hs, c.cores
        taken = [cpu for cpu in c.held if cpu not in cores[cpu].free]
        if not taken and c.p.shared_pcpus:
            both = c.p.shared_pcpus & c.held  # a mixed VM floating over what it keeps empty (isolate)
            if both:
                return Refusal(f"host {hs.name!r}: pCPU(s) {format_cpuset(both)} are both held and floated over")
            taken = [cpu for cpu in c.p.shared_pcpus if cpu in hs.holders]
        if not taken:
            return None
        taken.sort()
        holder = hs.holders.get(taken[0]) or min(hs.floaters.get(taken[0], ()), default=None)
        by = f"VM {holder!r}" if holder is not None else "another VM"
        return Refusal(
            f"host {hs.name!r}: pCPU(s) {format_cpuset(taken)} are already held by {by}", REPLACE_HINT
        )


class CoreIsolation:
    """``core-isolation``: a physical core is shared by two tenants only when both have isolation ``none``."""

    name = "core-isolation"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a core another tenant's VMs use, unless both tenants share cores."""
        bucket = tenant_bucket(c.p.tenant, c.tenant.isolation)
        clashes = [cpu for cpu, core in c.cores.items() if core.bucket is not None and core.bucket != bucket]
        if clashes:
            cpu = min(clashes)
            core = c.cores[cpu]
            other = min((t for t in core.owners if t != c.p.tenant), default=c.p.tenant)
            return Refusal(
                f"host {c.hs.name!r}: VM {c.p.vm!r} (tenant {c.p.tenant!r}, {c.tenant.isolation} isolation) would "
                f"share the physical core of pCPU {cpu} (pCPUs {format_cpuset(core.cpus)}) with tenant {other!r} "
                f"({c.isolations.get(other, Isolation.CORE)} isolation)",
                REPLACE_HINT,
            )
        return None


class CellIsolation:
    """``cell-isolation``: a cell is shared by two tenants only when neither has isolation ``cell``."""

    name = "cell-isolation"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a cell another tenant uses when either side isolates cells."""
        by_id = c.hs.cell_by_id
        if all(by_id[i].usable_by(c.p.tenant, c.tenant.isolation, c.isolations) for i in c.cells):
            return None
        for cell_id in sorted(c.cells):  # the first cell (by id) that refuses is named
            cell = by_id[cell_id]
            if cell.usable_by(c.p.tenant, c.tenant.isolation, c.isolations):
                continue
            other = cell.cell_isolation_clash(c.p.tenant, c.tenant.isolation, c.isolations)
            if other is not None:
                return Refusal(
                    f"host {c.hs.name!r}: VM {c.p.vm!r} (tenant {c.p.tenant!r}, {c.tenant.isolation} isolation) "
                    f"would share NUMA cell {cell_id} with tenant {other!r} "
                    f"({c.isolations.get(other, Isolation.CORE)} isolation)",
                    REPLACE_HINT,
                )
        return None


class CellPages:
    """``cell-pages``: each (cell, page size) has the pages the placement takes."""

    name = "cell-pages"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse pages a cell no longer has free."""
        by_id, cold = c.hs.cell_by_id, c.hs.cold_free
        short = [
            (key, need, free)
            for key, need in page_needs(c.p).items()
            if need > (free := by_id[key[0]].pages_free.get(key[1], 0) if key[0] in by_id else cold.get(key, 0))
        ]
        if short:
            (cell_id, size), need, free = min(short)
            return Refusal(
                f"host {c.hs.name!r}: cell {cell_id} has {max(free, 0)} free pages of {format_size_kib(size)}, "
                f"VM {c.p.vm!r} needs {need}",
                REPLACE_HINT,
            )
        return None


class Devices:
    """``devices``: each device is free."""

    name = "devices"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse devices given to other VMs."""
        for dev in c.p.devices:
            holder = c.hs.devices_taken.get(dev.address)
            if holder is not None:
                return Refusal(
                    f"host {c.hs.name!r}: device {dev.address} is already given to VM {holder!r}", REPLACE_HINT
                )
        return None


class Partitions:
    """``partitions``: one mode per GPU; vGPU instances on free VFs or within the PF's instances; MIG
    instances at free allowed starts (:mod:`vnuma.placement.partitions`)."""

    name = "partitions"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a partition that does not fit, or a whole GPU that holds partitions."""
        if not c.p.partitions and not c.hs.partitions:
            return None
        problem = partition_problem(c.hs, c.p)
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}", REPLACE_HINT)


class Sriov:
    """``sr-iov``: a PF and its VFs are never both passed through."""

    name = "sr-iov"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a PF whose VFs are held, or a VF whose PF is."""
        problem = sriov_problem(c.hs.shape.device_at, c.hs.devices_taken, c.p) if c.p.devices else None
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}")


class IommuGroup:
    """``iommu-group``: VFIO passes IOMMU groups whole."""

    name = "iommu-group"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a placement that would split an IOMMU group."""
        problem = group_problem(c.hs.shape.device_at, c.p) if c.p.devices else None
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}")


class Slices:
    """``resctrl``: its cache slice and bandwidth cap fit on every L3 domain it touches (:mod:`..resctrl`)."""

    name = "resctrl"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse ways, classes of service or bandwidth the host does not have left."""
        p = c.p
        if not p.llc and not p.mem_bw:
            return None
        vcpu_pcpus = [x for ca in p.cells for x in ca.pcpus]
        problem = slice_refusal(c.hs.host, c.hs.resctrl_use, p.vm, p.llc, p.mem_bw, vcpu_pcpus)
        return None if problem is None else Refusal(problem.reason, problem.hint)


class GroupMode:
    """``group-mode``: a group is either affine or anti-affine (:func:`vnuma.placement.groups.group_clash`)."""

    name = "group-mode"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse affinity in an anti-affine group, and the reverse."""
        p = c.p
        clash = group_clash(c.hs.group_index, p.vm, p.group, p.affinity, p.anti_affinity) if p.group else None
        return None if clash is None else Refusal(clash, MODE_HINT)


class Group:
    """``group``: the replica group's other VMs allow it here (:mod:`vnuma.placement.groups`)."""

    name = "group"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a VM its group keeps off this host or these cells."""
        p = c.p
        refused = group_refusal(c.hs, p.vm, p.group, p.anti_affinity, p.host_cells, p.affinity) if p.group else None
        return None if refused is None else Refusal(refused.reason, refused.hint)


class Quota:
    """``quota``: the tenant's vCPU and GPU quotas."""

    name = "quota"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse what would take the tenant over a quota."""
        if c.tenant.max_vcpus is None and c.tenant.max_gpus is None:
            return None
        problem = quota_problem(c.tenant, c.used, c.p.vcpus, gpu_count(c.p))
        return Refusal(problem.message, problem.hint) if problem is not None else None


ADMISSION: tuple[Check, ...] = (
    Topology(),
    Cordoned(),
    Shape(),
    Reserved(),
    Pcpus(),
    CoreIsolation(),
    CellIsolation(),
    CellPages(),
    Devices(),
    Partitions(),
    Sriov(),
    IommuGroup(),
    Slices(),
    GroupMode(),
    Group(),
    Quota(),
)
"""The admission checks in the order they run."""


def page_needs(p: Placement) -> dict[tuple[int, int], int]:
    """Pages the placement takes per (host cell, page size KiB), the cold tier's memory-only cell included,
    zero counts left out (:func:`pages_by_cell`)."""
    cells = p.cells
    if any(ca.memory_mode is MemoryMode.INTERLEAVE for ca in cells):
        cells = tuple(sorted(cells, key=lambda c: c.guest_cell))
    needs = pages_by_cell(
        [(ca.host_cell, ca.page_size_kib, ca.pages if ca.page_size_kib > 0 else 0, ca.memory_mode) for ca in cells]
    )
    for ca in p.cold:
        key = (ca.host_cell, ca.page_size_kib)
        if ca.page_size_kib > 0 and ca.pages > 0:
            needs[key] = needs.get(key, 0) + ca.pages
    return needs


def pages_by_cell(guest_cells: Sequence[tuple[int, int, int, MemoryMode]]) -> dict[tuple[int, int], int]:
    """Pages per (host cell, page size KiB) of guest cells given in guest order as (host cell, page size,
    pages, memory mode); zero counts left out.

    A guest cell takes its pages from its host cell, except an ``interleave``
    one: its pages go round-robin over all the VM's host cells, the turn
    carried from one interleaved cell to the next, so equal cells
    interleaved over as many host cells take what they would take strict,
    to the page. The engine's fit (:mod:`vnuma.placement.fit`) asks this too.
    """
    needs: dict[tuple[int, int], int] = {}
    spread = sorted({cell for cell, _size, _n, _mode in guest_cells})
    k, turn = len(spread), 0
    for cell, size, n, mode in guest_cells:
        if mode is MemoryMode.INTERLEAVE and k > 1:
            for i, target in enumerate(spread):
                key = (target, size)
                needs[key] = needs.get(key, 0) + n // k + (1 if (i - turn) % k < n % k else 0)
            turn = (turn + n) % k
        else:
            needs[(cell, size)] = needs.get((cell, size), 0) + n
    return {key: n for key, n in needs.items() if n > 0}


def gpu_count(p: Placement) -> int:
    """GPUs the placement passes through."""
    return sum(1 for d in p.devices if d.kind is DeviceKind.GPU)


def admit(
    p: Placement, hs: HostState, tenant: Tenant, isolations: Mapping[str, Isolation], used: Usage
) -> Rejection | None:
    """None when ``p`` may be claimed on ``hs``; else the first check that refuses it, as a rejection."""
    claim = Claim(p, hs, tenant, isolations, used)
    for unit in ADMISSION:
        refusal = unit.check(claim)
        if refusal is not None:
            return Rejection(hs.name, unit.name, refusal.reason, refusal.hint)
    return None
