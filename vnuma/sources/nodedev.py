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

Where it sits (:mod:`vnuma.topology.pcie`): the root complex and the bridges
come from ``<path>`` (``/sys/devices/pci0000:16/0000:16:01.0/0000:17:00.0``:
root complex ``pci0000:16``, bridges ``0000:16:01.0``); a path that is
missing or does not read that way leaves both unknown, and
:func:`with_parent_bridges` then follows the ``<parent>`` links among the
devices given for the bridges (the root complex stays unknown). Also read:
the IOMMU group and its other members, SR-IOV (``virt_functions`` with
``maxCount``, ``phys_function``), the class, the PCIe link (``cap`` and
``sta``) and the mediated-device types it offers (``mdev_types``: id, name,
device API, available instances). A VF whose PF or an IOMMU peer that is not among the devices is
kept as an address (the host may not list it); a ``<parent>`` cycle is refused.

Mediated devices that exist (``<capability type='mdev'>``: a vGPU instance)
are read apart (:func:`mdev_from_element`, :func:`read_nodedevs`):
type, UUID (``<uuid>``, else from the ``mdev_<uuid>`` name), the PCI function
named by ``<parent>`` and the IOMMU group. One whose parent is not a PCI
device (an s390 subchannel, say) is skipped; whether its PCI parent is among
the host's devices is the host's usable step to say
(:func:`vnuma.topology.leftout.usable`: left out when it is not).

An import reads many documents (:func:`read_nodedevs`): one device among a
hundred that cannot be read (a malformed address, an unreadable id) is left
out and listed, not a reason to refuse the host; a device listed twice is
left out by the usable step. :func:`parse_nodedev` and
:func:`parse_nodedev_file_content` read strictly (tools and tests).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.xmlsafe import (
    INT32_MAX,
    device_name,
    element_where,
    one_line,
    parse_xml,
    read_int,
    read_int_attr,
    read_optional_int,
)
from vnuma.topology import DeviceKind, Mdev, MdevType, PciDevice, PciLink, device_kind_for_class
from vnuma.topology.leftout import LeftOut, device_label, refusal, unique_devices

