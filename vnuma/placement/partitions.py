"""GPU partitions: vGPU and MIG instances as placeable, NUMA-local units. The one rule every path asks.

Pure: no I/O. What a GPU offers (:func:`gpu_offers`, once per host shape): a
vGPU type on its SR-IOV virtual functions (each VF carries one instance) or
on the physical function itself (the inventoried available instances), and
the MIG geometry of its model (:attr:`vnuma.topology.Host.gpu_profiles`).

**Modes.** A physical GPU is in one mode at a time: *free*, *whole* (passed
through to one VM: :attr:`HostState.devices_taken`), *vgpu* of one type
(time-sliced vGPU on one GPU serves one type at a time), or *mig* (instances
whose memory slices never overlap and start only where the geometry allows:
:mod:`vnuma.topology.mig`). A GPU holding partitions leaves its cell's free
GPUs (the ledger moves it), so whole-GPU requests never see it; a partition
never goes on a GPU passed through whole. Capacity is counted from vnuma's own
claims (:attr:`HostState.partitions`), never from a driver's count that drops
as instances are created.

**Choice** (:func:`pick_partitions`): the GPUs of the VM's host cells (with
GPU affinity ``preferred``, then the other cells' by distance; ``socket``,
the other cells of their sockets), GPUs already partitioned the same way
first (fill a partly used GPU before opening a fresh one, so whole GPUs stay
free), then by address; a MIG instance takes the free start that leaves the
largest profile still creatable (then the lowest start). A partition attaches
to the guest cell on its GPU's host cell, else to the nearest guest cell.
Its mediated device's UUID is derived from the VM and the partition's index,
so it is the same on every render and every move.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vnuma.placement.model import (
    GpuAffinity,
    PartitionAsk,
    PartitionAssignment,
    PartitionKind,
    Placement,
    Tenant,
    VmRequest,
)
from vnuma.topology import DeviceKind, Host
from vnuma.topology.mig import MigGeometry, find_profile, largest_creatable, starts_free
from vnuma.topology.partitions import GpuUse, HeldPartition, mig_geometry, mig_partitions, vgpu_partitions

if TYPE_CHECKING:
    from vnuma.placement.ledger.host import HostState

NVIDIA = "0x10de"
"""NVIDIA's PCI vendor id: MIG (Multi-Instance GPU) is theirs, so only their GPUs can lack a MIG geometry."""
PARTITION_NAMESPACE = uuidlib.UUID("6f1c5a3e-4b2d-5e7f-8a9b-0c1d2e3f4a5b")
"""The namespace of partitions' mediated-device UUIDs (uuid5 of ``VM/partition/INDEX``)."""


class PartitionShortage(Exception):
    """The partitions asked for do not fit on the GPUs considered; the message says why, ``short`` in full."""

    def __init__(self, short: Shortage) -> None:
        super().__init__(short.reason)
        self.short = short


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


def _held(hs: HostState, gpu: str, planned: Sequence[PartitionAssignment]) -> list[PartitionAssignment]:
    return [a for _vm, a in hs.partitions.get(gpu, ())] + [a for a in planned if a.gpu == gpu]


def _incompatible(held: Sequence[PartitionAssignment], ask: PartitionAsk) -> PartitionAssignment | None:
    """A partition already on the GPU that keeps ``ask`` off it (another mode, or another vGPU type)."""
    for a in held:
        if a.kind is not ask.kind or (ask.kind is PartitionKind.VGPU and a.name != ask.name):
            return a
    return None


def slots(
    hs: HostState, gpu: str, ask: PartitionAsk, planned: Sequence[PartitionAssignment], want: int
) -> list[tuple[str | None, int | None]]:
    """Up to ``want`` more partitions of ``ask`` on ``gpu`` beside those held and ``planned``: each as (VF
    carrying it or None, MIG start or None)."""
    offer = hs.shape.gpu_offers.get(gpu)
    if offer is None or gpu in hs.devices_taken:
        return []
    held = _held(hs, gpu, planned)
    if _incompatible(held, ask) is not None:
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


