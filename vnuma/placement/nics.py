"""NICs beside a VM's GPUs: PCIe levels, the SR-IOV rule, and the matching of NICs to GPUs (GPUDirect RDMA).

Pure: no I/O. ``--nics per-gpu`` gives each GPU a NIC of its own whose
level to that GPU (:func:`vnuma.topology.pcie.pcie_level`) is at most
``--nic-affinity`` (default ``PXB``, NCCL's default for GPUDirect RDMA):
a matching (:func:`matching`), so a NIC two GPUs could use goes to the one
with no other choice. ``--nics M`` gives M NICs, each within the level of at
least one of the VM's GPUs. Best level first, then the lower address. A pair
whose level is unknown counts only under ``SYS`` (:func:`within`). Which free
NICs a VM gets on a host is :mod:`vnuma.placement.nicchoice`'s; how a placed
VM's pairs stand is :func:`nic_pairs` (``stats``, the locality objective).

NICs are physical functions (``--nic-function pf``, the default) or SR-IOV
virtual functions (``vf``): a VF's level is its own place in the PCIe tree
(under its PF). **SR-IOV rule** (:func:`sriov_problem`, admission's
``sr-iov`` check, and :func:`free` for the choice): a VF is claimed alone,
and a PF is never passed through while any of its VFs is, nor a VF while its
PF is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vnuma.placement.model import Placement
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.pcie import Level, pcie_level

_RANK = {level: i for i, level in enumerate(Level)}
UNKNOWN = len(_RANK)
"""The rank of a pair whose level the facts cannot tell: within ``SYS`` only."""


def rank(level: Level | None) -> int:
    """The level's place, best first (:data:`UNKNOWN` for a level the facts cannot tell)."""
    return UNKNOWN if level is None else _RANK[level]


def within(level: Level | None, affinity: Level) -> bool:
    """True when ``level`` is no worse than ``affinity`` (an unknown level only under ``SYS``)."""
    return reach(rank(level), affinity)


def reach(r: int, affinity: Level) -> bool:
    """True when a pair of rank ``r`` (:func:`rank`) is within ``affinity``."""
    return r <= _RANK[affinity] or (r == UNKNOWN and affinity is Level.SYS)


def free(taken: Mapping[str, str], n: PciDevice) -> bool:
    """May ``n`` be given to a VM now (the SR-IOV rule): it is not held, and neither is its PF (for a VF) nor
    any of its VFs (for a PF)."""
    if n.address in taken or (n.pf is not None and n.pf in taken):
        return False
    return not n.vfs or taken.keys().isdisjoint(n.vfs)


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
