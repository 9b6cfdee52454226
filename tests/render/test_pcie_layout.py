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
from vnuma.render.view import RenderOptions
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
    for e in layout.expanders:  # every expander's devices sit on its guest cell
        assert {d.guest_cell for d in devices if tree[d.address][0] == e.index} == {int(e.node)}
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