_PCI_NODEDEV_NAME = re.compile(r"^pci_([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])$", re.IGNORECASE)
_PCI_CLASS = re.compile(r"^(?:0x)?([0-9a-f]{1,6})$", re.IGNORECASE)
_DEVICES_HINT = "expected <device> documents as printed by `virsh nodedev-dumpxml DEVICE`"
_HEX_ID = re.compile(r"^(?:0x)?([0-9a-f]{1,4})$", re.IGNORECASE)
_FIELD_MAX = {"domain": 0xFFFF, "bus": 0xFF, "slot": 0x1F, "function": 0x7}
_MAX_NAME_CHARS = 40
_PATH = re.compile(
    r"^/sys/devices/(pci[0-9a-f]{4}:[0-9a-f]{2})((?:/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])+)/?$", re.IGNORECASE
)
_SPEED = re.compile(r"^\d{1,3}(?:\.\d{1,3})?$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_MDEV_NAME = re.compile(r"^mdev_([0-9a-f]{8})_([0-9a-f]{4})_([0-9a-f]{4})_([0-9a-f]{4})_([0-9a-f]{12})(?:_|$)")


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


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What node-device documents hold: PCI functions and mediated devices in document order (one listed
    twice stays twice: the host's usable step says so), and the devices that could not be read."""

    devices: tuple[PciDevice, ...] = ()
    mdevs: tuple[Mdev, ...] = ()
    left_out: tuple[LeftOut, ...] = ()


def read_nodedevs(docs: Iterable[tuple[str, bytes | str]]) -> NodeDevices:
    """Read ``(what, data)`` documents, each one ``<device>`` or several wrapped in any root (``<devices>``,
    a test-driver ``<node>``...). A ``<device>`` whose PCI or mdev capability cannot be read is left out,
    named by its address (a GPU or NIC as one) or else its name; other kinds of node device are skipped.

    Raises:
        InvalidInputError: a document that is not XML, or holds no ``<device>``.
    """
    devices: list[PciDevice] = []
    mdevs: list[Mdev] = []
    left: list[LeftOut] = []
    for what, data in docs:
        root = parse_xml(data, what=what, root=None, hint=_DEVICES_HINT)
        elements = [root] if root.tag == "device" else root.findall("device")
        if not elements:
            raise InvalidInputError(f"{what}: no <device> elements under <{root.tag}>", hint=_DEVICES_HINT)
        for el in elements:
            try:
                dev, mdev = device_from_element(el, what=what), mdev_from_element(el, what=what)
            except InvalidInputError as err:
                left.append(_unreadable(el, what, err))
                continue
            devices.extend([dev] if dev is not None else [])
            mdevs.extend([mdev] if mdev is not None else [])
    return NodeDevices(tuple(devices), tuple(mdevs), tuple(left))


def parse_nodedev_file_content(data: bytes | str, what: str) -> tuple[PciDevice, ...]:
    """The PCI devices of a file holding one ``<device>`` or several wrapped in any root, sorted by address,
    strictly: what an import would leave out (:func:`read_nodedevs`) is refused.

    Raises:
        InvalidInputError: malformed XML, no ``<device>`` in the file, a device
            that cannot be read or one listed twice (the first, and how many more).
    """
    read = read_nodedevs([(what, data)])
    devices, twice = unique_devices(read.devices)
    err = refusal([*read.left_out, *twice], what, hint=_DEVICES_HINT)
    if err is not None:
        raise err
    return tuple(sorted(devices, key=lambda d: d.address))


def _unreadable(el: etree._Element, what: str, err: InvalidInputError) -> LeftOut:
    """The part left out for a ``<device>`` that cannot be read: by address and kind where those read."""
    name = one_line(el.findtext("name") or "")[:_MAX_NAME_CHARS] or "?"
    problem = str(err).removeprefix(f"{what} device {name}")
    cap = el.find("capability[@type='pci']")
    if cap is None:
        return LeftOut(f"mediated device {name}", f"cannot be read ({what}{problem})")
    try:
        pf = cap.find("capability[@type='phys_function']") is not None
        kind: DeviceKind | None = device_kind_for_class(_pci_class(cap, what), virtual_function=pf)
    except InvalidInputError:
        kind = None
    return LeftOut(device_label(nodedev_name_to_address(name) or name, kind), f"cannot be read ({what}{problem})")


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
    pci_class = _pci_class(cap, label)
    root_complex, bridges = _path(device_el.findtext("path"), address)
    group = cap.find("iommuGroup")
    functions = cap.find("capability[@type='virt_functions']")
    pf = cap.find("capability[@type='phys_function']/address")
    return PciDevice(
        address=address,
        kind=device_kind_for_class(pci_class, virtual_function=pf is not None),
        vendor_id=_hex_id(cap, "vendor", label),
        product_id=_hex_id(cap, "product", label),
        numa_node=_numa_node(cap, label),
        parent=nodedev_name_to_address(device_el.findtext("parent")),
        root_complex=root_complex,
        bridges=bridges,
        iommu_group=None if group is None else read_int_attr(group, "number", what=label),
        iommu_peers=() if group is None else tuple(
            sorted({a for el in group.findall("address") if (a := _address(el, label)) != address})
        ),
        pci_class=pci_class,
        vfs=() if functions is None else tuple(sorted({_address(el, label) for el in functions.findall("address")})),
        vf_max=None if functions is None or functions.get("maxCount") is None
        else read_int_attr(functions, "maxCount", what=label),
        pf=None if pf is None else _address(pf, label),
        link=_link(cap, label),
        mdev_types=tuple(_mdev_type(el, label) for el in cap.findall("capability[@type='mdev_types']/type")),
        product_name=device_name(cap.findtext("product")),
    )


def mdev_from_element(device_el: etree._Element, *, what: str) -> Mdev | None:
    """A parsed ``<device>`` element with an ``mdev`` capability on a PCI function, else None."""
    cap = device_el.find("capability[@type='mdev']")
    if cap is None:
        return None
    name = one_line(device_el.findtext("name") or "") or "?"
    label = f"{what} device {name[:_MAX_NAME_CHARS]}"
    parent = nodedev_name_to_address(device_el.findtext("parent"))
    if parent is None:
        return None
    type_el = cap.find("type")
    type_id = (type_el.get("id") or "").strip() if type_el is not None else ""
    if not type_id:
        raise InvalidInputError(f"{element_where(label, cap)}: the mdev capability has no <type id=...>")
    uuid = one_line(cap.findtext("uuid") or "").lower()
    if not uuid and (match := _MDEV_NAME.match(name.lower())):
        uuid = "-".join(match.groups())
    if not _UUID.match(uuid):
        raise InvalidInputError(f"{element_where(label, cap)}: the mdev has no readable <uuid> ({uuid or 'none'!r})")
    group = cap.find("iommuGroup")
    return Mdev(uuid, type_id, parent,
                None if group is None else read_int_attr(group, "number", what=label))


def _mdev_type(el: etree._Element, label: str) -> MdevType:
    type_id = (el.get("id") or "").strip()
    if not type_id:
        raise InvalidInputError(f"{element_where(label, el)}: an mdev <type> has no id")
    available = el.find("availableInstances")
    return MdevType(
        id=type_id,
        name=one_line(el.findtext("name") or "") or type_id,
        device_api=one_line(el.findtext("deviceAPI") or "") or "vfio-pci",
        available=0 if available is None else read_int(
            available.text, what=label, element=available, field="available instances", maximum=INT32_MAX
        ),
    )


def _path(text: str | None, address: str) -> tuple[str | None, tuple[str, ...]]:
    """Root complex and bridges (nearest first) from a sysfs path ending at ``address``; unknown otherwise."""
    match = _PATH.match((text or "").strip())
    if not match:
        return None, ()
    chain = [part.lower() for part in match.group(2).strip("/").split("/")]
    if chain[-1] != address:
        return None, ()
    return match.group(1).lower(), tuple(reversed(chain[:-1]))


def _address(el: etree._Element, label: str) -> str:
    """An ``<address domain bus slot function>`` (hex) as ``dddd:bb:ss.f``."""
    parts = []
    for attr in ("domain", "bus", "slot", "function"):
        text = (el.get(attr) or "").strip()
        try:
            value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
        except ValueError:
            raise InvalidInputError(
                f"{element_where(label, el)}: <address> {attr} {text!r} is not a number"
            ) from None
        if not 0 <= value <= _FIELD_MAX[attr]:
            raise InvalidInputError(f"{element_where(label, el)}: <address> {attr} {text!r} is out of range")
        parts.append(value)
    return format_pci_address(*parts)


def _link(cap: etree._Element, label: str) -> PciLink | None:
    links: dict[str, tuple[float, int]] = {}
    for el in cap.findall("pci-express/link"):
        speed, width = (el.get("speed") or "").strip(), el.get("width")
        if not _SPEED.match(speed) or width is None:
            continue  # libvirt omits speed or width it cannot read: the link stays unknown
        links[el.get("validity") or ""] = (float(speed), read_int_attr(el, "width", what=label))
    now = links.get("sta")
    if now is None:
        return None
    most = links.get("cap")
    return PciLink(now[0], now[1], most[0] if most else None, most[1] if most else None)


def with_parent_bridges(devices: Iterable[PciDevice]) -> tuple[PciDevice, ...]:
    """``devices`` with the bridges of those whose path said nothing, followed through ``parent`` links.

    Raises:
        InvalidInputError: parent links that come back to a device (a cycle).
    """
    by_address = {d.address: d for d in devices}
    out = []
    for dev in by_address.values():
        if dev.root_complex is not None or dev.bridges:
            out.append(dev)
            continue
        chain: list[str] = []
        root_complex = None
        parent = dev.parent
        while parent is not None and parent in by_address:
            if parent == dev.address or parent in chain:
                raise InvalidInputError(f"PCI device {dev.address}: its <parent> links come back to {parent}")
            chain.append(parent)
            upper = by_address[parent]
            if upper.root_complex is not None:  # a bridge whose path was read: the rest is known
                chain.extend(upper.bridges)
                root_complex = upper.root_complex
                break
            parent = upper.parent
        out.append(dev if not chain else replace(dev, bridges=tuple(chain), root_complex=root_complex))
    return tuple(sorted(out, key=lambda d: d.address))


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
