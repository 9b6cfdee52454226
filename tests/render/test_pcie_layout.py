"""The guest's PCIe tree: one expander per host root complex, switches mirrored where the host has PIX pairs,
never a guest level better than the host's; and what the real QEMU driver makes of it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.test_nics import DGX
from tests.render.conftest import qemu_argv
from tests.render.scenarios import BY_NAME
from vnuma.placement.model import DeviceAssignment
from vnuma.render import render_domain
from vnuma.render.pcie import DOWNSTREAM, UPSTREAM, PcieLayout, layout_devices
from vnuma.render.view import RenderOptions, build_view
from vnuma.topology import DeviceKind
from vnuma.topology.pcie import Level, pcie_level

KNOWN = {d.address: d for d in DGX.devices}
PLACEABLE = sorted(a for a, d in KNOWN.items() if d.kind in (DeviceKind.GPU, DeviceKind.NIC))


def _tree(layout: PcieLayout) -> dict[str, tuple[str, str | None]]:
    """Device address -> (its expander index, its mirrored switch's upstream index or None)."""
    ports = {p.index: p for p in layout.root_ports}
    expanders = {e.index for e in layout.expanders}
    out = {}
    for h in layout.hostdevs:
        port, switch = ports[str(int(h.bus, 16))], None
        while str(int(port.bus, 16)) not in expanders:
            if port.model == DOWNSTREAM:
                switch = str(int(port.bus, 16))
            port = ports[str(int(port.bus, 16))]
        out[h.address] = (str(int(port.bus, 16)), switch)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PLACEABLE), min_size=1, max_size=12, unique=True), st.integers(0, 3))
def test_the_guest_never_reads_a_level_better_than_the_hosts(addresses: list[str], cells: int) -> None:
    devices = [DeviceAssignment(a, KNOWN[a].kind, (KNOWN[a].numa_node or 0) % (cells + 1), KNOWN[a].numa_node)
               for a in addresses]
    layout = layout_devices("vm", devices, frozenset(range(cells + 1)), "q35", host_devices=KNOWN)
    tree = _tree(layout)
    assert sorted(tree) == sorted(addresses)
    for a in addresses:
        for b in addresses:
            if a >= b:
                continue
            (exp_a, sw_a), (exp_b, sw_b) = tree[a], tree[b]
            host = pcie_level(KNOWN[a], KNOWN[b])
            if sw_a is not None and sw_a == sw_b:  # the guest reads PIX
                assert host is Level.PIX, (a, b, host)
            elif host is Level.PIX and exp_a == exp_b:  # a host switch is mirrored whole
                raise AssertionError(f"{a} and {b} are PIX on the host but not under one guest switch")
            if exp_a == exp_b:  # one guest root complex: the host's too
                assert KNOWN[a].root_complex == KNOWN[b].root_complex
    for e in layout.expanders:  # every expander's devices sit on its guest cell; node-less ones on no node
        mine = [d for d in devices if tree[d.address][0] == e.index]
        if e.node:
            assert {d.guest_cell for d in mine} == {int(e.node)} and all(d.host_cell is not None for d in mine)
        else:
            assert all(d.host_cell is None for d in mine)
    assert {p.model for p in layout.root_ports} <= {"pcie-root-port", UPSTREAM, DOWNSTREAM}


@pytest.mark.libvirt
@pytest.mark.parametrize("name", ["gpus-two-root-complexes", "nic-vf-per-gpu"])
def test_the_qemu_driver_builds_the_mirrored_tree_on_the_guest_node(embedded: Any, name: str) -> None:
    scenario = BY_NAME[name]
    xml = render_domain(scenario.host, scenario.placement, options=replace(RenderOptions(), domain_type="qemu"))
    devices = [json.loads(m) for m in re.findall(r"-device '(\{[^']*\})'", qemu_argv(embedded, xml))]
    by_id = {d["id"]: d for d in devices if "id" in d}
    rcs = {KNOWN[d.address].root_complex for d in scenario.placement.devices}
    pxbs = [d for d in devices if d["driver"] == "pxb-pcie"]
    assert len(pxbs) == len(rcs) and {d["numa_node"] for d in pxbs} == {0}
    for dev in (d for d in devices if d["driver"] == "vfio-pci"):
        port = by_id[dev["bus"]]
        chain = []
        while port["driver"] != "pxb-pcie":
            chain.append(port["driver"])
            port = by_id[port["bus"]]
        assert chain in (["pcie-root-port"], ["xio3130-downstream", "x3130-upstream", "pcie-root-port"])
        assert dev["host"] in {d.address for d in scenario.placement.devices}
    upstreams = [d for d in devices if d["driver"] == "x3130-upstream"]
    assert len(upstreams) == len(rcs)  # each root complex's GPUs sit under one host switch here


@pytest.mark.libvirt
def test_a_device_the_host_gives_no_node_sits_on_an_expander_without_one(embedded: Any, conn: Any) -> None:
    from vnuma.render.guestview import as_dict

    lost = next(a for a, d in KNOWN.items() if d.numa_node is None and d.kind is DeviceKind.NIC)
    scenario = BY_NAME["nic-vf-per-gpu"]
    gpu = next(d for d in scenario.placement.devices if d.kind is DeviceKind.GPU)
    p = replace(scenario.placement, devices=(gpu, DeviceAssignment(lost, DeviceKind.NIC, 0, None)))
    xml = render_domain(scenario.host, p, options=replace(RenderOptions(), domain_type="qemu"))
    conn.defineXML(xml).undefine()  # libvirt takes an expander without <node>
    devices = [json.loads(m) for m in re.findall(r"-device '(\{[^']*\})'", qemu_argv(embedded, xml))]
    pxbs = sorted((d["id"], d.get("numa_node")) for d in devices if d["driver"] == "pxb-pcie")
    assert [n for _id, n in pxbs] == [0, None]  # the GPU's on guest node 0, the node-less NIC's on none
    view = as_dict(build_view(scenario.host, p, RenderOptions()).guest)
    nic = next(d for d in view["devices"] if d["address"] == lost)
    assert nic["node"] is None and nic["launch"] == ""
    assert all(lost not in n["devices"] for n in view["nodes"])
