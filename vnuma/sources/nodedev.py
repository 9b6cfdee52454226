"""libvirt node-device XML (``virsh nodedev-dumpxml``) -> :class:`PciDevice`.

Pure: no I/O; callers pass the documents' bytes. Only PCI functions
(``<capability type='pci'>``) become devices; USB, network-interface, SCSI,
system (``computer``) and other node devices are skipped. Bridges and root
ports are kept (kind ``other``) so a GPU's ``parent`` can be looked up.

A device's address is ``dddd:bb:ss.f`` in lowercase hex; its ``numa_node`` is
None when libvirt reports ``-1`` or nothing; its ``parent`` is the PCI address
of the parent node device (``pci_0000_40_01_1`` -> ``0000:40:01.1``), None for
``computer`` or non-PCI parents. Address fields beyond PCI's widths (domain
16 bits, bus 8, slot 5, function 3) are refused, not formatted into a
longer address.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.xmlsafe import INT32_MAX, element_where, one_line, parse_xml, read_int, read_optional_int
from vnuma.topology import PciDevice, device_kind_for_class

_PCI_NODEDEV_NAME = re.compile(r"^pci_([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])$", re.IGNORECASE)
_PCI_CLASS = re.compile(r"^(?:0x)?([0-9a-f]{1,6})$", re.IGNORECASE)
_DEVICES_HINT = "expected <device> documents as printed by `virsh nodedev-dumpxml DEVICE`"
_HEX_ID = re.compile(r"^(?:0x)?([0-9a-f]{1,4})$", re.IGNORECASE)
_FIELD_MAX = {"domain": 0xFFFF, "bus": 0xFF, "slot": 0x1F, "function": 0x7}
_MAX_NAME_CHARS = 40


def format_pci_address(domain: int, bus: int, slot: int, function: int) -> str:
    """The canonical ``dddd:bb:ss.f`` form (lowercase hex)."""
    return f"{domain:04x}:{bus:02x}:{slot:02x}.{function:x}"


def nodedev_name_to_address(name: str | None) -> str | None:
    """``pci_0000_40_01_1`` -> ``0000:40:01.1``; None for any other node-device name."""
    if name is None:
        return None
    match = _PCI_NODEDEV_NAME.match(name.strip())
    if not match:
        return None
    domain, bus, slot, function = (int(g, 16) for g in match.groups())
    return format_pci_address(domain, bus, slot, function)


def parse_nodedev(data: bytes | str, *, what: str) -> PciDevice | None:
    """Parse one ``<device>`` document; None when it is not a PCI device.

    Raises:
        InvalidInputError: malformed XML, a root other than ``<device>``, or
            a PCI capability with missing or unreadable fields.
    """
    return device_from_element(parse_xml(data, what=what, root="device"), what=what)


def parse_nodedev_file_content(data: bytes | str, what: str) -> tuple[PciDevice, ...]:
    """Parse a file holding one ``<device>`` or several wrapped in any root
    (``<devices>``, a test-driver ``<node>``...); PCI devices sorted by address.

    Raises:
        InvalidInputError: malformed XML, no ``<device>`` in the file, bad
            fields, or one PCI address listed twice.
    """
    root = parse_xml(data, what=what, root=None, hint=_DEVICES_HINT)
    elements = [root] if root.tag == "device" else root.findall("device")
    if not elements:
        raise InvalidInputError(f"{what}: no <device> elements under <{root.tag}>", hint=_DEVICES_HINT)
    found = (device_from_element(el, what=what) for el in elements)
    return _sorted_unique((what, dev) for dev in found if dev is not None)


def parse_nodedevs(docs: Iterable[tuple[str, bytes | str]]) -> tuple[PciDevice, ...]:
    """Parse ``(what, data)`` pairs (each one device or a wrapped set); PCI devices sorted by address.

    Raises:
        InvalidInputError: any document fails, or one PCI address appears twice.
    """
    return _sorted_unique(
        (what, dev) for what, data in docs for dev in parse_nodedev_file_content(data, what=what)
    )


def device_from_element(device_el: etree._Element, *, what: str) -> PciDevice | None:
    """Turn a parsed ``<device>`` element into a :class:`PciDevice` (None if not PCI)."""
    cap = device_el.find("capability[@type='pci']")
    if cap is None:
        return None
    name = one_line(device_el.findtext("name") or "") or "?"
    if len(name) > _MAX_NAME_CHARS:
        name = name[:_MAX_NAME_CHARS] + "..."
    label = f"{what} device {name}"

    def number(tag: str) -> int:
        el = cap.find(tag)
        if el is None:
            raise InvalidInputError(f"{element_where(label, cap)}: PCI capability has no <{tag}>")
        return read_int(el.text, what=label, element=el, field="a number", maximum=_FIELD_MAX[tag])

    address = format_pci_address(number("domain"), number("bus"), number("slot"), number("function"))
    return PciDevice(
        address=address,
        kind=device_kind_for_class(_pci_class(cap, label)),
        vendor_id=_hex_id(cap, "vendor", label),
        product_id=_hex_id(cap, "product", label),
        numa_node=_numa_node(cap, label),
        parent=nodedev_name_to_address(device_el.findtext("parent")),
    )


def _pci_class(cap: etree._Element, label: str) -> int | None:
    class_el = cap.find("class")
    text = (class_el.text or "").strip() if class_el is not None else ""
    if class_el is None or not text:
        return None
    match = _PCI_CLASS.match(text)
    if not match:
        raise InvalidInputError(f"{element_where(label, class_el)}: PCI class {text!r} is not hex")
    return int(match.group(1), 16)


def _hex_id(cap: etree._Element, tag: str, label: str) -> str:
    el = cap.find(tag)
    if el is None:
        raise InvalidInputError(f"{element_where(label, cap)}: PCI capability has no <{tag}>")
    text = (el.get("id") or "").strip()
    match = _HEX_ID.match(text)
    if not match:
        raise InvalidInputError(f"{element_where(label, el)}: <{tag}> id {text!r} is not a 16-bit hex id")
    return f"0x{int(match.group(1), 16):04x}"


def _numa_node(cap: etree._Element, label: str) -> int | None:
    numa_el = cap.find("numa")
    if numa_el is None:
        return None
    node = read_optional_int(
        numa_el.get("node"),
        what=label,
        element=numa_el,
        field="attribute node",
        allow_negative=True,
        maximum=INT32_MAX,
    )
    return node if node is not None and node >= 0 else None


def _sorted_unique(pairs: Iterable[tuple[str, PciDevice]]) -> tuple[PciDevice, ...]:
    seen: dict[str, tuple[str, PciDevice]] = {}
    for what, dev in pairs:
        if dev.address in seen:
            first = seen[dev.address][0]
            raise InvalidInputError(f"{what}: PCI device {dev.address} is listed twice (first in {first})")
        seen[dev.address] = (what, dev)
    return tuple(seen[address][1] for address in sorted(seen))
