"""Admission checks on memory and devices: ``cell-pages``, ``device-taint``, ``devices``, ``partitions``, ``sr-iov``,
``iommu-group``, ``resctrl`` (what each means: :mod:`.admit`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from vnuma.placement.iommu import group_problem
from vnuma.placement.ledger.claim import REPLACE_HINT, Claim, Refusal, page_needs
from vnuma.placement.ledger.host import HostState, blocked_holder
from vnuma.placement.model import Placement
from vnuma.placement.nics import sriov_problem
from vnuma.placement.partitions import partition_problem
from vnuma.placement.resctrl import refusal as slice_refusal
from vnuma.topology import format_size_kib
from vnuma.topology.devstates import DeviceStateKind


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


def claimed_devices(p: Placement) -> list[str]:
    """Every device address ``p`` claims: passed-through devices, its partitions' GPUs and vGPU VFs."""
    found = [d.address for d in p.devices]
    for a in p.partitions:
        found.append(a.gpu)
        if a.vf is not None:
            found.append(a.vf)
    return found


def blocked_refusal(hs: HostState, address: str) -> Refusal | None:
    """Why a tainted or cleaning device takes no new claim (the one device-state rule), None when it may."""
    state = hs.blocked.get(address)
    if state is None:
        return None
    kept = hs.host.device_states.of(address)
    why = f" ({kept.reason})" if kept is not None and kept.reason else ""
    if state is DeviceStateKind.TAINTED:
        return Refusal(f"host {hs.name!r}: device {address} is tainted{why}: it takes no new claims",
                       f"`vnuma device untaint {hs.name} {address}` to use it again")
    return Refusal(f"host {hs.name!r}: device {address} is cleaning{why}: it takes no claim until cleaned",
                   f"`vnuma device clean {hs.name} {address}` once it is clean")


class DeviceTaint:
    """``device-taint``: no device it claims (whole, a partition's GPU or VF) is tainted or cleaning, nor the
    physical function of a VF it claims or a VF of a NIC it claims whole."""

    name = "device-taint"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a new claim of a blocked device; a VM returning to what it held before a run gets back."""
        if not c.hs.blocked or c.returning:
            return None
        at = c.hs.shape.device_at
        for address in claimed_devices(c.p):
            dev = at.get(address)
            related = () if dev is None else (*((dev.pf,) if dev.pf else ()), *dev.vfs)
            for other in (address, *related):
                refusal = blocked_refusal(c.hs, other)
                if refusal is not None:
                    return refusal
        return None


def taken_by_vms(c: Claim) -> Mapping[str, str]:
    """The devices VMs hold on the claim's host: a blocked device no VM holds is ``device-taint``'s to refuse
    (an undo, ``returning``, gets back onto it)."""
    hs = c.hs
    if not hs.blocked:
        return hs.devices_taken
    return {a: vm for a, vm in hs.devices_taken.items() if a not in hs.blocked or vm != blocked_holder(hs.blocked[a])}


class Devices:
    """``devices``: each device is free."""

    name = "devices"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse devices given to other VMs."""
        taken = taken_by_vms(c)
        for dev in c.p.devices:
            holder = taken.get(dev.address)
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
        taken = taken_by_vms(c)
        problem = partition_problem(c.hs if taken is c.hs.devices_taken else _ByVms(c.hs, taken), c.p)
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}", REPLACE_HINT)


class _ByVms:
    """A host's GPUs as :func:`partition_problem` reads them, with the devices only blocked (no VM holds them)
    left to ``device-taint``."""

    __slots__ = ("devices_taken", "gpu_offers", "partitions")

    def __init__(self, hs: HostState, taken: Mapping[str, str]) -> None:
        self.gpu_offers, self.partitions, self.devices_taken = hs.gpu_offers, hs.partitions, taken


class Sriov:
    """``sr-iov``: a PF and its VFs are never both passed through."""

    name = "sr-iov"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a PF whose VFs are held, or a VF whose PF is."""
        problem = sriov_problem(c.hs.shape.device_at, taken_by_vms(c), c.p) if c.p.devices else None
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
