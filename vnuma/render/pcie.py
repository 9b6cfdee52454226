"""Guest PCIe layout for passed-through devices: one pcie-expander-bus per host root complex.

Pure: no I/O. The VM's devices are grouped by (guest cell, host root
complex): each group gets a ``pcie-expander-bus`` (QEMU ``pxb-pcie``) whose
``<node>`` is the guest cell, so the guest kernel sees every GPU's
locality and two GPUs under different host root complexes stay apart
(devices whose root complex the facts do not tell share one expander per
guest cell). Devices the host gives no NUMA node go on expanders without a
``<node>`` (after the others), so the guest reads no node for them either.
Behind an expander, devices that are ``PIX`` on the host (at most one
bridge between them: one switch, :func:`vnuma.topology.pcie.pcie_level`)
share a mirrored switch: a ``pcie-root-port``, a
``pcie-switch-upstream-port`` and a ``pcie-switch-downstream-port`` per
device, so the guest reads ``PIX`` where the host has it; every other
device gets a root port of its own, so the guest never reads a level
better than the host's. Controller indexes: 0 is ``pcie-root``, then the
expanders in order, then each expander's ports depth first, so a
controller never plugs into a higher index.

GPU partitions (vGPU and MIG instances, :mod:`vnuma.placement.partitions`)
are mediated devices: each is a ``<hostdev type='mdev'>`` naming its UUID,
on a root port of its own behind the expander of its GPU's guest cell and
root complex, as a whole GPU would be (a mediated device has no switch to
mirror).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from vnuma.errors import RenderError
from vnuma.placement.model import DeviceAssignment
from vnuma.placement.partitionmodel import PartitionAssignment
from vnuma.topology import PciDevice
from vnuma.topology.pcie import Level, pcie_level

# libvirt auto-assigns low pcie-root slots to other devices (video at 1,
# root ports from 2) and keeps 0x1e/0x1f for the DMI bridge and ICH9 LPC;
# expanders take 0x10..0x1d so the two never collide.
FIRST_EXPANDER_SLOT = 0x10
LAST_EXPANDER_SLOT = 0x1D
MAX_PORTS_PER_BUS = 32
TOP_BUS_NR = 256
NO_NODE = 1 << 30
"""The sort key of the expander for devices the host gives no NUMA node (rendered without ``<node>``)."""

_PCI_ADDRESS = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_PCIE_MACHINES = ("q35", "pc-q35-", "virt")


@dataclass(frozen=True, slots=True)
class Expander:
    """A ``pcie-expander-bus`` controller on ``pcie-root`` slot ``slot``, bound to guest cell ``node`` ("": to
    none, for devices the host gives no NUMA node)."""

    index: str
    bus_nr: str
    node: str
    slot: str


ROOT_PORT = "pcie-root-port"
UPSTREAM = "pcie-switch-upstream-port"
DOWNSTREAM = "pcie-switch-downstream-port"
_PORT_MODEL = {ROOT_PORT: "pcie-root-port", UPSTREAM: "x3130-upstream", DOWNSTREAM: "xio3130-downstream"}


@dataclass(frozen=True, slots=True)
class RootPort:
    """A port controller (``model``: a root port, or a mirrored switch's upstream or downstream port) plugged
    into slot ``slot`` of the controller whose index is ``bus``; ``chassis``/``port`` empty for an upstream
    port (it has none)."""

    index: str
    chassis: str
    port: str
    bus: str
    slot: str
    model: str = ROOT_PORT
    guest_address: str = ""
    """Where the guest finds the port itself (``dddd:bb:ss.f``; :class:`Hostdev` says how buses are numbered)."""

    @property
    def model_name(self) -> str:
        """QEMU's device for the controller (``<model name>``)."""
        return _PORT_MODEL[self.model]


@dataclass(frozen=True, slots=True)
class Hostdev:
    """A host PCI function (``source_*``) placed on the port whose index is ``bus``.

    ``guest_address`` is where the guest finds it: firmware numbers an
    expander's buses depth first from its ``busNr`` + 1 (a root port's
    secondary bus, then, under a mirrored switch, the upstream port's and
    each downstream port's in slot order), and each device is function 0 of
    slot 0 on its port's bus (checked in a real guest by
    tests/integration/test_guest_view.py).
    """

    address: str
    source_domain: str
    source_bus: str
    source_slot: str
    source_function: str
    bus: str
    guest_address: str
    mac: str = ""
    """For an SR-IOV virtual function (rendered ``<interface type='hostdev'>``): its MAC address."""
    mdev: str = ""
    """For a GPU partition (rendered ``<hostdev type='mdev'>``): its mediated device's UUID (also ``address``;
    the ``source_*`` fields are empty)."""
    acpi_nodeset: str = ""
    """For a GPU with memory nodes of its own (:mod:`vnuma.render.gpumemory`): its guest nodes, rendered as
    ``<acpi nodeset>``; "" for every other device."""


@dataclass(frozen=True, slots=True)
class PcieLayout:
    """Controllers and hostdevs, in the order the template writes them."""

    expanders: tuple[Expander, ...] = ()
    root_ports: tuple[RootPort, ...] = ()
    hostdevs: tuple[Hostdev, ...] = ()


def is_pcie_machine(machine: str) -> bool:
    """True for machine types with a ``pcie-root`` (q35 on x86, virt on Arm)."""
    return machine.startswith(_PCIE_MACHINES)


Item = DeviceAssignment | PartitionAssignment
"""What the layout places: a host PCI function, or a GPU partition (a mediated device)."""


def layout_devices(
    vm: str, devices: Iterable[DeviceAssignment], guest_cells: frozenset[int], machine: str,
    vfs: frozenset[str] = frozenset(), host_devices: Mapping[str, PciDevice] | None = None,
    partitions: Iterable[PartitionAssignment] = (),
) -> PcieLayout:
    """Lay out ``devices`` behind one expander bus per (guest cell, host root complex), PIX groups behind
    mirrored switches (``host_devices``: the host's devices by address, for root complexes and levels;
    without them, one expander per guest cell and a root port per device); those in ``vfs`` (NICs' SR-IOV
    virtual functions) get a MAC address (:func:`vf_mac`).

    Raises:
        RenderError: a device on a guest cell the VM does not have, a bad
            PCI address, a non-PCIe machine type, or more devices than the
            bus numbering can hold.
    """
    known = host_devices or {}
    by_bus: dict[tuple[int, str], list[DeviceAssignment]] = {}
    mdevs: dict[tuple[int, str], list[PartitionAssignment]] = {}
    for item in (*devices, *partitions):
        if item.guest_cell not in guest_cells:
            what = f"device {item.address}" if isinstance(item, DeviceAssignment) else f"partition {item.uuid}"
            raise RenderError(f"VM {vm!r}: {what} is assigned to missing guest cell {item.guest_cell}")
        host = known.get(item.address if isinstance(item, DeviceAssignment) else item.gpu)
        # A device the host gives no NUMA node goes on an expander without a node, after the others.
        key = (item.guest_cell if item.host_cell is not None else NO_NODE, (host.root_complex or "") if host else "")
        if isinstance(item, DeviceAssignment):
            by_bus.setdefault(key, []).append(item)
        else:
            by_bus.setdefault(key, [])
            mdevs.setdefault(key, []).append(item)
    if not by_bus:
        return PcieLayout()
    if not is_pcie_machine(machine):
        raise RenderError(
            f"VM {vm!r}: machine type {machine!r} has no PCIe root for device locality",
            hint="use a q35 machine type (the default)",
        )
    keys = sorted(by_bus)
    if len(keys) > LAST_EXPANDER_SLOT - FIRST_EXPANDER_SLOT + 1:
        raise RenderError(f"VM {vm!r}: devices on {len(keys)} guest cells and host root complexes; "
                          "at most 14 expander buses fit")
    groups: dict[tuple[int, str], list[list[Item]]] = {
        key: [*_switch_groups(sorted(by_bus[key], key=lambda d: d.address), known),
              *([m] for m in sorted(mdevs.get(key, ()), key=lambda m: (m.gpu, m.uuid)))]
        for key in keys
    }
    for key in keys:
        if len(groups[key]) > MAX_PORTS_PER_BUS or any(len(g) > MAX_PORTS_PER_BUS for g in groups[key]):
            count = sum(len(g) for g in groups[key])
            raise RenderError(f"VM {vm!r}: {count} devices on guest cell {key[0]}; at most 32 fit")
    # Each expander takes its own bus plus one per port that has a secondary bus. The ranges sit at the top
    # of the 255 bus numbers (clear of pcie-root's buses, as libvirt's own busNr choice is), in order upward,
    # so the guest's PCI order follows its nodes (CUDA_DEVICE_ORDER=PCI_BUS_ID).
    next_bus_nr = TOP_BUS_NR - sum(1 + sum(_buses(g) for g in groups[key]) for key in keys)
    if next_bus_nr < 1:
        raise RenderError(f"VM {vm!r}: too many devices for the guest's 255 PCI bus numbers")
    layout = _Builder(vm, vfs, 1 + len(keys))
    for i, key in enumerate(keys):
        bus_nr, next_bus_nr = next_bus_nr, next_bus_nr + 1 + sum(_buses(g) for g in groups[key])
        layout.expander(str(1 + i), bus_nr, "" if key[0] == NO_NODE else str(key[0]), FIRST_EXPANDER_SLOT + i,
                        groups[key])
    return PcieLayout(tuple(layout.expanders), tuple(layout.ports), tuple(layout.hostdevs))


def _buses(group: list[Item]) -> int:
    """Bus numbers a port group takes: a root port's secondary bus, and for a mirrored switch the upstream
    port's and each downstream port's."""
    return 1 if len(group) == 1 else 2 + len(group)


def _switch_groups(devices: list[DeviceAssignment], known: Mapping[str, PciDevice]) -> list[list[Item]]:
    """``devices`` (by address) in groups that are PIX to each other on the host (connected through PIX
    pairs), in order of their first device."""
    groups: list[list[Item]] = []
    for dev in devices:
        mine = known.get(dev.address)
        joined = [g for g in groups if mine is not None and any(
            isinstance(d, DeviceAssignment) and (other := known.get(d.address)) is not None
            and pcie_level(mine, other) is Level.PIX for d in g
        )]
        merged = [dev] + [d for g in joined for d in g]
        groups = [g for g in groups if g not in joined] + [sorted(merged, key=_address)]
    return sorted(groups, key=lambda g: _address(g[0]))


def _address(item: Item) -> str:
    return item.address if isinstance(item, DeviceAssignment) else item.uuid


class _Builder:
    """Controllers and hostdevs in index order, depth first under each expander."""

    def __init__(self, vm: str, vfs: frozenset[str], first_port_index: int) -> None:
        self.vm, self.vfs, self.index = vm, vfs, first_port_index
        self.expanders: list[Expander] = []
        self.ports: list[RootPort] = []
        self.hostdevs: list[Hostdev] = []

    def _port(self, model: str, bus: str, slot: int, guest_bus: int) -> str:
        index = str(self.index)
        self.index += 1
        chassis, port = ("", "") if model == UPSTREAM else (index, f"0x{slot * 8:x}" if model == ROOT_PORT else
                                                               f"0x{slot:x}")
        guest = f"0000:{guest_bus:02x}:{slot:02x}.0"
        self.ports.append(RootPort(index, chassis, port, _hex2(int(bus)), _hex2(slot), model, guest))
        return index

    def _device(self, dev: Item, port: str, guest_bus: int) -> None:
        guest = f"0000:{guest_bus:02x}:00.0"
        if isinstance(dev, PartitionAssignment):
            self.hostdevs.append(Hostdev(dev.uuid, "", "", "", "", _hex2(int(port)), guest, mdev=dev.uuid))
            return
        found = _hostdev(self.vm, dev, _hex2(int(port)), guest)
        self.hostdevs.append(replace(found, mac=vf_mac(self.vm, dev.address)) if dev.address in self.vfs else found)

    def expander(self, index: str, bus_nr: int, node: str, slot: int, groups: list[list[Item]]) -> None:
        self.expanders.append(Expander(index, str(bus_nr), node, _hex2(slot)))
        guest_bus = bus_nr
        for slot_no, group in enumerate(groups):
            root = self._port(ROOT_PORT, index, slot_no, bus_nr)
            guest_bus += 1
            if len(group) == 1:
                self._device(group[0], root, guest_bus)
                continue
            upstream = self._port(UPSTREAM, root, 0, guest_bus)
            guest_bus += 1
            switch_bus = guest_bus
            for down_slot, dev in enumerate(group):
                down = self._port(DOWNSTREAM, upstream, down_slot, switch_bus)
                guest_bus += 1
                self._device(dev, down, guest_bus)


def vf_mac(vm: str, address: str) -> str:
    """The MAC address of VF ``address`` in VM ``vm``: QEMU's locally administered prefix 52:54:00 and three
    bytes of SHA-256 of the two, so a re-render gives the same address and two VMs (almost surely) differ."""
    digest = hashlib.sha256(f"{vm}\0{address}".encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def _hex2(value: int) -> str:
    return f"0x{value:02x}"


def _hostdev(vm: str, dev: DeviceAssignment, bus: str, guest_address: str) -> Hostdev:
    match = _PCI_ADDRESS.match(dev.address)
    if not match:
        raise RenderError(f"VM {vm!r}: device address {dev.address!r} is not a PCI address dddd:bb:ss.f")
    domain, pci_bus, slot, function = (g.lower() for g in match.groups())
    return Hostdev(dev.address, f"0x{domain}", f"0x{pci_bus}", f"0x{slot}", f"0x{function}", bus, guest_address)
