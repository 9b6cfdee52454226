"""The guest view agrees with the domain XML it is rendered beside, for every golden scenario.

The domain is read back as libvirt reads it: guest cells from
``<cpu><numa>``, each hostdev's guest node from the expander its root port
plugs into, and its guest bus from the expander's ``busNr`` and the port's
place among the expander's ports (the firmware's numbering, which
tests/integration/test_guest_view.py checks in a booted guest).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from tests.render.scenarios import SCENARIOS, Scenario
from vnuma.render.domain import render_domain
from vnuma.render.guestview import HINT_PREFIX, GuestNode, GuestView, as_dict, launch_prefix
from vnuma.render.view import RenderOptions, build_view
from vnuma.topology import KIB_PER_GIB, PAGE_1G, parse_cpuset


def _rendered(s: Scenario) -> tuple[etree._Element, GuestView]:
    options = replace(s.options, guest_hints=True)
    xml = render_domain(s.host, s.placement, options=options, template=s.template)
    return etree.fromstring(xml.encode()), build_view(s.host, s.placement, options).guest


def _devices_from_xml(root: etree._Element) -> dict[str, tuple[int, str]]:
    """Host PCI address (a mediated device's UUID) -> (guest node, guest PCI address), from the controllers,
    hostdevs (PCI and mdev) and hostdev interfaces (SR-IOV VFs). Bus numbers as firmware gives them: depth
    first from each expander's busNr, every port (root, switch upstream, switch downstream) taking the next
    number for its secondary bus."""
    controllers = {int(c.get("index")): c for c in root.iterfind("devices/controller[@type='pci']")}
    children: dict[int, list[etree._Element]] = {}
    for c in controllers.values():
        if c.get("model") != "pcie-root" and c.find("address") is not None:
            children.setdefault(int(c.find("address").get("bus"), 16), []).append(c)
    secondary: dict[int, tuple[int, int]] = {}  # port index -> (its secondary bus, guest node)

    def number(parent: int, counter: int, node: int) -> int:
        for port in sorted(children.get(parent, []), key=lambda c: int(c.find("address").get("slot"), 16)):
            counter += 1
            secondary[int(port.get("index"))] = (counter, node)
            counter = number(int(port.get("index")), counter, node)
        return counter

    for c in controllers.values():
        if c.get("model") == "pcie-expander-bus":
            number(int(c.get("index")), int(c.find("target").get("busNr")), int(c.findtext("target/node")))
    out: dict[str, tuple[int, str]] = {}
    for dev in [*root.iterfind("devices/hostdev"), *root.iterfind("devices/interface[@type='hostdev']")]:
        src = dev.find("source/address")
        host_address = src.get("uuid") if dev.get("type") == "mdev" else "{:04x}:{:02x}:{:02x}.{:x}".format(
            *(int(src.get(k), 16) for k in ("domain", "bus", "slot", "function"))
        )
        bus, node = secondary[int(dev.find("address").get("bus"), 16)]
        out[host_address] = (node, f"0000:{bus:02x}:00.0")
    return out


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_guest_view_is_what_the_domain_xml_gives_the_guest(scenario: Scenario) -> None:
    root, view = _rendered(scenario)
    cells = root.findall("cpu/numa/cell")
    assert [n.id for n in view.nodes] == [int(c.get("id")) for c in cells]
    for node, cell in zip(view.nodes, cells, strict=True):
        assert frozenset(node.vcpus) == parse_cpuset(cell.get("cpus") or "")
        assert node.memory_kib == int(cell.get("memory"))
        assert dict(node.distances) == {
            int(s.get("id")): int(s.get("value")) for s in cell.iterfind("distances/sibling")
        }
    assert {d.address: (d.node, d.guest_address) for d in view.devices} == _devices_from_xml(root)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_oem_string_carries_the_guest_view_json(scenario: Scenario) -> None:
    root, view = _rendered(scenario)
    entries = root.findall("sysinfo[@type='smbios']/oemStrings/entry")
    assert len(entries) == 1 and root.find("os/smbios").get("mode") == "sysinfo"
    text = entries[0].text or ""
    assert text.startswith(HINT_PREFIX)
    assert json.loads(text[len(HINT_PREFIX) :]) == as_dict(view)


def test_without_guest_hints_the_guest_gets_no_oem_string() -> None:
    s = SCENARIOS[0]
    root = etree.fromstring(s.render().encode())
    assert root.find("sysinfo") is None and root.find("os/smbios") is None


def test_gpus_are_numbered_in_guest_pci_order_and_launch_on_their_node() -> None:
    host = make_host("g", gpus_per_cell=2, nics_per_cell=1)
    placement = make_placement(
        host, [CellSpec(0, 4, 4 * KIB_PER_GIB, PAGE_1G, gpus=2), CellSpec(1, 4, 4 * KIB_PER_GIB, PAGE_1G, gpus=1)]
    )
    view = build_view(host, placement, RenderOptions()).guest
    gpus = sorted((d for d in view.devices if d.kind == "gpu"), key=lambda d: d.guest_address)
    assert [d.cuda_index for d in gpus] == list(range(len(gpus))) == [0, 1, 2]
    doc = as_dict(view)
    for dev in doc["devices"]:
        assert dev["launch"] == (
            f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={dev['cuda_index']} "
            f"numactl --cpunodebind={dev['node']} --membind={dev['node']}"
        )
    node0 = next(n for n in doc["nodes"] if n["id"] == 0)
    on0 = sorted(str(d["cuda_index"]) for d in doc["devices"] if d["node"] == 0)
    assert len(on0) == 2
    assert (
        node0["launch"]
        == f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={','.join(on0)} numactl --cpunodebind=0 --membind=0"
    )


def test_a_node_without_vcpus_binds_memory_only_and_its_cpu_nodes_prefer_rather_than_bind() -> None:
    view = GuestView("v", "t", "h", (GuestNode(0, (0, 1), 1024, 4, ()), GuestNode(1, (), 1024, 4, ())), ())
    assert launch_prefix(view, 1) == "numactl --membind=1"
    assert launch_prefix(view, 0) == "numactl --cpunodebind=0 --preferred=0"  # may spill into node 1
    alone = GuestView("v", "t", "h", view.nodes[:1], ())
    assert launch_prefix(alone, 0) == "numactl --cpunodebind=0 --membind=0"


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.placement.devices], ids=lambda s: s.name)
def test_the_guests_pci_order_follows_its_nodes(scenario: Scenario) -> None:
    _root, view = _rendered(scenario)
    by_address = sorted(view.devices, key=lambda d: d.guest_address)
    assert [d.node for d in by_address] == sorted(d.node for d in view.devices)
    gpus = [d for d in by_address if d.cuda_index is not None]
    assert [d.cuda_index for d in gpus] == list(range(len(gpus)))
