"""GPU partitions: vGPU and MIG instances as placeable, NUMA-local units. The one rule every path asks.

Pure: no I/O. What a GPU offers (:func:`gpu_offers`, once per host shape): a
vGPU type on its SR-IOV virtual functions (each VF carries one instance) or
on the physical function itself (the inventoried available instances), and
the MIG geometry of its model (:attr:`vnuma.topology.Host.gpu_profiles`).

**Modes.** A physical GPU is in one mode at a time: *free*, *whole* (passed
through to one VM: :attr:`GpuLedger.devices_taken`), *vgpu* of one type
(time-sliced vGPU on one GPU serves one type at a time), or *mig* (instances
whose memory slices never overlap and start only where the geometry allows:
:mod:`vnuma.topology.mig`). A GPU holding partitions leaves its cell's free
GPUs (the ledger moves it), so whole-GPU requests never see it; a partition
never goes on a GPU passed through whole. Capacity is counted from vnuma's own
claims (:attr:`GpuLedger.partitions`), never from a driver's count that drops
as instances are created: :func:`slots` says what more a GPU takes, admission
asks :func:`partition_problem`. Which GPUs a VM's partitions go on is
:mod:`vnuma.placement.partitionchoice`'s. A mediated device's UUID is derived
from the VM and the partition's index (:func:`partition_uuid`), so it is the
same on every render and every move.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from vnuma.placement.model import Placement
from vnuma.placement.partitionmodel import PartitionAsk, PartitionAssignment, PartitionKind
from vnuma.topology import DeviceKind, Host
from vnuma.topology.mig import MigGeometry, find_profile, largest_creatable, starts_free
from vnuma.topology.partitions import mig_geometry

NVIDIA = "0x10de"
"""NVIDIA's PCI vendor id: MIG (Multi-Instance GPU) is theirs, so only their GPUs can lack a MIG geometry."""
PARTITION_NAMESPACE = uuidlib.UUID("6f1c5a3e-4b2d-5e7f-8a9b-0c1d2e3f4a5b")
"""The namespace of partitions' mediated-device UUIDs (uuid5 of ``VM/partition/INDEX``)."""


@dataclass(frozen=True, slots=True)
class GpuOffer:
    """What one physical GPU can be cut into: per vGPU type, the VFs offering it and the instances its PF
    offers itself; its MIG geometry (None: its model has none kept); its host cell."""

    vgpu_vfs: Mapping[str, tuple[str, ...]]
    vgpu_pf: Mapping[str, int]
    mig: MigGeometry | None
    home: int | None


def gpu_offers(host: Host) -> dict[str, GpuOffer]:
    """Every physical GPU of ``host`` that offers a vGPU type or has a MIG geometry, by address."""
    by_address = {d.address: d for d in host.devices}
    geometries = mig_geometry(host)
    out: dict[str, GpuOffer] = {}
    for gpu in host.devices:
        if gpu.kind is not DeviceKind.GPU or gpu.pf is not None:
            continue
        vfs: dict[str, list[str]] = {}
        for vf in (by_address[a] for a in gpu.vfs if a in by_address):
            for t in vf.mdev_types:
                vfs.setdefault(t.id, []).append(vf.address)
        pf = {t.id: t.available for t in gpu.mdev_types if t.available > 0}
        mig = geometries.get(gpu.address)
        if vfs or pf or mig is not None:
            out[gpu.address] = GpuOffer({t: tuple(sorted(a)) for t, a in vfs.items()}, pf, mig, gpu.numa_node)
    return out


class GpuLedger(Protocol):
    """What the rule reads of one host of a ledger (a :class:`vnuma.placement.ledger.host.HostState`): what its
    GPUs offer, the devices passed through (address -> VM), and each GPU's partitions (VM, partition)."""

    @property
    def gpu_offers(self) -> Mapping[str, GpuOffer]: ...

    @property
    def devices_taken(self) -> Mapping[str, str]: ...

    @property
    def partitions(self) -> Mapping[str, Sequence[tuple[str, PartitionAssignment]]]: ...


def held_on(hs: GpuLedger, gpu: str, planned: Sequence[PartitionAssignment]) -> list[PartitionAssignment]:
    """The partitions ``gpu`` holds, then those of ``planned`` on it."""
    return [a for _vm, a in hs.partitions.get(gpu, ())] + [a for a in planned if a.gpu == gpu]


def incompatible(held: Sequence[PartitionAssignment], ask: PartitionAsk) -> PartitionAssignment | None:
    """A partition already on the GPU that keeps ``ask`` off it (another mode, or another vGPU type)."""
    for a in held:
        if a.kind is not ask.kind or (ask.kind is PartitionKind.VGPU and a.name != ask.name):
            return a
    return None


def slots(
    hs: GpuLedger, gpu: str, ask: PartitionAsk, planned: Sequence[PartitionAssignment], want: int
) -> list[tuple[str | None, int | None]]:
    """Up to ``want`` more partitions of ``ask`` on ``gpu`` beside those held and ``planned``: each as (VF
    carrying it or None, MIG start or None)."""
    offer = hs.gpu_offers.get(gpu)
    if offer is None or gpu in hs.devices_taken:
        return []
    held = held_on(hs, gpu, planned)
    if incompatible(held, ask) is not None:
        return []
    if ask.kind is PartitionKind.VGPU:
        used = {a.vf for a in held}
        free = [vf for vf in offer.vgpu_vfs.get(ask.name, ()) if vf not in used and vf not in hs.devices_taken]
        if free:
            return [(vf, None) for vf in free[:want]]
        left = offer.vgpu_pf.get(ask.name, 0) - sum(1 for a in held if a.vf is None)
        return [(None, None)] * max(0, min(want, left))
    geometry = offer.mig
    if geometry is None or not any(p.name == ask.name for p in geometry.profiles):
        return []
    used = [(a.name, a.start) for a in held if a.start is not None]
    out: list[tuple[str | None, int | None]] = []
    for _ in range(want):
        free_starts = starts_free(geometry, ask.name, used)
        if not free_starts:
            break
        start = choose_start(geometry, used, ask.name, free_starts)
        used.append((ask.name, start))
        out.append((None, start))
    return out


