"""The PCI devices of an hwloc XML topology (``PCIDev`` and addressed ``Bridge`` objects).

Pure: no I/O; :mod:`vnuma.sources.hwloc` hands over the parsed objects.
The class and ids come from ``pci_type`` (``"0302 [10de:2330] [10de:16c1] a1"``),
the NUMA node from the nearest ancestor's ``nodeset`` when it holds exactly
one node with CPUs (a device is local to its CPUs' node, not to memory-only
nodes beside it: a GPU's own memory, HBM, CXL memory on the same package),
else, when it holds none with CPUs, exactly one node besides GPU-memory
nodes; the parent from the nearest upstream bridge with an address, the bridges from every upstream bridge with an
address (nearest first), and the root complex from the host bridge above
them (``bridge_type="0-1"``, ``bridge_pci="0000:[16-17]"`` is ``pci0000:16``;
unknown without one). hwloc gives a link's bandwidth only
(``pci_link_speed``, GB/s), not its speed and width: the link stays unknown.

A device whose ``pci_busid`` or ``pci_type`` cannot be read is left out
(:class:`~vnuma.topology.leftout.LeftOut`, a GPU or NIC named as one when
its class can be read); a bridge left out so is skipped in the bridges of
the devices below it. Whether a device is listed twice is the host's
usable step to say (:func:`vnuma.topology.leftout.usable`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.nodedev import format_pci_address
from vnuma.sources.xmlsafe import device_name, element_where, shown
from vnuma.topology import DeviceKind, PciDevice, device_kind_for_class
from vnuma.topology.leftout import LeftOut, device_label

_BUSID = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", re.IGNORECASE)
# class [vendor:device] [subvendor:subdevice] revision [prog-if, hwloc >= 2.11]
_PCI_TYPE = re.compile(
    r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[[0-9a-f]{4}:[0-9a-f]{4}\] [0-9a-f]{2}"
    r"(?: ([0-9a-f]{2}))?",
    re.IGNORECASE,
)
_CLASS = re.compile(r"^([0-9a-f]{4})\b", re.IGNORECASE)
_BUS_RANGE = re.compile(r"^([0-9a-f]{4}):\[([0-9a-f]{2})-[0-9a-f]{2}\]$", re.IGNORECASE)

class Nodes(NamedTuple):
    """The NUMA nodes a device's locality is read against: GPU memory (never a device's node) and those with
    CPUs (preferred over memory-only ones beside them)."""

    gpu_memory: frozenset[int]
    with_cpus: frozenset[int]


Bitmap = Callable[[str, str], frozenset[int]]
"""Reads an hwloc bitmap (text, where it is for messages): :func:`vnuma.sources.hwloc.parse_hwloc_bitmap`."""


def busid_address(busid: str) -> str | None:
    """hwloc's ``0004:05:00.0`` (any case) in the devices' form (:func:`format_pci_address`); None if unreadable."""
    match = _BUSID.match(busid)
    if not match:
        return None
    domain, bus, slot, function = (int(g, 16) for g in match.groups())
    return format_pci_address(domain, bus, slot, function)


def read_devices(
    objects: Iterable[etree._Element], nodes: Nodes, bitmap: Bitmap, what: str
) -> tuple[list[PciDevice], list[LeftOut]]:
    """The PCI devices among ``objects`` (document order) and those left out; ``nodes``: the GPU-memory
    nodes (never a device's own node) and the nodes with CPUs; ``bitmap``: the hwloc bitmap reader. A device
    local to a node the host does not keep (not allowed) is the usable step's to say.

    Raises:
        InvalidInputError: an ancestor's ``nodeset`` that is not an hwloc bitmap.
    """
    devices: list[PciDevice] = []
    left: list[LeftOut] = []
    for obj in objects:
        if obj.get("type") not in ("PCIDev", "Bridge") or not obj.get("pci_busid"):
            continue
        found = _device(obj, nodes, bitmap, what)
        if isinstance(found, PciDevice):
            devices.append(found)
        else:
            left.append(found)
    return devices, left


def _device(obj: etree._Element, nodes: Nodes, bitmap: Bitmap, what: str) -> PciDevice | LeftOut:
    where = element_where(what, obj)
    busid = (obj.get("pci_busid") or "").strip()
    pci_type = (obj.get("pci_type") or "").strip()
    address = busid_address(busid)
    if address is None:
        return LeftOut(f"{device_label(shown(busid), _kind(pci_type))} at {where}", "its pci_busid is not a PCI "
                       "address (dddd:bb:ss.f)")
    match = _PCI_TYPE.match(pci_type)
    if not match:
        return LeftOut(device_label(address, _kind(pci_type)), f"its pci_type {shown(pci_type)} cannot be read "
                       f"({where})")
    class_id, vendor, product, prog_if = match.groups()
    numa_node: int | None = None
    bridges: list[str] = []
    root_complex: str | None = None
    for ancestor in obj.iterancestors("object"):
        if ancestor.get("type") == "Bridge" and root_complex is None:
            upstream = busid_address((ancestor.get("pci_busid") or "").strip())
            if upstream is not None:
                bridges.append(upstream)
            elif ancestor.get("bridge_type", "").startswith("0-"):
                root_complex = _root_complex(ancestor.get("bridge_pci"))
        nodeset = ancestor.get("nodeset")
        if nodeset is not None:
            local = bitmap(nodeset, element_where(what, ancestor)) - nodes.gpu_memory
            local = (local & nodes.with_cpus) or local
            numa_node = next(iter(local)) if len(local) == 1 else None
            break
    pci_class = int(class_id, 16) << 8 | int(prog_if or "0", 16)
    return PciDevice(
        address=address,
        kind=device_kind_for_class(pci_class),
        vendor_id=f"0x{int(vendor, 16):04x}",
        product_id=f"0x{int(product, 16):04x}",
        numa_node=numa_node,
        parent=bridges[0] if bridges else None,
        root_complex=root_complex,
        bridges=tuple(bridges),
        pci_class=pci_class,
        product_name=device_name(next((i.get("value") for i in obj.iterchildren("info")
                                       if i.get("name") == "PCIDevice"), None)),
    )


def _kind(pci_type: str) -> DeviceKind | None:
    """What a device whose ``pci_type`` cannot be read fully is, by its class when that much reads."""
    match = _CLASS.match(pci_type)
    return device_kind_for_class(int(match.group(1), 16) << 8) if match else None


def _root_complex(bus_range: str | None) -> str | None:
    """``0000:[16-17]`` (a host bridge's buses) -> ``pci0000:16``; None when it does not read so."""
    match = _BUS_RANGE.match((bus_range or "").strip())
    return f"pci{match.group(1).lower()}:{match.group(2).lower()}" if match else None


def check_busid(busid: str, element: etree._Element, field: str, what: str) -> str:
    """:func:`busid_address`, refusing an unreadable one.

    Raises:
        InvalidInputError: naming ``field`` and where it is.
    """
    address = busid_address(busid)
    if address is None:
        raise InvalidInputError(f"{element_where(what, element)}: bad {field} {busid!r}")
    return address
