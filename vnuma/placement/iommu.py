"""IOMMU groups: VFIO passes a group whole, so a passed-through device takes its group's other endpoints along.

Pure: no I/O. One rule, used by the build (which adds the companions) and by admission (check
``iommu-group``, which the inventory's claim applies too):

* a device's **companions** are the other members of its IOMMU group that the host lists, that are
  not bridges (class 0x0604: VFIO leaves PCIe bridges with the host) and that vnuma does not place on
  their own (not GPUs or NICs): a GPU's audio function, a NIC's management function. They are claimed
  with the device (each address once, as every device), attached to its guest cell, rendered as
  ``<hostdev>``, released with the VM, and marked ``peer_of`` the device they follow;
* a GPU or NIC whose group holds another GPU or NIC (a switch without ACS) can only be passed through
  with it: admission refuses a VM holding one without the other, naming the group. The build takes a
  cell's GPUs in whole groups (:func:`whole_groups`), and the fit passes over a cell set whose free GPUs
  cannot make the count in whole groups (:class:`GroupSplit`); a host where no set can is refused with
  check ``iommu-group`` naming the group (give the switch ACS, or the kernel ``pcie_acs_override``, to
  split it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vnuma.placement.model import DeviceAssignment, Placement
from vnuma.topology import DeviceKind, PciDevice

BRIDGE_CLASS = 0x0604
_PLACED = (DeviceKind.GPU, DeviceKind.NIC)


def _bridge(d: PciDevice) -> bool:
    return d.pci_class is not None and d.pci_class >> 8 == BRIDGE_CLASS


def companions(device_at: dict[str, PciDevice], address: str) -> tuple[str, ...]:
    """The endpoints that go with ``address`` (see the module doc), by address."""
    dev = device_at.get(address)
    if dev is None:
        return ()
    found = (device_at.get(peer) for peer in dev.iommu_peers)
    return tuple(sorted(d.address for d in found if d is not None and not _bridge(d) and d.kind not in _PLACED))


def with_companions(device_at: dict[str, PciDevice], devices: tuple[DeviceAssignment, ...]
                    ) -> tuple[DeviceAssignment, ...]:
    """``devices`` and each one's companions (on its guest and host cell, ``peer_of`` it), by address."""
    extra = [
        DeviceAssignment(peer, device_at[peer].kind, d.guest_cell, d.host_cell, peer_of=d.address)
        for d in devices for peer in companions(device_at, d.address)
    ]
    return tuple(sorted((*devices, *extra), key=lambda d: d.address)) if extra else devices


def group_problem(device_at: dict[str, PciDevice], p: Placement) -> str | None:
    """Why ``p`` would split an IOMMU group, or None."""
    held = {d.address for d in p.devices}
    for d in p.devices:
        if d.peer_of is not None:
            continue
        dev = device_at.get(d.address)
        if dev is None:
            continue
        missing = [peer for peer in companions(device_at, d.address) if peer not in held]
        if missing:
            return (f"{d.kind} {d.address} goes with IOMMU group {dev.iommu_group} member(s) {', '.join(missing)}, "
                    "which the placement does not pass through")
        for peer in dev.iommu_peers:
            other = device_at.get(peer)
            if other is not None and other.kind in _PLACED and peer not in held:
                return (f"{d.kind} {d.address} shares IOMMU group {dev.iommu_group} with {other.kind} {peer}: "
                        "VFIO passes a group whole, so both go to one VM or neither")
    return None


def placed_mates(devices: Iterable[PciDevice]) -> dict[str, tuple[str, ...]]:
    """GPU or NIC -> the other GPUs and NICs of its IOMMU group, for those that share one (usually none)."""
    placed = {d.address for d in devices if d.kind in _PLACED}
    out = {}
    for d in devices:
        mates = tuple(sorted(p for p in d.iommu_peers if p in placed))
        if d.address in placed and mates:
            out[d.address] = mates
    return out


class GroupSplit(Exception):
    """A cell's free GPUs make the count asked only by splitting an IOMMU group; the message names it."""


def whole_groups(mates: Mapping[str, tuple[str, ...]], ordered: list[str], k: int) -> list[str]:
    """``k`` of ``ordered`` (free GPUs, preferred first) in whole IOMMU groups: GPUs sharing a group with
    other GPUs go together, and one whose group holds a GPU not among ``ordered`` (held, or elsewhere) goes
    last. The groups whose members come earliest in ``ordered`` win (an exact cover of ``k`` by group
    sizes, found by a small search); ``ordered[:k]`` when no GPU shares a group.

    Raises:
        GroupSplit: no whole groups make ``k``.
    """
    if not mates or mates.keys().isdisjoint(ordered):
        return ordered[:k]
    free = set(ordered)
    groups: list[list[str]] = []
    seen: set[str] = set()
    blocked: list[str] = []
    for a in ordered:
        if a in seen:
            continue
        own = mates.get(a, ())
        if any(p not in free for p in own):
            blocked.append(a)
            seen.add(a)
            continue
        group = [a, *own]
        seen.update(group)
        groups.append(group)
    if all(len(g) == 1 for g in groups) and len(groups) >= k:
        return [g[0] for g in groups][:k]
    if len(groups) > 20:
        return ordered[:k]
    pos = {a: i for i, a in enumerate(ordered)}
    best: tuple[int, list[int]] | None = None

    def search(i: int, left: int, chosen: list[int], cost: int) -> None:
        nonlocal best
        if left == 0:
            if best is None or cost < best[0]:
                best = (cost, list(chosen))
            return
        if i == len(groups) or (best is not None and cost >= best[0]):
            return
        size = len(groups[i])
        if size <= left:
            chosen.append(i)
            search(i + 1, left - size, chosen, cost + sum(pos[a] for a in groups[i]))
            chosen.pop()
        search(i + 1, left, chosen, cost)

    search(0, k, [], 0)
    if best is None:
        split = next((g for g in groups if len(g) > 1), None)
        if split is not None:
            raise GroupSplit(f"{k} GPU(s) of the cell only by splitting the IOMMU group of {', '.join(split)}")
        held = blocked[0]
        raise GroupSplit(f"GPU {held} shares its IOMMU group with {', '.join(mates[held])}, held by another VM")
    return sorted((a for i in best[1] for a in groups[i]), key=pos.__getitem__)
