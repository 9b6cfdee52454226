"""IOMMU groups: VFIO passes a group whole, so a passed-through device takes its group's other endpoints along.

Pure: no I/O. One rule, used by the build (which adds the companions) and by admission (check
``iommu-group``, which the inventory's claim applies too):

* a device's **companions** are the other members of its IOMMU group that the host lists, that are
  not bridges (class 0x0604: VFIO leaves PCIe bridges with the host) and that vnuma does not place on
  their own (not GPUs or NICs): a GPU's audio function, a NIC's management function. They are claimed
  with the device (each address once, as every device), attached to its guest cell, rendered as
  ``<hostdev>``, released with the VM, and marked ``peer_of`` the device they follow;
* a GPU or NIC whose group holds another GPU or NIC (a switch without ACS) can only be passed through
  with it: admission refuses a VM holding one without the other, naming the group. The engine does not
  look for such pairs (it picks GPUs one by one), so a host whose only free GPUs share a group refuses
  those VMs; give the switch ACS (or the kernel ``pcie_acs_override``) to split the group.
"""

from __future__ import annotations

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
