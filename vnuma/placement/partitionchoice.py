"""Which GPUs of a host a VM's partitions go on, why they fit nowhere, and how a host's GPUs stand.

Pure: no I/O; reads a host's ledger (:class:`vnuma.placement.ledger.host.HostState`) under the rule of
:mod:`vnuma.placement.partitions`.

**Choice** (:func:`pick_partitions`): the GPUs of the VM's host cells (with
GPU affinity ``preferred``, then the other cells' by distance; ``socket``,
the other cells of their sockets), GPUs already partitioned the same way
first (fill a partly used GPU before opening a fresh one, so whole GPUs stay
free), then by address; a MIG instance takes the free start that leaves the
largest profile still creatable (then the lowest start:
:func:`vnuma.placement.partitions.choose_start`). A partition attaches
to the guest cell on its GPU's host cell, else to the nearest guest cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vnuma.placement.ledger.host import HostState, blocked_holder
from vnuma.placement.model import GpuAffinity, Placement, Tenant, VmRequest
from vnuma.placement.partitionmodel import PartitionAsk, PartitionAssignment, PartitionKind
from vnuma.placement.partitions import (
    NVIDIA,
    GpuOffer,
    gpu_offers,
    held_on,
    incompatible,
    partition_uuid,
    slots,
    why_full,
)
from vnuma.topology import DeviceKind, Host
from vnuma.topology.partitions import GpuUse, HeldPartition, mig_partitions, vgpu_partitions


class PartitionShortage(Exception):
    """The partitions asked for do not fit on the GPUs considered; the message says why, ``short`` in full."""

    def __init__(self, short: Shortage) -> None:
        super().__init__(short.reason)
        self.short = short


_LOOK = "see the GPUs' partitions in `vnuma host show`"


@dataclass(frozen=True, slots=True)
class Shortage:
    """Why a VM's partitions do not fit on a host's cells: the reason, the same in words that hold for every
    host short for that cause (:attr:`vnuma.placement.result.Rejection.gist`), and how many partitions are
    missing (None: no GPU of the host offers them at all)."""

    reason: str
    gist: str
    missing: int | None
    hint: str = _LOOK


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
    held = held_on(hs, gpu, ())
    return (not (held and incompatible(held, ask) is None), gpu)


def _distance(hs: HostState, home: int | None, cells: tuple[int, ...]) -> int:
    if home is None or home not in hs.cell_by_id:
        return 1 << 20
    return min(hs.distance.get((home, c), 1 << 19) for c in cells)


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


def unoffered(states: Iterable[HostState], ask: PartitionAsk) -> tuple[str | None, str]:
    """Why no GPU of a fleet (its hosts' ``states``) offers ``ask`` at all, and the hint: for MIG, the GPU models
    with no geometry kept (importing one may make them offer it), else None and the hint to look. The words of
    the refusal (exit 4) of a request asking partitions no GPU of the fleet offers."""
    bare = [s for s in (_none_offers(hs, ask) for hs in states) if s.hint != _LOOK]
    if bare:
        return "; ".join(sorted({s.gist for s in bare})), bare[0].hint
    return None, _LOOK


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


def room(hs: HostState, ask: PartitionAsk) -> int:
    """How many partitions of ``ask`` the host's GPUs could take now (at most ``ask.count`` are counted)."""
    found = 0
    for gpu in hs.shape.gpu_offers:
        found += len(slots(hs, gpu, ask, (), ask.count - found))
        if found >= ask.count:
            break
    return found


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
    """Every physical GPU's mode (``whole``, ``vgpu``, ``mig``; ``tainted`` or ``cleaning`` when no VM holds it
    and it takes no claim; None: free) and free partitions as claimed now (``host show``): the free count of a
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
        state = hs.blocked.get(d.address)
        if held:
            mode: str | None = held[0][1].kind.value
        elif state is not None and hs.devices_taken.get(d.address) == blocked_holder(state):
            mode = state.value  # tainted or cleaning, no VM on it: never shown free
        else:
            mode = "whole" if d.address in hs.devices_taken else None
        free = {name: len(slots(hs, d.address, PartitionAsk(kind, name, total), (), total))
                for kind, name, total in offered.get(d.address, ())}
        layout = tuple(sorted(
            (HeldPartition(vm, a.name, a.start, a.vf) for vm, a in held or ()),
            key=lambda h: (h.start if h.start is not None else -1, h.vf or "", h.vm),
        ))
        out[d.address] = GpuUse(mode, free, layout)
    return out