def _candidates(hs: HostState, cells: tuple[int, ...], req: VmRequest) -> list[str]:
    """The GPUs a VM on ``cells`` may take partitions from, in the order it tries them (see the module)."""
    offers = hs.shape.gpu_offers
    assert req.partition is not None
    ask = req.partition

    def ordered(pool: Iterable[str]) -> list[str]:
        return sorted(pool, key=lambda a: gpu_order(hs, a, ask))

    own = ordered(a for a, o in offers.items() if o.home in cells)
    if req.gpu_affinity is GpuAffinity.REQUIRED:
        return own
    if req.gpu_affinity is GpuAffinity.SOCKET:
        near = {s for c in cells for s in hs.socket_cells(hs.socket_of.get(c), c)} - set(cells)
        return own + ordered(a for a, o in offers.items() if o.home in near)
    rest = [a for a, o in offers.items() if o.home not in cells]
    return own + sorted(rest, key=lambda a: (_distance(hs, offers[a].home, cells), gpu_order(hs, a, ask)))


def gpu_order(hs: HostState, gpu: str, ask: PartitionAsk) -> tuple[bool, str]:
    """The order GPUs of equal distance are tried in (lower first): those already partitioned the way
    ``ask`` needs (fill a partly used GPU before opening a fresh one), then by address."""
    held = _held(hs, gpu, ())
    return (not (held and _incompatible(held, ask) is None), gpu)


def _distance(hs: HostState, home: int | None, cells: tuple[int, ...]) -> int:
    if home is None or home not in hs.cell_by_id:
        return 1 << 20
    return min(hs.distance.get((home, c), 1 << 19) for c in cells)


def pick_partitions(hs: HostState, cells: tuple[int, ...], req: VmRequest) -> tuple[PartitionAssignment, ...]:
    """The partitions ``req`` asks for on ``cells`` (guest order).

    Raises:
        PartitionShortage: the GPUs considered cannot hold them all.
    """
    ask = req.partition
    assert ask is not None
    planned: list[PartitionAssignment] = []
    for gpu in _candidates(hs, cells, req):
        home = hs.shape.gpu_offers[gpu].home
        for vf, start in slots(hs, gpu, ask, planned, ask.count - len(planned)):
            guest = cells.index(home) if home in cells else min(
                range(len(cells)), key=lambda g: (_distance(hs, home, (cells[g],)), g)
            )
            planned.append(PartitionAssignment(
                ask.kind, gpu, ask.name, partition_uuid(req.name, len(planned)), guest, home, vf, start,
            ))
        if len(planned) == ask.count:
            return tuple(planned)
    raise PartitionShortage(shortage(hs, cells, req, len(planned)))


def partition_uuid(vm: str, index: int) -> str:
    """The mediated-device UUID of a VM's ``index``-th partition (the same on every render and move)."""
    return str(uuidlib.uuid5(PARTITION_NAMESPACE, f"{vm}/partition/{index}"))


@dataclass(frozen=True, slots=True)
class Shortage:
    """Why a VM's partitions do not fit on a host's cells: the reason, the same in words that hold for every
    host short for that cause (:attr:`vnuma.placement.model.Rejection.gist`), and how many partitions are
    missing (None: no GPU of the host offers them at all)."""

    reason: str
    gist: str
    missing: int | None
    hint: str = "see the GPUs' partitions in `vnuma host show`"


def shortage(hs: HostState, cells: tuple[int, ...], req: VmRequest, found: int) -> Shortage:
    """Why ``req``'s partitions do not fit on ``cells``: no GPU offers them (naming the GPU models without a
    MIG geometry kept), or how many were found and what keeps the nearest GPU."""
    ask = req.partition
    assert ask is not None
    what = f"{ask.count} x {ask.kind.value} {ask.name}"
    where = "cell " + ",".join(map(str, cells)) if len(cells) > 1 else f"cell {cells[0]}"
    offers = hs.shape.gpu_offers
    serving = [a for a, o in offers.items() if _offers(o, ask)]
    if not serving:
        return _none_offers(hs, ask)
    full = f"too few free {ask.kind.value} {ask.name} on the GPUs of its cells"
    near = [a for a in _candidates(hs, cells, req) if a in serving]
    if not near:
        homes = sorted({str(offers[a].home) for a in serving})
        return Shortage(f"{what}: no GPU offering it on {where} (GPUs on cell(s) {', '.join(homes)} do)", full,
                        ask.count - found)
    gpu = near[0]
    return Shortage(f"{what}: {found} fit on the GPUs of {where}; GPU {gpu} {why_full(hs, gpu, ask)}", full,
                    ask.count - found)


