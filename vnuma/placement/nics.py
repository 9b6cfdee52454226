"""Which free NICs go with a VM's GPUs, within a PCIe level of them (GPUDirect RDMA).

Pure: no I/O. ``--nics per-gpu`` gives each GPU a NIC of its own whose
level to that GPU (:func:`vnuma.topology.pcie.pcie_level`) is at most
``--nic-affinity`` (default ``PXB``, NCCL's default for GPUDirect RDMA):
a matching, so a NIC two GPUs could use goes to the one with no other
choice. ``--nics M`` gives M NICs, each within the level of at least one of
the VM's GPUs. Best level first, then the lower address. A pair whose level
is unknown counts only under ``SYS``.

NICs are physical functions here: virtual functions are not offered. A NIC
attaches to the guest cell of its host cell, else the nearest guest cell,
as a GPU does. Each GPU's NICs ranked by level are worked out once per host
shape (:func:`near`): levels are facts of the hardware, not of the claims.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import DeviceAssignment, VmRequest
from vnuma.topology import DeviceKind, PciDevice
from vnuma.topology.pcie import Level, pcie_level

_RANK = {level: i for i, level in enumerate(Level)}
UNKNOWN = len(_RANK)
"""The rank of a pair whose level the facts cannot tell: within ``SYS`` only."""


class NicShortage(Exception):
    """No NICs within the asked level of the GPUs chosen on this host; the message says which and what is near."""


def rank(level: Level | None) -> int:
    return UNKNOWN if level is None else _RANK[level]


def within(level: Level | None, affinity: Level) -> bool:
    """True when ``level`` is no worse than ``affinity`` (an unknown level only under ``SYS``)."""
    return _reach(rank(level), affinity)


def _reach(r: int, affinity: Level) -> bool:
    return r <= _RANK[affinity] or (r == UNKNOWN and affinity is Level.SYS)


def near(hs: HostState, gpu: str) -> tuple[tuple[int, PciDevice], ...]:
    """Every NIC of the host with its level rank to ``gpu``, best first (then by address)."""
    shape = hs.shape
    found = shape.near.get(gpu)
    if found is None:
        device = shape.device_at[gpu]
        found = shape.near[gpu] = tuple(
            sorted(((rank(pcie_level(device, n)), n) for n in shape.nics), key=lambda p: (p[0], p[1].address))
        )
    return found


def has_near_nic(hs: HostState, gpu: str, affinity: Level) -> bool:
    """True when some free NIC is within ``affinity`` of GPU ``gpu``."""
    if gpu not in hs.shape.device_at:
        return False
    taken = hs.devices_taken
    return any(_reach(r, affinity) and n.address not in taken for r, n in near(hs, gpu))


def pick_nics(
    hs: HostState, gpus: Sequence[DeviceAssignment], req: VmRequest, attach: Callable[[int | None], int]
) -> tuple[DeviceAssignment, ...]:
    """The NICs for ``gpus`` as ``req`` asks; ``attach(home)`` gives a host cell's guest cell.

    Raises:
        NicShortage: not enough free NICs within the level.
    """
    taken = hs.devices_taken
    addresses = sorted(g.address for g in gpus)
    options = {
        g: [n for r, n in near(hs, g) if _reach(r, req.nic_affinity) and n.address not in taken] for g in addresses
    }
    if req.nics_per_gpu:
        chosen = matching(addresses, options)
        if isinstance(chosen, str):
            raise NicShortage(
                f"GPU {chosen} has no free NIC of its own within {req.nic_affinity}" + _nearest(hs, chosen)
            )
    else:
        best: dict[str, tuple[int, PciDevice]] = {}
        for g in addresses:
            for r, n in near(hs, g):
                if (
                    _reach(r, req.nic_affinity)
                    and n.address not in taken
                    and (n.address not in best or r < best[n.address][0])
                ):
                    best[n.address] = (r, n)
        chosen = [n for _r, n in sorted(best.values(), key=lambda p: (p[0], p[1].address))][: req.nics]
        if len(chosen) < req.nics:
            raise NicShortage(
                f"{len(chosen)} free NIC(s) within {req.nic_affinity} of the VM's GPUs, it asks for {req.nics}"
                + _nearest(hs, addresses[0])
            )
    return tuple(
        DeviceAssignment(n.address, DeviceKind.NIC, attach(n.numa_node), n.numa_node)
        for n in sorted(chosen, key=lambda n: n.address)
    )


def matching(gpus: Sequence[str], options: dict[str, list[PciDevice]]) -> list[PciDevice] | str:
    """A NIC per GPU from its ``options`` (best first), by Kuhn's augmenting paths; the first GPU left
    without one when none exists."""
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

    for g in gpus:
        if not augment(g, set()):
            return g
    by_gpu = {gpu: nic for nic, gpu in owner.items()}
    nics = {n.address: n for ns in options.values() for n in ns}
    return [nics[by_gpu[g]] for g in gpus]


def _nearest(hs: HostState, gpu: str) -> str:
    taken = hs.devices_taken
    for r, n in near(hs, gpu):
        if n.address not in taken:
            return f"; nearest free NIC {n.address} is {'of unknown level' if r == UNKNOWN else list(Level)[r]}"
    return "; the host has no free NIC"
