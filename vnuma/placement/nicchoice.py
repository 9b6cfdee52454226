"""Which free NICs a VM's GPUs get on one host of the ledger, and which free GPUs are stranded for RDMA.

Pure: no I/O; reads a host's ledger (:class:`vnuma.placement.ledger.host.HostState`) under the rules of
:mod:`vnuma.placement.nics` (levels, the SR-IOV rule, the matching). A NIC attaches to the guest cell of its
host cell, else the nearest guest cell, as a GPU does. Each GPU's NICs ranked by level are worked out once
per host shape (:func:`near`): levels are facts of the hardware, not of the claims.

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

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import DeviceAssignment, NicFunction, VmRequest
from vnuma.placement.nics import UNKNOWN, free, matching, rank, reach
from vnuma.topology import DeviceKind, PciDevice
from vnuma.topology.pcie import Level, pcie_level

RDMA_LEVEL = Level.PXB
"""The level within which a free GPU counts as ready for GPUDirect RDMA (NCCL's default)."""


class NicShortage(Exception):
    """No NICs within the asked level of the GPUs chosen on this host; the message says which and what is near."""


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


def near_free(hs: HostState, gpu: str, affinity: Level, function: NicFunction) -> list[PciDevice]:
    """The free NICs (or VFs) within ``affinity`` of GPU ``gpu``, best first."""
    if gpu not in hs.shape.device_at:
        return []
    taken, out = hs.devices_taken, []
    for r, n in near(hs, gpu, function):  # best first: past the level, only unknown levels (SYS) may follow
        if not reach(r, affinity):
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
        found = hs.shape.rdma_near[key] = tuple(n for r, n in pairs if reach(r, level))
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
        g: [n for r, n in near(hs, g, fn) if reach(r, req.nic_affinity) and free(taken, n)] for g in addresses
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
                    reach(r, req.nic_affinity)
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


def _what(function: NicFunction) -> str:
    return "NIC virtual function" if function is NicFunction.VF else "NIC"


def _nearest(hs: HostState, gpu: str, function: NicFunction) -> str:
    taken = hs.devices_taken
    for r, n in near(hs, gpu, function):
        if free(taken, n):
            level = "of unknown level" if r == UNKNOWN else list(Level)[r]
            return f"; nearest free {_what(function)} {n.address} is {level}"
    return f"; the host has no free {_what(function)}"
