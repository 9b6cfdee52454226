"""The guest's NCCL topology file: golden files on the DGX-like host, NCCL's own reading of it, and the
GPU/NIC proximity it tells for every pair equal to the host's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from tests.placement.test_nics import DGX, _dgx
from tests.render.nccl_reader import NcclParseError, read_topology
from tests.render.test_golden import assert_golden
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import DeviceAssignment, Placement, VmRequest
from vnuma.render.nccltopo import nccl_topology
from vnuma.render.pcie import PcieLayout
from vnuma.render.view import RenderOptions, build_view
from vnuma.sources.nvsmitopo import parse_topo_matrix, with_nvlinks
from vnuma.topology import PAGE_4K, DeviceKind, Host
from vnuma.topology.nvlink import nvlink_count
from vnuma.topology.pcie import Level, pcie_level

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "nccl"
TOPO_M = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi" / "dgx-like-topo-m.txt"
KNOWN = {d.address: d for d in DGX.devices}
GPUS = sorted(a for a, d in KNOWN.items() if d.kind is DeviceKind.GPU)
NICS = sorted(a for a, d in KNOWN.items() if d.kind is DeviceKind.NIC)


def _placed(host: Host, **asks: object) -> Placement:
    vcpus = int(asks.pop("vcpus", 4))  # type: ignore[call-overload]
    chosen = place(VmRequest("vm1", "acme", vcpus, 4 << 20, page_size_kib=PAGE_4K, **asks), Fleet([host])).chosen
    assert chosen is not None
    return chosen


def _linked(host: Host) -> Host:
    """``host`` (the DGX-like one) with the NVLinks its saved ``nvidia-smi topo -m`` shows."""
    return with_nvlinks(host, parse_topo_matrix(TOPO_M.read_text(), TOPO_M.name), TOPO_M.name)


def _topology(host: Host, placement: Placement) -> str:
    return nccl_topology(host, placement, build_view(host, placement, RenderOptions()))


SCENARIOS = {
    # 4 GPUs and a NIC beside each on one node: two host switches mirrored, under two guest root complexes.
    "dgx-4-gpus-one-node": {"gpus": 4, "nics_per_gpu": True},
    # 4 GPUs and their NICs over two guest nodes, one host switch on each.
    "dgx-4-gpus-two-nodes": {"gpus": 4, "nics_per_gpu": True, "numa_nodes": 2, "vcpus": 8},
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_topology_matches_its_golden_file_and_nccl_reads_it(name: str, update_golden: bool) -> None:
    host = _linked(_dgx("dgx"))
    text = _topology(host, _placed(host, **SCENARIOS[name]))
    assert_golden(text, GOLDEN / f"{name}.xml", update_golden)
    system = read_topology(text)
    assert [int(g.attrs["dev"]) for g in system.iter("gpu")] == list(range(4))
    assert system.iter("nvlink")  # the host's NVLinks between the VM's GPUs


def test_without_nvlink_facts_the_file_names_none() -> None:
    host = _dgx("dgx")
    assert "<nvlink" not in _topology(host, _placed(host, gpus=4))


def test_nccls_reader_refuses_what_nccl_refuses() -> None:
    good = '<system version="1">\n  <cpu numaid="0" arch="x86_64"/>\n</system>\n'
    read_topology(good)
    for bad in ('<?xml version="1.0"?>\n' + good, good.replace('arch="x86_64"', ""),
                good.replace("\n  ", "\n\t"), good.replace('"1"', '"2"')):
        with pytest.raises(NcclParseError):
            read_topology(bad)


def test_a_vm_without_gpus_has_no_topology() -> None:
    host = _dgx("dgx")
    placement = _placed(host, gpus=1, nics_per_gpu=True)
    no_gpu = replace(placement, devices=tuple(d for d in placement.devices if d.kind is DeviceKind.NIC))
    with pytest.raises(InvalidInputError, match="has no GPU"):
        _topology(host, no_gpu)


LINKED = _linked(DGX)
BASE = _placed(_dgx("dgx"), gpus=2, numa_nodes=2, vcpus=8)
GUEST_CELL = {c.host_cell: c.guest_cell for c in BASE.cells}


def _assignment(address: str) -> DeviceAssignment:
    node = KNOWN[address].numa_node
    return DeviceAssignment(address, KNOWN[address].kind, GUEST_CELL[node] if node is not None else 0, node)


def _host_class(a: str, b: str) -> str:
    """Proximity as the host has it: one switch, one root complex, one node, across (unknown counts as across:
    the guest never reads better). The guest mirrors single switches (PIX) only, so PXB reads as PHB."""
    level = pcie_level(KNOWN[a], KNOWN[b])
    return {Level.PIX: "switch", Level.PXB: "root complex", Level.PHB: "root complex",
            Level.NODE: "node"}.get(level, "across")  # type: ignore[arg-type]


def _file_classes(text: str, pcie: PcieLayout) -> dict[str, tuple[str, str | None, int]]:
    """Guest bus id of each GPU/NIC -> (its cpu's numaid, the switch it nests in, its guest root complex: the
    expander whose bus range holds its bus, as the guest's sysfs path pci0000:BB shows it)."""
    starts = sorted(int(e.bus_nr) for e in pcie.expanders)
    out = {}
    for pci in etree.fromstring(text.encode()).iter("pci"):
        if pci.find("gpu") is None and pci.find("nic") is None:
            continue
        parent = pci.getparent()
        switch = parent.get("busid") if parent.tag == "pci" else None
        cpu = next(a for a in pci.iterancestors() if a.tag == "cpu")
        bus = int(pci.get("busid").split(":")[1], 16)
        out[pci.get("busid")] = (cpu.get("numaid"), switch, max(s for s in starts if s <= bus))
    return out


def _guest_class(a: tuple[str, str | None, int], b: tuple[str, str | None, int]) -> str:
    if a[0] != b[0] or a[0] == "-1":
        return "across"
    if a[1] is not None and a[1] == b[1]:
        return "switch"
    return "root complex" if a[2] == b[2] else "node"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(GPUS), min_size=1, max_size=6, unique=True),
       st.lists(st.sampled_from(NICS), max_size=6, unique=True))