def _offers(o: GpuOffer, ask: PartitionAsk) -> bool:
    if ask.kind is PartitionKind.VGPU:
        return ask.name in o.vgpu_vfs or ask.name in o.vgpu_pf
    return o.mig is not None and any(p.name == ask.name for p in o.mig.profiles)


def _none_offers(hs: HostState, ask: PartitionAsk) -> Shortage:
    """No GPU of ``hs`` offers ``ask``. For MIG, GPU models the inventory keeps no geometry for are the cause
    to name (``A30 PCIe (10de:20b7): no MIG geometry kept``): importing one may make them offer it."""
    offers = hs.shape.gpu_offers.values()
    none = f"no GPU offers {ask.kind.value} {ask.name}"
    gpus = [d for d in hs.host.devices if d.kind is DeviceKind.GPU and d.pf is None]
    if not gpus:
        return Shortage(f"{none} (the host has no GPUs)", none, None)
    if ask.kind is PartitionKind.VGPU:
        names = sorted({t for o in offers for t in (*o.vgpu_vfs, *o.vgpu_pf)})
        return Shortage(none + (f" (its vGPU types: {', '.join(names)})" if names else " (its GPUs offer no vGPU "
                                "type)"), none, None)
    bare = sorted({d.model() if d.product_name else f"GPU {d.model()}" for d in gpus if d.vendor_id == NVIDIA
                   and (d.address not in hs.shape.gpu_offers or hs.shape.gpu_offers[d.address].mig is None)})
    if bare:
        gist = f"{', '.join(bare)}: no MIG geometry kept: `vnuma gpu-profile import`"
        hint = ("keep the model's geometry: `vnuma gpu-profile import FILE|NAME` (a profile file or a shipped "
                "profile's name), or from saved `nvidia-smi mig` text: `vnuma gpu-profile import LGIP --lgipp LGIPP`")
        return Shortage(gist, gist, None, hint)
    models = sorted({o.mig.model for o in offers if o.mig is not None})
    if not models:
        return Shortage(f"{none} (MIG is NVIDIA's; none of its GPUs is)", none, None)
    return Shortage(f"{none} (MIG profiles of {', '.join(models)})", none, None)


def why_full(hs: HostState, gpu: str, ask: PartitionAsk) -> str:
    """What keeps more of ``ask`` off ``gpu`` now."""
    holder = hs.devices_taken.get(gpu)
    if holder is not None:
        return f"is passed through whole to VM {holder!r}"
    held = _held(hs, gpu, ())
    other = _incompatible(held, ask)
    if other is not None:
        mode = f"vGPU type {other.name}" if other.kind is PartitionKind.VGPU else "MIG instances"
        return f"serves {mode} (one mode and one vGPU type per GPU)"
    if ask.kind is PartitionKind.MIG:
        return f"has no free start for {ask.name} beside {', '.join(f'{a.name}@{a.start}' for a in held)}"
    return f"has all its {ask.name} instances taken ({len(held)})"


def room(hs: HostState, ask: PartitionAsk) -> int:
    """How many partitions of ``ask`` the host's GPUs could take now (at most ``ask.count`` are counted)."""
    found = 0
    for gpu in hs.shape.gpu_offers:
        found += len(slots(hs, gpu, ask, (), ask.count - found))
        if found >= ask.count:
            break
    return found


def partition_problem(hs: HostState, p: Placement) -> str | None:
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
        if a.gpu not in hs.shape.gpu_offers:
            return f"GPU {a.gpu} offers no partitions"
        ask = PartitionAsk(a.kind, a.name)
        if a.kind is PartitionKind.MIG:
            geometry = hs.shape.gpu_offers[a.gpu].mig
            if geometry is None:
                return f"GPU {a.gpu} has no MIG geometry"
            find_profile(geometry, a.name)
        possible = _possible(hs, a, ask, planned)
        if not possible:
            what = f"{a.name}@{a.start}" if a.kind is PartitionKind.MIG else f"{a.name} on {a.vf or 'its PF'}"
            return f"GPU {a.gpu}: {a.kind.value} {what} does not fit: it {why_full(hs, a.gpu, ask)}"
        planned.append(a)
    return None


