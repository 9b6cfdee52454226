"""Admission checks on the host, its CPUs and cores: ``topology``, ``cordoned``, ``shape``, ``reserved``,
``pcpus``, ``core-isolation``, ``cell-isolation`` (what each means: :mod:`.admit`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from vnuma.placement.ledger.cell import tenant_bucket
from vnuma.placement.ledger.claim import REPLACE_HINT, Claim, Refusal
from vnuma.placement.ledger.host import HostState
from vnuma.placement.mixed import mixed_shape_problem
from vnuma.placement.model import CpuPolicy, Isolation
from vnuma.topology import format_cpuset

T = TypeVar("T")


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
        """Refuse any claim on a cordoned host but a VM returning where it was before a run (an undo)."""
        return None if c.returning else cordon_refusal(c.hs)


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
