"""The real QEMU driver without a daemon (the ``embedded`` fixture of tests/conftest.py) turns a domain into the
QEMU command line it would run (``domainXMLToNative``)."""

from __future__ import annotations

from typing import Any

from lxml import etree


def qemu_argv(conn: Any, xml: str) -> str:
    """The command line of ``xml`` without its ``<numatune>``/``<memoryBacking>`` (the driver refuses bindings
    to host nodes and hugepage pools this machine lacks; callers check those in the XML) and with each VF's
    ``<interface type='hostdev'>`` as the ``<hostdev>`` it is (the conversion turns interfaces into
    ``ethernet`` ones)."""
    root = etree.fromstring(xml.encode())
    for tag in ("numatune", "memoryBacking"):
        found = root.find(tag)
        if found is not None:
            root.remove(found)
    vf_interfaces_as_hostdevs(root)
    return str(conn.domainXMLToNative("qemu-argv", etree.tostring(root).decode(), 0))


def vf_interfaces_as_hostdevs(root: etree._Element) -> None:
    """Each ``<interface type='hostdev'>`` (an SR-IOV VF) replaced by the ``<hostdev>`` it is, at its guest
    address: domxml-to-native turns network interfaces into ``ethernet`` ones (it has no host to take a VF
    from) and then fails on the model a hostdev interface has none of."""
    for iface in root.findall("devices/interface[@type='hostdev']"):
        hostdev = etree.Element("hostdev", mode="subsystem", type="pci", managed="yes")
        etree.SubElement(hostdev, "driver", name="vfio")
        source = etree.SubElement(hostdev, "source")
        source.append(iface.find("source/address"))
        source[0].attrib.pop("type", None)
        hostdev.append(iface.find("address"))
        iface.getparent().replace(iface, hostdev)
