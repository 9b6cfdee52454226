"""Admission: may this placement be claimed on its host, given what is claimed there now?

Pure: no I/O. This is the one rule for what fits. The engine asks it about
the placement it built before choosing it; :meth:`Fleet.add` asks it before
recording a placement (simulations, rebalance plans); the inventory asks it
inside the claiming transaction, on a one-host ledger built from the rows
read under the host lock. The database constraints stay behind it as the
last line.

Checks, in order; each is a named unit and its name tags the refusal (the
host and CPU checks live in :mod:`.cpuchecks`, the memory and device ones
in :mod:`.devicechecks`, the group and quota ones here; what a check sees
of the placement is :class:`.claim.Claim`):

``topology``
    the placement names this host, and only cells, CPUs and devices it has;
``cordoned``
    the host is not cordoned (a cordoned host takes no new placement, not
    even a re-pin of its own VMs: they only leave it; only an undo of a
    journaled run, ``returning`` a VM to what it held before, gets back in); the engine's host
    filter of the same name asks :func:`.cpuchecks.cordon_refusal` too;
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
    each (cell, page size) has the pages it takes (:func:`.claim.page_needs`: an
    interleaved guest cell takes from all the VM's host cells; the cold tier
    from its memory-only cell);
``device-taint``
    no device it claims (passed through, or a partition's GPU or vGPU VF) is
    tainted or cleaning (:mod:`vnuma.topology.devstates`); the VMs holding
    one stay, a move re-placing one is a new claim, and only an undo of a
    journaled run (``returning``) gets back onto one;
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
    domain its vCPUs touch, and the host has a class of service and a
    monitoring ID left for its resctrl group (both host-wide:
    :func:`vnuma.placement.resctrl.refusal`);
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

from collections.abc import Mapping

from vnuma.placement.groups import MODE_HINT, group_clash, group_refusal
from vnuma.placement.ledger.claim import Check, Claim, Refusal, gpu_count
from vnuma.placement.ledger.cpuchecks import (
    CellIsolation,
    Cordoned,
    CoreIsolation,
    Pcpus,
    Reserved,
    Shape,
    Topology,
)
from vnuma.placement.ledger.devicechecks import CellPages, Devices, DeviceTaint, IommuGroup, Partitions, Slices, Sriov
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.quota import Usage, quota_problem
from vnuma.placement.result import Rejection


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
    DeviceTaint(),
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


def admit(
    p: Placement, hs: HostState, tenant: Tenant, isolations: Mapping[str, Isolation], used: Usage,
    *, returning: bool = False,
) -> Rejection | None:
    """None when ``p`` may be claimed on ``hs``; else the first check that refuses it, as a rejection.
    ``returning``: ``p`` is what the VM held before a journaled run, claimed again by its undo."""
    claim = Claim(p, hs, tenant, isolations, used, returning)
    for unit in ADMISSION:
        refusal = unit.check(claim)
        if refusal is not None:
            return Rejection(hs.name, unit.name, refusal.reason, refusal.hint)
    return None
