"""Which free NICs go with a VM's GPUs, within a PCIe level of them (GPUDirect RDMA).

Pure: no I/O. ``--nics per-gpu`` gives each GPU a NIC of its own whose
level to that GPU (:func:`vnuma.topology.pcie.pcie_level`) is at most
``--nic-affinity`` (default ``PXB``, NCCL's default for GPUDirect RDMA):
a matching, so a NIC two GPUs could use goes to the one with no other
choice. ``--nics M`` gives M NICs, each within the level of at least one of
the VM's GPUs. Best level first, then the lower address. A pair whose level
is unknown counts only under ``SYS``.

NICs are physical functions (``--nic-function pf``, the default) or SR-IOV
virtual functions (``vf``): a VF's level is its own place in the PCIe tree
(under its PF). **SR-IOV rule** (:func:`sriov_problem`, admission's
``sr-iov`` check, and :func:`free` for the choice): a VF is claimed alone,
and a PF is never passed through while any of its VFs is, nor a VF while its
PF is. A NIC attaches to the guest cell of its host cell, else the nearest
guest cell, as a GPU does. Each GPU's NICs ranked by level are worked out
once per host shape (:func:`near`): levels are facts of the hardware, not of
the claims.

**RDMA stranding** (:func:`rdma_ready`, :func:`rdma_spare_first`): a free GPU
is *ready* for a later RDMA VM when a maximum matching of the free GPUs to
free NIC slots (a free NIC without VFs, or each free VF of a NIC whose PF is
not passed through) within :data:`RDMA_LEVEL` gives it one; the others are
stranded for RDMA as a GPU without CPUs is for any VM. A VM without NICs
takes stranded GPUs first (those not ready within PXB, then those not ready
within PIX), and under ``gpu-first`` a GPU VM prefers the cells with fewer
ready GPUs (:func:`vnuma.placement.order.cell_preference`), so GPUs beside
free NICs stay for the VMs that ask NICs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import DeviceAssignment, NicFunction, Placement, VmRequest
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.pcie import Level, pcie_level

_RANK = {level: i for i, level in enumerate(Level)}
UNKNOWN = len(_RANK)
"""The rank of a pair whose level the facts cannot tell: within ``SYS`` only."""


RDMA_LEVEL = Level.PXB
"""The level within which a free GPU counts as ready for GPUDirect RDMA (NCCL's default)."""


class NicShortage(Exception):
    """No NICs within the asked level of the GPUs chosen on this host; the message says which and what is near."""


def rank(level: Level | None) -> int:
    return UNKNOWN if level is None else _RANK[level]


def within(level: Level | None, affinity: Level) -> bool:
    """True when ``level`` is no worse than ``affinity`` (an unknown level only under ``SYS``)."""
    return _reach(rank(level), affinity)


def _reach(r: int, affinity: Level) -> bool:
    return r <= _RANK[affinity] or (r == UNKNOWN and affinity is Level.SYS)


def near(hs: HostState, gpu: str, function: NicFunction = NicFunction.PF) -> tuple[tuple[int, PciDevice], ...]:
    """Every NIC (or, for ``vf``, every NIC's virtual function) of the host with its level rank to ``gpu``,
    best first (then by address)."""
    shape = hs.shape
    vf = function is NicFunction.VF
    found = shape.near.get((gpu, vf))
    if found is None:
        device = shape.device_at[gpu]
        pool = shape.vf_nics if vf else shape.nics
        found = shape.near[(gpu, vf)] = tuple(
            sorted(((rank(pcie_level(device, n)), n) for n in pool), key=lambda p: (p[0], p[1].address))
        )
    return found


def free(taken: Mapping[str, str], n: PciDevice) -> bool:
    """May ``n`` be given to a VM now (the SR-IOV rule): it is not held, and neither is its PF (for a VF) nor
    any of its VFs (for a PF)."""
    if n.address in taken or (n.pf is not None and n.pf in taken):
        return False
    return not n.vfs or taken.keys().isdisjoint(n.vfs)


def near_free(hs: HostState, gpu: str, affinity: Level, function: NicFunction) -> list[PciDevice]:
    """The free NICs (or VFs) within ``affinity`` of GPU ``gpu``, best first."""
    if gpu not in hs.shape.device_at:
        return []
    taken, out = hs.devices_taken, []
    for r, n in near(hs, gpu, function):  # best first: past the level, only unknown levels (SYS) may follow
        if not _reach(r, affinity):
            if affinity is not Level.SYS:
                break
            continue
        if free(taken, n):
            out.append(n)
    return out


def _slots(hs: HostState, n: PciDevice, taken: Mapping[str, str]) -> int:
    """How many RDMA VMs NIC ``n`` can still serve: its free VFs when it has VFs and its PF is not passed
    through, else 1 when it is free."""
    if n.address in taken:
        return 0
    if not n.vfs:
        return 1
    return sum(1 for v in n.vfs if v not in taken and v in hs.shape.device_at)


def _within(hs: HostState, gpu: str, level: Level) -> tuple[PciDevice, ...]:
    """The NICs within ``level`` of ``gpu`` (best first), worked out once per host shape."""
    key = (gpu, level.value)
    found = hs.shape.rdma_near.get(key)
    if found is None:
        pairs = near(hs, gpu) if gpu in hs.shape.device_at else ()
        found = hs.shape.rdma_near[key] = tuple(n for r, n in pairs if _reach(r, level))
    return found


def rdma_ready(hs: HostState, gpus: Sequence[str], level: Level = RDMA_LEVEL) -> set[str]:
    """Of the free GPUs ``gpus``, those a maximum matching (GPUs tried in the given order) gives a free NIC
    slot of their own within ``level`` (a whole NIC, or one of its free VFs: :func:`_slots`)."""
    if not hs.shape.nics or not gpus:
        return set()
    taken = hs.devices_taken
    room: dict[str, int] = {}
    options: dict[str, list[str]] = {}
    for g in gpus:
        near_g: list[str] = []
        for n in _within(hs, g, level):
            if n.address not in room:
                room[n.address] = _slots(hs, n, taken)
            if room[n.address]:
                near_g.append(n.address)
        options[g] = near_g
    holders: dict[str, list[str]] = {}  # NIC -> the GPUs it serves, at most its room

    def augment(gpu: str, seen: set[str]) -> bool:
        for nic in options[gpu]:
            if nic in seen:
                continue
            seen.add(nic)
            held = holders.setdefault(nic, [])
            if len(held) < room[nic]:
                held.append(gpu)
                return True
            for i, other in enumerate(held):
                if augment(other, seen):
                    held[i] = gpu
                    return True
        return False

    return {g for g in gpus if augment(g, set())}


def rdma_spare_first(hs: HostState, gpus: Sequence[str]) -> list[str]:
    """``gpus`` (free, in address order) for a VM without NICs: those no later RDMA VM could use first (not
    ready within PXB, then not ready within PIX), each group in the given order."""
    if not hs.shape.nics or len(gpus) < 2:
        return list(gpus)
    pxb, pix = rdma_ready(hs, gpus, Level.PXB), rdma_ready(hs, gpus, Level.PIX)
    return sorted(gpus, key=lambda g: (g in pxb, g in pix))


def sriov_problem(device_at: Mapping[str, PciDevice], taken: Mapping[str, str], p: Placement) -> str | None:
    """Why ``p`` breaks the SR-IOV rule on a host whose devices are ``device_at`` and held ``taken``, or None."""
    mine = {d.address for d in p.devices}
    for d in p.devices:
        dev = device_at.get(d.address)
        if dev is None:
            continue
        if dev.pf is not None and dev.pf in mine | taken.keys():
            holder = "this VM" if dev.pf in mine else f"VM {taken[dev.pf]!r}"
            return f"virtual function {d.address}'s physical function {dev.pf} is passed through to {holder}"
        held = sorted(v for v in dev.vfs if v in mine or v in taken)
        if held:
            holders = sorted({"this VM" if v in mine else f"VM {taken[v]!r}" for v in held})
            return (f"physical function {d.address} has virtual function(s) {', '.join(held)} passed through "
                    f"(to {', '.join(holders)})")
    return None


def pick_nics(
    hs: HostState, gpus: Sequence[DeviceAssignment], req: VmRequest, attach: Callable[[int | None], int]
) -> tuple[DeviceAssignment, ...]:
    """The NICs for ``gpus`` as ``req`` asks; ``attach(home)`` gives a host cell's guest cell.

    Raises:
        NicShortage: not enough free NICs within the level.
    """
    taken = hs.devices_taken
    fn = req.nic_function
    addresses = sorted(g.address for g in gpus)
    options = {
        g: [n for r, n in near(hs, g, fn) if _reach(r, req.nic_affinity) and free(taken, n)] for g in addresses
    }
    if req.nics_per_gpu:
        chosen = matching(addresses, options)
        if isinstance(chosen, str):
            shared = options[chosen]
            why = (f"; the {len(shared)} free within it ({', '.join(n.address for n in shared)}) go to the VM's "
                   "other GPUs" if shared else _nearest(hs, chosen, fn))
            raise NicShortage(f"GPU {chosen} has no free {_what(fn)} of its own within {req.nic_affinity}{why}")
    else:
        best: dict[str, tuple[int, PciDevice]] = {}
        for g in addresses:
            for r, n in near(hs, g, fn):
                if (
                    _reach(r, req.nic_affinity)
                    and free(taken, n)
                    and (n.address not in best or r < best[n.address][0])
                ):
                    best[n.address] = (r, n)
        chosen = [n for _r, n in sorted(best.values(), key=lambda p: (p[0], p[1].address))][: req.nics]
        if len(chosen) < req.nics:
            raise NicShortage(
                f"{len(chosen)} free {_what(fn)}(s) within {req.nic_affinity} of the VM's GPUs, it asks for {req.nics}"
                + _nearest(hs, addresses[0], fn)
            )
    return tuple(
        DeviceAssignment(n.address, DeviceKind.NIC, attach(n.numa_node), n.numa_node)
        for n in sorted(chosen, key=lambda n: n.address)
    )


def matching(gpus: Sequence[str], options: dict[str, list[PciDevice]]) -> list[PciDevice] | str:
    """A NIC per GPU from its ``options`` (best first), by Kuhn's augmenting paths; the first GPU left
    without one when none exists."""
    owner, left = _kuhn(gpus, options)
    if left:
        return left[0]
    by_gpu = {gpu: nic for nic, gpu in owner.items()}
    nics = {n.address: n for ns in options.values() for n in ns}
    return [nics[by_gpu[g]] for g in gpus]


def matched_first(gpus: Sequence[str], options: dict[str, list[PciDevice]]) -> list[str]:
    """``gpus`` with those a maximum matching gives a NIC of their own first (each group in the given order):
    taking GPUs from the front never lets two share the one NIC near both while another GPU has its own."""
    _owner, left = _kuhn(gpus, options)
    return [g for g in gpus if g not in left] + left


def _kuhn(gpus: Sequence[str], options: dict[str, list[PciDevice]]) -> tuple[dict[str, str], list[str]]:
    """A maximum matching NIC -> GPU, GPUs tried in order, and the GPUs it leaves without a NIC."""
    owner: dict[str, str] = {}  # NIC -> GPU

    def augment(gpu: str, seen: set[str]) -> bool:
        for nic in options[gpu]:
            if nic.address in seen:
                continue
            seen.add(nic.address)
            if nic.address not in owner or augment(owner[nic.address], seen):
                owner[nic.address] = gpu
                return True
        return False

    left = [g for g in gpus if not augment(g, set())]
    return owner, left


def _what(function: NicFunction) -> str:
    return "NIC virtual function" if function is NicFunction.VF else "NIC"


def _nearest(hs: HostState, gpu: str, function: NicFunction) -> str:
    taken = hs.devices_taken
    for r, n in near(hs, gpu, function):
        if free(taken, n):
            level = "of unknown level" if r == UNKNOWN else list(Level)[r]
            return f"; nearest free {_what(function)} {n.address} is {level}"
    return f"; the host has no free {_what(function)}"


@dataclass(frozen=True, slots=True)
class NicPair:
    """A GPU and a NIC of one VM, their PCIe level on the host (None: the facts cannot tell), and whether
    that is worse than the level the VM's NICs were asked within."""

    gpu: str
    nic: str
    level: Level | None
    worse: bool


def nic_pairs(placement: Placement, host: Host) -> tuple[NicPair, ...]:
    """The GPU–NIC pairs of a VM holding GPUs and NICs, judged by the rule they were placed under.

    One NIC per GPU (``nics_per_gpu``, or placements that do not say): one pair per GPU, from a matching
    within the asked level when one exists (as the engine makes it, :func:`matching`), else each GPU in
    address order taking the nearest NIC not yet taken. A count of NICs: one pair per NIC, with the GPU
    nearest it (each NIC must be within the level of one of the VM's GPUs).
    """
    known = {d.address: d for d in host.devices}
    gpus = sorted(d.address for d in placement.devices if d.kind is DeviceKind.GPU and d.address in known)
    nics = sorted(d.address for d in placement.devices if d.kind is DeviceKind.NIC and d.address in known)
    if not gpus or not nics:
        return ()
    asked = placement.nic_affinity

    def pair(g: str, n: str) -> NicPair:
        level = pcie_level(known[g], known[n])
        return NicPair(g, n, level, asked is not None and not within(level, asked))

    def ranked(g: str, pool: list[str]) -> list[str]:
        return sorted(pool, key=lambda n: (rank(pcie_level(known[g], known[n])), n))

    if asked is not None and not placement.nics_per_gpu:
        return tuple(pair(min(gpus, key=lambda g: (rank(pcie_level(known[g], known[n])), g)), n) for n in nics)
    if asked is not None:
        options = {g: [known[n] for n in ranked(g, nics) if within(pcie_level(known[g], known[n]), asked)]
                   for g in gpus}
        matched = matching(gpus, options)
        if not isinstance(matched, str):
            return tuple(pair(g, n.address) for g, n in zip(gpus, matched, strict=True))
    taken: set[str] = set()
    out = []
    for g in gpus:
        order = ranked(g, nics)
        nic = next((n for n in order if n not in taken), order[0])
        taken.add(nic)
        out.append(pair(g, nic))
    return tuple(out)
