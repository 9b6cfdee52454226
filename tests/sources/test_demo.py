"""The shipped demo host: its capabilities, its test-driver node file, and libvirt reading both."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.demo import DEMO_URI, demo_capabilities_path, demo_node_path, libvirt_uri
from vnuma.sources.nodedev import parse_nodedev, parse_nodedev_file_content
from vnuma.topology import KIB_PER_GIB, PAGE_1G, PAGE_2M, PAGE_4K, DeviceKind, Host, PciDevice, format_cpuset
from vnuma.topology.hostcheck import check_host

SCHEMAS = Path("/usr/share/libvirt/schemas")


def demo_host() -> Host:
    data = demo_capabilities_path().read_bytes()
    return parse_capabilities(data, name="demo", what="demo-capabilities.xml")


def demo_devices() -> tuple[PciDevice, ...]:
    return parse_nodedev_file_content(demo_node_path().read_bytes(), what="demo-node.xml")


def test_paths_point_into_the_package() -> None:
    assert demo_capabilities_path().is_file()
    assert demo_node_path().is_file()
    assert demo_capabilities_path().parent.name == "data"
    # The inventory stores a URI without the checkout's path; connecting resolves it to this vnuma's file.
    assert "/" not in DEMO_URI.removeprefix("test:///")
    assert libvirt_uri(DEMO_URI) == f"test://{demo_node_path().resolve()}"
    assert libvirt_uri("qemu:///system") == "qemu:///system"


def test_four_cells_of_32_cpus_two_per_socket() -> None:
    host = demo_host()
    assert [c.id for c in host.cells] == [0, 1, 2, 3]
    assert {c.id: format_cpuset(c.cpu_ids) for c in host.cells} == {
        0: "0-15,64-79",
        1: "16-31,80-95",
        2: "32-47,96-111",
        3: "48-63,112-127",
    }
    sockets = {c.id: {cpu.socket for cpu in c.cpus} for c in host.cells}
    assert sockets == {0: {0}, 1: {0}, 2: {1}, 3: {1}}


def test_linux_smt_numbering() -> None:
    for cell in demo_host().cells:
        for cpu in cell.cpus:
            core = cpu.id % 64
            assert cpu.siblings == frozenset({core, core + 64})
            assert cpu.core == core % 32


def test_memory_pages_and_distances() -> None:
    host = demo_host()
    for cell in host.cells:
        assert cell.memory_kib == 256 * KIB_PER_GIB
        assert cell.pages_of(PAGE_2M) * PAGE_2M == 32 * KIB_PER_GIB
        assert cell.pages_of(PAGE_1G) * PAGE_1G == 160 * KIB_PER_GIB
        assert cell.pages_of(PAGE_4K) * PAGE_4K == 64 * KIB_PER_GIB
    assert [host.cell(0).distance_to(n) for n in range(4)] == [10, 12, 21, 21]
    assert [host.cell(3).distance_to(n) for n in range(4)] == [21, 21, 12, 10]


def test_node_file_devices_two_gpus_and_a_nic_per_cell() -> None:
    devices = demo_devices()
    by_address = {d.address: d for d in devices}
    expected = Counter({DeviceKind.GPU: 2, DeviceKind.NIC: 1, DeviceKind.OTHER: 3})  # 3 root ports
    for cell in range(4):
        assert Counter(d.kind for d in devices if d.numa_node == cell) == expected
    gpus = [d for d in devices if d.kind is DeviceKind.GPU]
    nics = [d for d in devices if d.kind is DeviceKind.NIC]
    assert len(gpus) == 8 and len(nics) == 4
    assert {(d.vendor_id, d.product_id) for d in gpus} == {("0x10de", "0x2331")}
    assert {d.vendor_id for d in nics} == {"0x15b3"}
    for dev in gpus + nics:
        assert dev.parent is not None
        root_port = by_address[dev.parent]
        assert root_port.kind is DeviceKind.OTHER
        assert (root_port.numa_node, root_port.parent) == (dev.numa_node, None)
    assert "0000:17:00.0" in by_address


def test_capabilities_and_devices_form_a_consistent_host() -> None:
    host = replace(demo_host(), devices=demo_devices())
    assert check_host(host) is host


@pytest.mark.libvirt
def test_demo_files_validate_against_libvirt_schemas() -> None:
    from lxml import etree

    if not (SCHEMAS / "capability.rng").is_file():
        pytest.skip("libvirt RelaxNG schemas are not installed")
    caps = etree.RelaxNG(etree.parse(str(SCHEMAS / "capability.rng")))
    assert caps.validate(etree.parse(str(demo_capabilities_path()))), caps.error_log
    nodedev = etree.RelaxNG(etree.parse(str(SCHEMAS / "nodedev.rng")))
    for device in etree.parse(str(demo_node_path())).getroot().findall("device"):
        assert nodedev.validate(device), (device.findtext("name"), nodedev.error_log)


@pytest.mark.libvirt
def test_libvirt_test_driver_serves_the_demo_devices() -> None:
    libvirt = pytest.importorskip("libvirt")
    conn = libvirt.open(libvirt_uri(DEMO_URI))
    try:
        listed = conn.listAllDevices()
        names = sorted(dev.name() for dev in listed)
        parsed = [parse_nodedev(dev.XMLDesc(), what=dev.name()) for dev in listed]
        info = conn.getInfo()
    finally:
        conn.close()
    assert "computer" in names
    assert tuple(sorted((d for d in parsed if d is not None), key=lambda d: d.address)) == demo_devices()
    assert sum(d is None for d in parsed) == 1  # the computer
    assert info[2] == sum(len(c.cpus) for c in demo_host().cells)  # CPUs in nodeinfo match capabilities
    assert info[4] == len(demo_host().cells)