def _possible(hs: HostState, a: PartitionAssignment, ask: PartitionAsk, planned: list[PartitionAssignment]) -> bool:
    """Whether ``a`` itself (its VF, or its MIG start) is free beside what is held and ``planned``."""
    offer = hs.shape.gpu_offers[a.gpu]
    if a.gpu in hs.devices_taken:
        return False
    held = _held(hs, a.gpu, planned)
    if _incompatible(held, ask) is not None:
        return False
    if a.kind is PartitionKind.VGPU:
        if a.vf is not None:
            taken = {h.vf for h in held}
            return a.vf in offer.vgpu_vfs.get(a.name, ()) and a.vf not in taken and a.vf not in hs.devices_taken
        return sum(1 for h in held if h.vf is None) < offer.vgpu_pf.get(a.name, 0)
    assert offer.mig is not None and a.start is not None
    return a.start in starts_free(offer.mig, a.name, [(h.name, h.start) for h in held if h.start is not None])


def stranded(hs: HostState, gpu: str) -> bool:
    """A partitioned GPU whose free part no partition can use: MIG memory and compute slices both left free
    where no profile of its geometry is creatable any more (a GPU whose compute slices are all used is full,
    not stranded; a vGPU type's free instances are always usable by that type)."""
    held = _held(hs, gpu, ())
    offer = hs.shape.gpu_offers.get(gpu)
    if not held or offer is None or offer.mig is None or held[0].kind is not PartitionKind.MIG:
        return False
    used = [(a.name, a.start) for a in held if a.start is not None]
    profiles = [find_profile(offer.mig, name) for name, _start in used]
    memory = offer.mig.memory_slices - sum(p.memory_slices for p in profiles)
    compute = offer.mig.compute_slices - sum(p.compute_slices for p in profiles)
    return memory > 0 and compute > 0 and largest_creatable(offer.mig, used) is None


def host_gpu_use(host: Host, placements: Sequence[Placement], tenants: Iterable[Tenant]) -> dict[str, GpuUse]:
    """:func:`gpu_use` of ``host`` holding ``placements``. A host none of whose GPUs offers partitions needs no
    ledger (nor numpy, for ``host show``): its GPUs are whole where a placement passes them through, else
    unclaimed, which is what :func:`gpu_use` says of such a host."""
    if not gpu_offers(host):
        whole = {d.address for p in placements for d in p.devices if d.kind is DeviceKind.GPU}
        return {d.address: GpuUse("whole" if d.address in whole else None, {})
                for d in host.devices if d.kind is DeviceKind.GPU and d.pf is None}
    from vnuma.placement.ledger.fleet import Fleet  # the engine's ledger: loaded only for partitioned hosts

    return gpu_use(Fleet([host], placements, tenants).state(host.name))


def gpu_use(hs: HostState) -> dict[str, GpuUse]:
    """Every physical GPU's mode and free partitions as claimed now (``host show``): the free count of a
    type or profile is how many :func:`slots` finds for it alone, so it is what a placement would get."""
    host = hs.host
    offered = {g: [(PartitionKind.VGPU, p.type, p.total) for p in ps] for g, ps in vgpu_partitions(host).items()}
    for g, ms in mig_partitions(host).items():
        offered.setdefault(g, []).extend((PartitionKind.MIG, m.profile, m.total) for m in ms)
    out: dict[str, GpuUse] = {}
    for d in host.devices:
        if d.kind is not DeviceKind.GPU or d.pf is not None:
            continue
        held = hs.partitions.get(d.address)
        mode = "whole" if d.address in hs.devices_taken else held[0][1].kind.value if held else None
        free = {name: len(slots(hs, d.address, PartitionAsk(kind, name, total), (), total))
                for kind, name, total in offered.get(d.address, ())}
        layout = tuple(sorted(
            (HeldPartition(vm, a.name, a.start, a.vf) for vm, a in held or ()),
            key=lambda h: (h.start if h.start is not None else -1, h.vf or "", h.vm),
        ))
        out[d.address] = GpuUse(mode, free, layout)
    return out