def test_every_pair_reads_in_the_file_as_it_is_on_the_host(gpus: list[str], nics: list[str]) -> None:
    placement = replace(BASE, devices=tuple(_assignment(a) for a in sorted(gpus + nics)))
    view = build_view(LINKED, placement, RenderOptions())
    text = nccl_topology(LINKED, placement, view)
    read_topology(text)
    guest = {h.address: h.guest_address for h in view.pcie.hostdevs}
    classes = _file_classes(text, view.pcie)
    assert sorted(classes) == sorted(guest[a] for a in gpus + nics)
    for a in gpus + nics:
        for b in gpus + nics:
            if a < b:
                assert _guest_class(classes[guest[a]], classes[guest[b]]) == _host_class(a, b), (a, b)
    links = {(p.getparent().getparent().get("busid"), p.get("target")): int(p.get("count"))
             for p in etree.fromstring(text.encode()).iter("nvlink")}
    assert links == {(guest[a], guest[b]): nvlink_count(LINKED.nvlinks, a, b) for a in gpus for b in gpus
                     if nvlink_count(LINKED.nvlinks, a, b)}
    gpu_order = [guest[a] for a in sorted(gpus)]
    devs = {p.get("busid"): int(p.find("gpu").get("dev"))
            for p in etree.fromstring(text.encode()).iter("pci") if p.find("gpu") is not None}
    assert [devs[g] for g in gpu_order] == sorted(devs.values())  # NCCL's order is the guest's PCI order


def test_a_virtual_function_reads_its_physical_functions_link() -> None:
    from tests.render.scenarios import BY_NAME

    scenario = BY_NAME["nic-vf-per-gpu"]
    text = _topology(scenario.host, scenario.placement)
    read_topology(text)
    nets = [p for p in etree.fromstring(text.encode()).iter("pci") if p.find("nic") is not None]
    assert nets and all(p.get("link_speed") == "32.0 GT/s PCIe" and p.get("link_width") == "16" for p in nets)
    assert {n.get("speed") for n in etree.fromstring(text.encode()).iter("net")} == {"504128"}
