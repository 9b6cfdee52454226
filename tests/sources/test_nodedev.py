"""libvirt node-device parser: GPUs, accelerators, NICs, bridges, non-PCI devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import make_host
from vnuma.errors import InvalidInputError
from vnuma.sources.nodedev import (
    nodedev_name_to_address,
    parse_nodedev,
    parse_nodedev_file_content,
    read_nodedevs,
)
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.leftout import LeftOut, usable

DATA = Path(__file__).resolve().parent.parent / "data" / "nodedev"


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


CASES = [
    (
        "gpu-h100.xml",
        PciDevice("0000:17:00.0", DeviceKind.GPU, "0x10de", "0x2331", 0, "0000:16:01.0"),
    ),
    (
        "accel-gaudi2.xml",
        PciDevice("0000:b3:00.0", DeviceKind.GPU, "0x1da3", "0x1020", 1, "0000:b2:08.0"),
    ),
    (
        "nic-cx7.xml",
        PciDevice("0001:37:00.1", DeviceKind.NIC, "0x15b3", "0x1021", 2, "0001:36:01.0"),
    ),
    ("root-port.xml", PciDevice("0000:16:01.0", DeviceKind.OTHER, "0x8086", "0x352a", 0, None)),
    ("sata-numa-minus1.xml", PciDevice("0000:00:17.0", DeviceKind.OTHER, "0x8086", "0x1bf2", None, None)),
    (
        "legacy-no-class-no-numa.xml",
        PciDevice("0000:03:00.0", DeviceKind.OTHER, "0x8086", "0x10d3", None, "0000:00:1c.0"),
    ),
    ("usb-device.xml", None),
]


def _identity(d: PciDevice | None) -> tuple[object, ...] | None:
    """What these tests check: address, kind, ids, node, parent (the PCIe layout: test_pcie_layout.py)."""
    return None if d is None else (d.address, d.kind, d.vendor_id, d.product_id, d.numa_node, d.parent)


@pytest.mark.parametrize(("file", "expected"), CASES, ids=[c[0].removesuffix(".xml") for c in CASES])
def test_fixture_devices(file: str, expected: PciDevice | None) -> None:
    assert _identity(parse_nodedev(read(file), what=file)) == _identity(expected)


def test_the_product_text_is_the_model_name() -> None:
    """``<product id='0x2331'>GH100 [H100 PCIe]</product>``: the name refusals quote, on one line; none when empty."""
    gpu = parse_nodedev(read("gpu-h100.xml"), what="gpu")
    assert gpu is not None and (gpu.product_name, gpu.model()) == ("GH100 [H100 PCIe]", "H100 PCIe (10de:2331)")
    spaced = read("gpu-h100.xml").replace(b"GH100 [H100 PCIe]", b"\n  GH100\n [H100 PCIe] ")
    assert parse_nodedev(spaced, what="gpu").product_name == "GH100 [H100 PCIe]"  # type: ignore[union-attr]
    bare = read("gpu-h100.xml").replace(b"GH100 [H100 PCIe]", b"")
    assert parse_nodedev(bare, what="gpu").product_name is None  # type: ignore[union-attr]


def test_bundle_under_any_root_keeps_pci_devices_sorted() -> None:
    devices = parse_nodedev_file_content(read("bundle-devices.xml"), what="bundle-devices.xml")
    assert [d.address for d in devices] == ["0000:2a:00.0", "0000:c6:01.0", "0000:c7:00.0"]
    assert [d.kind for d in devices] == [DeviceKind.NIC, DeviceKind.OTHER, DeviceKind.GPU]
    assert devices[2].parent == devices[1].address
    assert [d.numa_node for d in devices] == [0, 1, 1]


def test_file_content_accepts_a_single_device() -> None:
    assert parse_nodedev_file_content(read("gpu-h100.xml"), what="gpu") == (
        parse_nodedev(read("gpu-h100.xml"), what="gpu"),
    )


def test_file_content_of_non_pci_device_is_empty() -> None:
    assert parse_nodedev_file_content(read("usb-device.xml"), what="usb") == ()


def test_many_documents_in_document_order() -> None:
    names = ["nic-cx7.xml", "usb-device.xml", "gpu-h100.xml", "root-port.xml", "accel-gaudi2.xml"]
    found = read_nodedevs((name, read(name)) for name in names)
    assert [d.address for d in found.devices] == ["0001:37:00.1", "0000:17:00.0", "0000:16:01.0", "0000:b3:00.0"]
    assert found.left_out == found.mdevs == ()


def test_same_address_twice_is_left_out_by_the_host_and_refused_in_a_strict_read() -> None:
    found = read_nodedevs([("a.xml", read("gpu-h100.xml")), ("b.xml", read("gpu-h100.xml")),
                           ("c.xml", read("nic-cx7.xml"))])
    assert [d.address for d in found.devices] == ["0000:17:00.0", "0000:17:00.0", "0001:37:00.1"]
    host = usable(Host("h", make_host(cells=3).cells, found.devices))
    assert [d.address for d in host.host.devices] == ["0001:37:00.1"]
    assert host.left_out == (LeftOut("device 0000:17:00.0 (GPU)", "listed twice"),)
    twice = b"<devices>" + read("gpu-h100.xml") + read("gpu-h100.xml") + b"</devices>"
    with pytest.raises(InvalidInputError) as info:
        parse_nodedev_file_content(twice, "d.xml")
    assert str(info.value) == "d.xml: device 0000:17:00.0 (GPU) would be left out: listed twice"


def test_one_unreadable_device_among_many_is_left_out_named_as_the_gpu_it_is() -> None:
    bad = _pci("<class>0x030200</class><domain>0</domain><bus>300</bus><slot>0</slot><function>0</function>" + IDS,
               name="pci_0000_04_00_0")
    doc = f"<devices>{read('nic-cx7.xml').decode()}{bad}{read('root-port.xml').decode()}</devices>"
    found = read_nodedevs([("many.xml", doc)])
    assert [d.address for d in found.devices] == ["0001:37:00.1", "0000:16:01.0"]
    (left,) = found.left_out
    assert left.what == "device 0000:04:00.0 (GPU)"
    assert left.why == "cannot be read (many.xml line 27: <bus> a number '300' is above 255)"
    with pytest.raises(InvalidInputError, match=r"^many\.xml: device 0000:04:00\.0 \(GPU\) would be left out"):
        parse_nodedev_file_content(doc, "many.xml")


def _pci(body: str, *, name: str = "pci_0000_17_00_0", parent: str = "computer") -> str:
    cap = f"<capability type='pci'>{body}</capability>"
    return f"<device><name>{name}</name><parent>{parent}</parent>{cap}</device>"


ADDRESS = "<domain>0</domain><bus>23</bus><slot>0</slot><function>0</function>"
IDS = "<product id='0x2331'/><vendor id='0x10de'/>"


def test_tolerates_uppercase_and_hex_fields() -> None:
    doc = _pci(
        "<class>0X030200</class><domain>0x0</domain><bus>0x17</bus><slot>0x1F</slot><function>7</function>"
        "<product id='2331'/><vendor id='0x10DE'/><numa node='3'/>",
        parent="pci_0000_16_01_0".upper(),
    )
    assert parse_nodedev(doc, what="d") == PciDevice(
        "0000:17:1f.7", DeviceKind.GPU, "0x10de", "0x2331", 3, "0000:16:01.0", pci_class=0x030200
    )


def test_numa_element_without_node_attribute() -> None:
    device = parse_nodedev(_pci(ADDRESS + IDS + "<numa/>"), what="d")
    assert device is not None
    assert device.numa_node is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<domain>0</domain><slot>0</slot><function>0</function>" + IDS, "PCI capability has no <bus>"),
        (ADDRESS.replace("23", "twenty-three") + IDS, "<bus> a number 'twenty-three' is not an integer"),
        (ADDRESS + "<vendor id='0x10de'/>", "PCI capability has no <product>"),
        (ADDRESS + "<product id='0xzz'/><vendor id='0x10de'/>", "<product> id '0xzz' is not a 16-bit hex id"),
        (ADDRESS + "<product id='0x2331'/><vendor/>", "<vendor> id '' is not a 16-bit hex id"),
        ("<class>display</class>" + ADDRESS + IDS, "PCI class 'display' is not hex"),
        (ADDRESS + IDS + "<numa node='one'/>", "attribute node 'one' is not an integer"),
    ],
    ids=["no-bus", "bad-bus", "no-product", "bad-product", "no-vendor-id", "bad-class", "bad-numa"],
)
def test_bad_pci_fields_name_file_and_device(body: str, expected: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_nodedev(_pci(body), what="gpu.xml")
    assert str(info.value).startswith("gpu.xml device pci_0000_17_00_0 line 1: ")
    assert expected in str(info.value)


def test_wrong_root_for_single_device() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_nodedev(b"<capabilities/>", what="x.xml")
    assert str(info.value) == "x.xml: root element is <capabilities>, not <device>"
    assert "virsh nodedev-dumpxml" in (info.value.hint or "")


def test_wrapper_without_devices_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"x\.xml: no <device> elements under <capabilities>"):
        parse_nodedev_file_content(b"<capabilities><host/></capabilities>", what="x.xml")


def test_malformed_device_file() -> None:
    with pytest.raises(InvalidInputError, match=r"d\.xml: malformed XML"):
        parse_nodedev_file_content(read("gpu-h100.xml")[:200], what="d.xml")


@pytest.mark.parametrize(
    ("name", "address"),
    [
        ("pci_0000_40_01_1", "0000:40:01.1"),
        ("pci_0001_c7_1f_7", "0001:c7:1f.7"),
        ("computer", None),
        ("usb_usb1", None),
        ("net_eth0_52_54_00_12_34_56", None),
        ("pci_0000_40_01", None),
        (None, None),
    ],
    ids=["root-port", "domain-1", "computer", "usb", "net", "truncated", "absent"],
)
def test_parent_names(name: str | None, address: str | None) -> None:
    assert nodedev_name_to_address(name) == address


def test_file_content_takes_what_positionally() -> None:
    assert len(parse_nodedev_file_content(read("bundle-devices.xml"), "bundle")) == 3


# ------------------------------------------------------------- mediated devices ----


def _mdevs(doc: bytes | str, what: str) -> tuple[object, ...]:
    found = read_nodedevs([(what, doc)])
    return tuple(sorted(found.mdevs, key=lambda m: m.uuid)) + found.left_out


def test_existing_mediated_devices_are_read_with_their_parent_and_group() -> None:
    from vnuma.topology import Mdev

    data = (Path(__file__).resolve().parent.parent / "data" / "nodedev" / "mdevs-existing.xml").read_bytes()
    assert _mdevs(data, "m") == (
        Mdev("4b20d080-1b54-4048-85b3-a6a62d165c01", "nvidia-18", "0000:86:00.0", 131),
        Mdev("9f1c6e2a-0d3b-4c51-8a77-2e6b1f0c9d44", "nvidia-18", "0000:86:00.0", 132),  # UUID from its name
        Mdev("c3a5e7d1-88f2-4a0b-9d6e-51b2a4f7e013", "nvidia-1049", "0000:3b:00.4", 140),
    )
    assert parse_nodedev_file_content(data, "m") == ()  # no PCI function among them


@pytest.mark.parametrize(
    ("capability", "words"),
    [
        ("<capability type='mdev'><uuid>4b20d080-1b54-4048-85b3-a6a62d165c01</uuid></capability>", "no <type id"),
        ("<capability type='mdev'><type id='x'/><uuid>nope</uuid></capability>", "no readable <uuid>"),
        ("<capability type='mdev'><type id='x'/><uuid>4b20d080-1b54-4048-85b3-a6a62d165c01</uuid>"
         "<iommuGroup number='many'/></capability>", "number"),
    ],
)
def test_a_bad_mdev_is_left_out_naming_the_device(capability: str, words: str) -> None:
    doc = f"<device><name>mdev_x</name><parent>pci_0000_86_00_0</parent>{capability}</device>"
    (left,) = _mdevs(doc, "m.xml")
    assert isinstance(left, LeftOut) and left.what == "mediated device mdev_x"
    assert words in left.why and left.why.startswith("cannot be read (m.xml")


def test_an_mdev_on_a_non_pci_parent_is_skipped() -> None:
    doc = ("<device><name>mdev_96c03c6a_a109_44fe_816a_ba371542164b</name><parent>css_0_0_0072</parent>"
           "<capability type='mdev'><type id='vfio_ccw-io'/><uuid>96c03c6a-a109-44fe-816a-ba371542164b</uuid>"
           "</capability></device>")
    assert _mdevs(doc, "s390") == ()