def choose_start(geometry: MigGeometry, used: list[tuple[str, int]], name: str, free: tuple[int, ...]) -> int:
    """The start of a new ``name`` instance among ``free``: the one leaving the largest profile creatable
    (memory slices, then compute slices), then the lowest."""
    return max(free, key=lambda s: (_largest_after(geometry, used, name, s), -s))


def _largest_after(geometry: MigGeometry, used: list[tuple[str, int]], name: str, start: int) -> tuple[int, int]:
    best = largest_creatable(geometry, [*used, (name, start)])
    return (0, 0) if best is None else (best.memory_slices, best.compute_slices)


def partition_uuid(vm: str, index: int) -> str:
    """The mediated-device UUID of a VM's ``index``-th partition (the same on every render and move)."""
    return str(uuidlib.uuid5(PARTITION_NAMESPACE, f"{vm}/partition/{index}"))


def why_full(hs: GpuLedger, gpu: str, ask: PartitionAsk) -> str:
    """What keeps more of ``ask`` off ``gpu`` now."""
    holder = hs.devices_taken.get(gpu)
    if holder is not None:
        return f"is passed through whole to VM {holder!r}"
    held = held_on(hs, gpu, ())
    other = incompatible(held, ask)
    if other is not None:
        mode = f"vGPU type {other.name}" if other.kind is PartitionKind.VGPU else "MIG instances"
        return f"serves {mode} (one mode and one vGPU type per GPU)"
    if ask.kind is PartitionKind.MIG:
        return f"has no free start for {ask.name} beside {', '.join(f'{a.name}@{a.start}' for a in held)}"
    return f"has all its {ask.name} instances taken ({len(held)})"


def partition_problem(hs: GpuLedger, p: Placement) -> str | None:
    """Why ``p``'s partitions (and whole GPUs) break the rule on ``hs`` as claimed now, or None."""
    for d in p.devices:
        if d.kind is DeviceKind.GPU and hs.partitions.get(d.address):
            vm = hs.partitions[d.address][0][0]
            return f"GPU {d.address} holds partitions (of VM {vm!r}): it is not passed through whole"
    planned: list[PartitionAssignment] = []
    uuids = {a.uuid: vm for held in hs.partitions.values() for vm, a in held if vm != p.vm}
    for a in p.partitions:
        if a.uuid in uuids:
            return f"mediated device {a.uuid} is already VM {uuids[a.uuid]!r}'s"
        if a.gpu not in hs.gpu_offers:
            return f"GPU {a.gpu} offers no partitions"
        ask = PartitionAsk(a.kind, a.name)
        if a.kind is PartitionKind.MIG:
            geometry = hs.gpu_offers[a.gpu].mig
            if geometry is None:
                return f"GPU {a.gpu} has no MIG geometry"
            find_profile(geometry, a.name)
        possible = _possible(hs, a, ask, planned)
        if not possible:
            what = f"{a.name}@{a.start}" if a.kind is PartitionKind.MIG else f"{a.name} on {a.vf or 'its PF'}"
            return f"GPU {a.gpu}: {a.kind.value} {what} does not fit: it {why_full(hs, a.gpu, ask)}"
        planned.append(a)
    return None


def _possible(hs: GpuLedger, a: PartitionAssignment, ask: PartitionAsk, planned: list[PartitionAssignment]) -> bool:
    """Whether ``a`` itself (its VF, or its MIG start) is free beside what is held and ``planned``."""
    offer = hs.gpu_offers[a.gpu]
    if a.gpu in hs.devices_taken:
        return False
    held = held_on(hs, a.gpu, planned)
    if incompatible(held, ask) is not None:
        return False
    if a.kind is PartitionKind.VGPU:
        if a.vf is not None:
            taken = {h.vf for h in held}
            return a.vf in offer.vgpu_vfs.get(a.name, ()) and a.vf not in taken and a.vf not in hs.devices_taken
        return sum(1 for h in held if h.vf is None) < offer.vgpu_pf.get(a.name, 0)
    assert offer.mig is not None and a.start is not None
    return a.start in starts_free(offer.mig, a.name, [(h.name, h.start) for h in held if h.start is not None])


def stranded(hs: GpuLedger, gpu: str) -> bool:
    """A partitioned GPU whose free part no partition can use: MIG memory and compute slices both left free
    where no profile of its geometry is creatable any more (a GPU whose compute slices are all used is full,
    not stranded; a vGPU type's free instances are always usable by that type)."""
    held = held_on(hs, gpu, ())
    offer = hs.gpu_offers.get(gpu)
    if not held or offer is None or offer.mig is None or held[0].kind is not PartitionKind.MIG:
        return False
    used = [(a.name, a.start) for a in held if a.start is not None]
    profiles = [find_profile(offer.mig, name) for name, _start in used]
    memory = offer.mig.memory_slices - sum(p.memory_slices for p in profiles)
    compute = offer.mig.compute_slices - sum(p.compute_slices for p in profiles)
    return memory > 0 and compute > 0 and largest_creatable(offer.mig, used) is None
