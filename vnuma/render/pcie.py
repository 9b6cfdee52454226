"""Guest PCIe layout for passed-through devices: one pcie-expander-bus per guest cell.

Pure: no I/O. Each guest NUMA cell that receives devices gets a
``pcie-expander-bus`` (QEMU ``pxb-pcie``) whose ``<node>`` is that guest
cell, and each device gets its own ``pcie-root-port`` behind it, so the
guest kernel sees every GPU's locality. Controller indexes are fixed:
0 is ``pcie-root``, then the expanders in guest-cell order, then the root
ports in the same order, so a controller never plugs into a higher index.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from vnuma.errors import RenderError
from vnuma.placement.model import DeviceAssignment

# libvirt auto-assigns low pcie-root slots to other devices (video at 1,
# root ports from 2) and keeps 0x1e/0x1f for the DMI bridge and ICH9 LPC;
# expanders take 0x10..0x1d so the two never collide.
FIRST_EXPANDER_SLOT = 0x10
LAST_EXPANDER_SLOT = 0x1D
MAX_PORTS_PER_BUS = 32
TOP_BUS_NR = 256

_PCI_ADDRESS = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_PCIE_MACHINES = ("q35", "pc-q35-", "virt")


@dataclass(frozen=True, slots=True)
class Expander:
    """A ``pcie-expander-bus`` controller on ``pcie-root`` slot ``slot``, bound to guest cell ``node``."""

    index: str
    bus_nr: str
    node: str
    slot: str


@dataclass(frozen=True, slots=True)
class RootPort:
    """A ``pcie-root-port`` plugged into the expander whose controller index is ``bus``."""

    index: str
    chassis: str
    port: str
    bus: str
    slot: str


@dataclass(frozen=True, slots=True)
class Hostdev:
    """A host PCI function (``source_*``) placed on the root port whose index is ``bus``.

    ``guest_address`` is where the guest finds it: firmware numbers the
    secondary buses of an expander's root ports from the expander's
    ``busNr`` + 1 in slot order, and each device is function 0 of slot 0 on
    its port's bus (checked in a real guest by tests/integration/test_guest_view.py).
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


@dataclass(frozen=True, slots=True)
class PcieLayout:
    """Controllers and hostdevs, in the order the template writes them."""

    expanders: tuple[Expander, ...] = ()
    root_ports: tuple[RootPort, ...] = ()
    hostdevs: tuple[Hostdev, ...] = ()


def is_pcie_machine(machine: str) -> bool:
    """True for machine types with a ``pcie-root`` (q35 on x86, virt on Arm)."""
    return machine.startswith(_PCIE_MACHINES)


def layout_devices(
    vm: str, devices: Iterable[DeviceAssignment], guest_cells: frozenset[int], machine: str,
    vfs: frozenset[str] = frozenset(),
) -> PcieLayout:
    """Lay out ``devices`` behind per-guest-cell expander buses; those in ``vfs`` (NICs' SR-IOV virtual
    functions) get a MAC address (:func:`vf_mac`).

    Raises:
        RenderError: a device on a guest cell the VM does not have, a bad
            PCI address, a non-PCIe machine type, or more devices than the
            bus numbering can hold.
    """
    by_cell: dict[int, list[DeviceAssignment]] = {}
    for dev in devices:
        if dev.guest_cell not in guest_cells:
            raise RenderError(
                f"VM {vm!r}: device {dev.address} is assigned to missing guest cell {dev.guest_cell}"
            )
        by_cell.setdefault(dev.guest_cell, []).append(dev)
    if not by_cell:
        return PcieLayout()
    if not is_pcie_machine(machine):
        raise RenderError(
            f"VM {vm!r}: machine type {machine!r} has no PCIe root for device locality",
            hint="use a q35 machine type (the default)",
        )
    cells = sorted(by_cell)
    if len(cells) > LAST_EXPANDER_SLOT - FIRST_EXPANDER_SLOT + 1:
        raise RenderError(f"VM {vm!r}: devices on {len(cells)} guest cells; at most 14 expander buses fit")
    expanders: list[Expander] = []
    ports: list[RootPort] = []
    hostdevs: list[Hostdev] = []
    for cell in cells:
        if len(by_cell[cell]) > MAX_PORTS_PER_BUS:
            raise RenderError(f"VM {vm!r}: {len(by_cell[cell])} devices on guest cell {cell}; at most 32 fit")
    # Each expander takes its own bus plus one secondary bus per root port. The ranges sit at the
    # top of the 255 bus numbers (clear of pcie-root's buses, as libvirt's own busNr choice is),
    # in guest-cell order upward, so the guest's PCI order follows its nodes (CUDA_DEVICE_ORDER=PCI_BUS_ID).
    next_bus_nr = TOP_BUS_NR - sum(1 + len(by_cell[c]) for c in cells)
    if next_bus_nr < 1:
        raise RenderError(f"VM {vm!r}: too many devices for the guest's 255 PCI bus numbers")
    next_port_index = 1 + len(cells)
    for i, cell in enumerate(cells):
        members = sorted(by_cell[cell], key=lambda d: d.address)
        bus_nr = next_bus_nr
        next_bus_nr += 1 + len(members)
        exp_index = 1 + i
        expanders.append(
            Expander(str(exp_index), str(bus_nr), str(cell), _hex2(FIRST_EXPANDER_SLOT + i))
        )
        for slot, dev in enumerate(members):
            port_index = next_port_index
            next_port_index += 1
            ports.append(
                RootPort(str(port_index), str(port_index), f"0x{slot * 8:x}", _hex2(exp_index), _hex2(slot))
            )
            found = _hostdev(vm, dev, _hex2(port_index), f"0000:{bus_nr + 1 + slot:02x}:00.0")
            hostdevs.append(replace(found, mac=vf_mac(vm, dev.address)) if dev.address in vfs else found)
    return PcieLayout(tuple(expanders), tuple(ports), tuple(hostdevs))


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
