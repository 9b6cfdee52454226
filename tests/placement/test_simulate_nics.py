"""NICs in traces: device places and NIC requests read from a trace, ``dgx-nics`` simulated (every NIC
within its level of the VM's GPUs, checked here with the hosts' own ``pcie_level``, no NIC or VF twice,
never a PF with one of its VFs), the report's level histogram, and ``trace export`` writing device places
and NIC requests so that a replay asks them again."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.placement.helpers import check_fleet
from vnuma.codec.traces import trace_document
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, NicFunction, Placement, Tenant
from vnuma.placement.nics import nic_pairs, within
from vnuma.placement.objectives import Strategy
from vnuma.simulate import SimulationReport, load_trace, placements_to_list, report_to_dict, run
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.sources.trace import Trace, VmRequest, vf_addresses
from vnuma.sources.tracegen import generate
from vnuma.topology import PAGE_4K, DeviceKind, Host, PciDevice
from vnuma.topology.pcie import Level, pcie_level

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "traces" / "dgx-nics.json"
DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load_trace(EXAMPLE.read_bytes(), str(EXAMPLE))


@pytest.fixture(scope="module", params=list(Strategy), ids=[s.value for s in Strategy])
def simulated(request: pytest.FixtureRequest, trace: Trace) -> SimulationReport:
    return run(trace, request.param, Isolation.CORE)


def _placed(report: SimulationReport) -> list[Placement]:
    return [p for p in report.placements if p is not None]


def _pfs(host: Host) -> list[PciDevice]:
    return [d for d in host.devices if d.kind is DeviceKind.NIC and d.pf is None]


def _perfect_matching(gpus: list[PciDevice], nics: list[PciDevice], level: Level) -> bool:
    """A NIC of its own for every GPU within ``level`` (augmenting paths; the engine's code is not used)."""
    owner: dict[str, int] = {}

    def augment(g: int, seen: set[str]) -> bool:
        for n in nics:
            if n.address in seen or not within(pcie_level(gpus[g], n), level):
                continue
            seen.add(n.address)
            if n.address not in owner or augment(owner[n.address], seen):
                owner[n.address] = g
                return True
        return False

    return all(augment(g, set()) for g in range(len(gpus)))


# ------------------------------------------------------------- the hosts ----


def test_the_example_is_the_generators_output(trace: Trace) -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == generate("dgx-nics", 42)
    assert generate("dgx-nics", 42) == generate("dgx-nics", 42)
    assert trace.scenario == "dgx-nics" and len(trace.hosts) == 12 and len(trace.requests) == 400


def test_dgx_hosts_pair_every_gpu_with_a_nic_below_its_switch(trace: Trace) -> None:
    for host in trace.hosts:
        gpus, pfs = host.devices_of(DeviceKind.GPU), _pfs(host)
        assert (len(gpus), len(pfs), len(host.cells)) == (8, 8, 2)
        assert Counter(d.numa_node for d in (*gpus, *pfs)) == {0: 8, 1: 8}
        assert len({d.root_complex for d in (*gpus, *pfs)}) == 4  # 2 root complexes per socket
        for g in gpus:
            levels = Counter(pcie_level(g, n) for n in pfs)
            assert levels[Level.PIX] == 1 and levels[Level.NODE] == 2 and levels[Level.SYS] == 4
            assert levels[Level.PXB] + levels[Level.PHB] == 1
        seen = Counter(pcie_level(g, n) for g in gpus for n in pfs)
        assert set(seen) == set(Level)  # every level occurs on a host
        for pf in pfs:  # 8 VFs each, numbered after the PF, where the PF is
            assert pf.vfs == vf_addresses(pf.address, 8) and pf.vf_max == 8
            for vf in pf.vfs:
                dev = next(d for d in host.devices if d.address == vf)
                assert (dev.pf, dev.kind, dev.numa_node) == (pf.address, DeviceKind.NIC, pf.numa_node)
                assert (dev.root_complex, dev.bridges) == (pf.root_complex, pf.bridges)
                assert all(pcie_level(g, dev) == pcie_level(g, pf) for g in gpus)


def test_dgx_requests_ask_nics_of_every_kind(trace: Trace) -> None:
    asking = [r for r in trace.requests if r.wants_nics]
    assert all(r.gpus >= 1 for r in asking) and 0 < len(asking) < len(trace.requests)
    assert {r.nic_affinity for r in asking} == set(Level) - {Level.PHB}
    assert Counter(r.nics_per_gpu for r in asking)[True] > len(asking) // 2
    assert any(r.nics == 1 for r in asking)
    assert any(r.nic_function is NicFunction.VF for r in asking)
    vm = next(r for r in asking if r.nics_per_gpu)
    assert vm.nics_per_gpu and vm.nics == 0 and vm.wants_nics


# ------------------------------------------------------------ simulation ----


def test_nic_requests_get_their_nics_within_their_level(trace: Trace, simulated: SimulationReport) -> None:
    kinds = _check_nics(trace, simulated)
    per_gpu = {k for k in kinds if k[0]}
    assert {level for _, level, _ in per_gpu} >= {Level.PIX, Level.PXB}
    assert any(fn is NicFunction.VF for _, _, fn in kinds) and any(not k[0] for k in kinds)


@pytest.mark.parametrize("strategy", list(Strategy), ids=[s.value for s in Strategy])
def test_shared_nics_simulated_gives_every_nic_request_its_level(strategy: Strategy) -> None:
    """Two GPUs per NIC: multi-cell VMs asking NICs once took their GPU from a cell whose NICs were taken
    (the cell set was accepted in one guest order and built in another)."""
    path = REPO / "examples" / "traces" / "shared-nics.json"
    trace = load_trace(path.read_bytes(), str(path))
    report = run(trace, strategy, Isolation.CORE)
    kinds = _check_nics(trace, report)
    assert sum(kinds.values()) == report.nic_placed > 0
    assert any(r.wants_nics and r.numa_nodes == 2 for r, p in zip(trace.requests, report.placements, strict=True)
               if p is not None)


def _check_nics(trace: Trace, simulated: SimulationReport) -> Counter[tuple[bool, Level, NicFunction]]:
    """Check every placed VM's devices against its request and the hosts; the kinds of NIC requests placed."""
    hosts = {h.name: h for h in trace.hosts}
    asked = {r.name: r for r in trace.requests}
    placed = _placed(simulated)
    check_fleet(list(trace.hosts), placed, {})
    held: dict[str, set[str]] = {h: set() for h in hosts}
    kinds: Counter[tuple[bool, Level, NicFunction]] = Counter()
    for p in placed:
        r: VmRequest = asked[p.vm]
        device = {d.address: d for d in hosts[p.host].devices}
        gpus = [device[d.address] for d in p.devices if d.kind is DeviceKind.GPU]
        nics = [device[d.address] for d in p.devices if d.kind is DeviceKind.NIC]
        assert len(gpus) == r.gpus
        for d in (*gpus, *nics):  # no device twice, in this VM or across VMs
            assert d.address not in held[p.host], f"{d.address} on {p.host} twice"
            held[p.host].add(d.address)
        if not r.wants_nics:
            assert nics == [] and p.nic_affinity is None
            continue
        kinds[(r.nics_per_gpu, r.nic_affinity, r.nic_function)] += 1
        assert (p.nic_affinity, p.nics_per_gpu, p.nic_function) == (r.nic_affinity, r.nics_per_gpu, r.nic_function)
        assert all((n.pf is not None) == (r.nic_function is NicFunction.VF) for n in nics)
        if r.nics_per_gpu:
            assert len(nics) == len(gpus)
            assert _perfect_matching(gpus, nics, r.nic_affinity), f"{p.vm}: no pairing within {r.nic_affinity}"
        else:
            assert len(nics) == r.nics
            assert all(any(within(pcie_level(g, n), r.nic_affinity) for g in gpus) for n in nics)
    for name, addresses in held.items():  # never a PF with one of its VFs
        for d in hosts[name].devices:
            if d.pf is not None and d.address in addresses:
                assert d.pf not in addresses, f"{name}: VF {d.address} and its PF {d.pf} both passed through"
    return kinds


def test_the_report_counts_nics_and_levels(trace: Trace, simulated: SimulationReport) -> None:
    hosts = {h.name: h for h in trace.hosts}
    asked = {r.name: r for r in trace.requests}
    d = json.loads(json.dumps(report_to_dict(simulated)))
    placed = _placed(simulated)
    with_nics = [p for p in placed if any(x.kind is DeviceKind.NIC for x in p.devices)]
    assert d["nic_requests"] == sum(1 for r in trace.requests if r.wants_nics)
    assert 0 < d["nic_placed"] == len(with_nics) == sum(1 for p in placed if asked[p.vm].wants_nics)
    nic_devices = [hosts[p.host].devices for p in with_nics]
    vfs = pfs = 0
    used: set[tuple[str, str]] = set()
    for p, devices in zip(with_nics, nic_devices, strict=True):
        by_address = {x.address: x for x in devices}
        for x in p.devices:
            if x.kind is DeviceKind.NIC:
                dev = by_address[x.address]
                vfs += dev.pf is not None
                pfs += dev.pf is None
                used.add((p.host, dev.pf or dev.address))
    assert d["nic_vfs_used"] == vfs > 0 and d["nics_used"] == len(used) <= pfs + vfs
    assert d["nics_total"] == 96
    histogram = d["gpu_nic_levels"]
    pairs = [pair for p in with_nics for pair in nic_pairs(p, hosts[p.host])]
    per_vm = [asked[p.vm].gpus if asked[p.vm].nics_per_gpu else asked[p.vm].nics for p in with_nics]
    assert sum(histogram.values()) == len(pairs) == sum(per_vm)  # a pair per GPU, or per NIC for a count
    assert histogram == {
        key: sum(1 for pair in pairs if (pair.level.value if pair.level else "unknown") == key) for key in histogram
    }
    assert histogram["PIX"] > 0 and histogram["unknown"] == 0
    # a VM asking a NIC per GPU gets a pairing within its level; the report's pairs find it on these hosts
    assert d["gpu_nic_worse"] == 0
    entries = placements_to_list(simulated)
    assert sum(len(e["nics"]) for e in entries) == pfs + vfs


def test_traces_without_nics_report_zeros() -> None:
    path = REPO / "examples" / "traces" / "dual-socket-2cell.json"
    d = report_to_dict(run(load_trace(path.read_bytes(), str(path))))
    assert (d["nic_requests"], d["nic_placed"], d["nics_used"], d["nic_vfs_used"], d["gpu_nic_worse"]) == (0,) * 5
    assert d["nics_total"] == 20 and set(d["gpu_nic_levels"].values()) == {0}


# ---------------------------------------------------------------- loader ----


def _cell(**over: Any) -> dict[str, Any]:
    cell = {
        "id": 0, "cpus": [0, 1, 2, 3], "siblings": [[0, 2], [1, 3]], "memory_mib": 4096,
        "hugepages": {"4": {"total": 1048576, "free": 1048576}}, "distances": {"0": 10},
        "gpus": [], "nics": [],
    }
    return {**cell, **over}


def _request(**over: Any) -> dict[str, Any]:
    req = {
        "tenant": "t", "name": "vm-1", "vcpus": 2, "memory_mib": 1024, "numa_nodes": 1,
        "cpu_policy": "dedicated", "thread_policy": "prefer", "page_size_kib": 4, "gpus": 2,
    }
    return {**req, **over}


def _trace(cells: list[dict[str, Any]] | None = None, requests: list[dict[str, Any]] | None = None) -> bytes:
    return json.dumps({
        "format": "numa-placement-trace", "version": 1, "scenario": "nics", "seed": None, "description": "",
        "hosts": [{"name": "h", "cells": cells if cells is not None else [_cell()]}],
        "requests": requests if requests is not None else [_request()],
    }).encode()


def _two_cells(gpus0: list[Any], nics0: list[Any], gpus1: list[Any] = (), nics1: list[Any] = ()) -> list[Any]:
    return [
        _cell(gpus=gpus0, nics=nics0, distances={"0": 10, "1": 21}),
        _cell(id=1, cpus=[4, 5, 6, 7], siblings=[[4, 6], [5, 7]], gpus=list(gpus1), nics=list(nics1),
              distances={"0": 21, "1": 10}),
    ]


def test_device_places_give_every_level() -> None:
    a = {"address": "0000:12:00.0", "root_complex": "pci0000:10", "switch": "0000:11:00.0"}
    cells = _two_cells(
        [a, {"address": "0000:22:00.0", "root_complex": "pci0000:10",
             "bridges": ["0000:21:00.0", "0000:20:00.0", "0000:10:01.0"]}],
        [
            {"address": "0000:13:00.0", "root_complex": "pci0000:10", "switch": "0000:11:00.0"},  # PIX to a
            {"address": "0000:25:00.0", "root_complex": "pci0000:10",  # PXB to the second GPU: another switch
             "bridges": ["0000:24:00.0", "0000:23:00.0", "0000:10:01.0"]},  # below the same root port
            {"address": "0000:31:00.0", "root_complex": "pci0000:10", "switch": "0000:30:00.0"},  # PHB
            {"address": "0000:41:00.0", "root_complex": "pci0000:40", "switch": None},  # NODE
            "0000:51:00.0",  # no place: unknown
        ],
        nics1=[{"address": "0000:91:00.0", "root_complex": "pci0000:90", "switch": "0000:90:01.0"}],  # SYS
    )
    host = load_trace(_trace(cells), "t.json").hosts[0]
    dev = {d.address: d for d in host.devices}
    gpu, second = dev["0000:12:00.0"], dev["0000:22:00.0"]
    assert (gpu.bridges, gpu.parent, gpu.root_complex) == (("0000:11:00.0",), "0000:11:00.0", "pci0000:10")
    assert [pcie_level(gpu, dev[n]) for n in ("0000:13:00.0", "0000:31:00.0", "0000:41:00.0", "0000:91:00.0")] == [
        Level.PIX, Level.PHB, Level.NODE, Level.SYS
    ]
    assert pcie_level(second, dev["0000:25:00.0"]) is Level.PXB
    assert pcie_level(gpu, dev["0000:51:00.0"]) is None and dev["0000:51:00.0"].bridges == ()


def test_vfs_as_a_count_or_a_list() -> None:
    nics = [
        {"address": "0000:16:00.0", "root_complex": "pci0000:10", "switch": "0000:13:00.0", "vfs": 8},
        {"address": "0000:17:00.0", "vfs": ["0000:17:10.0", "0000:17:10.1"]},
        {"address": "0000:18:00.0", "vfs": 0},
    ]
    host = load_trace(_trace([_cell(nics=nics)]), "t.json").hosts[0]
    dev = {d.address: d for d in host.devices}
    pf = dev["0000:16:00.0"]
    assert pf.vfs == (
        "0000:16:00.2", "0000:16:00.3", "0000:16:00.4", "0000:16:00.5", "0000:16:00.6", "0000:16:00.7",
        "0000:16:01.0", "0000:16:01.1",
    )
    assert all(dev[v].pf == pf.address and dev[v].bridges == pf.bridges for v in pf.vfs)
    assert dev["0000:17:00.0"].vfs == ("0000:17:10.0", "0000:17:10.1") and dev["0000:18:00.0"].vfs == ()
    assert len(host.devices) == 3 + 8 + 2


def test_nic_keys_of_a_request_reach_the_engine() -> None:
    requests = [
        _request(name="a", nics="per-gpu", nic_affinity="pix", nic_function="vf"),
        _request(name="b", nics=1, nic_affinity="sys"),
        _request(name="c"),
    ]
    a, b, c = load_trace(_trace(requests=requests), "t.json").requests
    assert (a.nics, a.nics_per_gpu, a.nic_affinity, a.nic_function) == (0, True, Level.PIX, NicFunction.VF)
    assert (b.nics, b.nics_per_gpu, b.nic_affinity, b.nic_function) == (1, False, Level.SYS, NicFunction.PF)
    assert (c.nics, c.nics_per_gpu, c.nic_affinity, c.nic_function) == (0, False, Level.PXB, NicFunction.PF)
    vm = a
    assert (vm.nics, vm.nics_per_gpu, vm.nic_affinity, vm.nic_function) == (0, True, Level.PIX, NicFunction.VF)


def test_an_old_trace_reads_as_before() -> None:
    # bare addresses and no NIC keys: what every trace written before NICs holds
    old = REPO / "examples" / "traces" / "snc-cxl-gpu.json"
    trace = load_trace(old.read_bytes(), str(old))
    assert all(not r.wants_nics and r.nic_affinity is Level.PXB for r in trace.requests)
    for host in trace.hosts:
        assert all(d.root_complex is None and d.bridges == () and d.vfs == () for d in host.devices)
    host = load_trace(_trace([_cell(gpus=["0000:17:00.0"], nics=["0000:1a:00.0"])]), "t.json").hosts[0]
    assert [(d.address, d.kind) for d in host.devices] == [("0000:17:00.0", "gpu"), ("0000:1a:00.0", "nic")]


BAD = [
    (_request(nics="two"), "requests[0].nics: expected an integer or 'per-gpu', got 'two' (request 'vm-1')"),
    (_request(nics=None), "requests[0].nics: expected an integer or 'per-gpu', got null (request 'vm-1')"),
    (_request(nics=True), "requests[0].nics: expected an integer or 'per-gpu', got bool (request 'vm-1')"),
    (_request(nics=-1), "requests[0]: NIC count must be 0 to 64, got -1 (request 'vm-1')"),
    (_request(nics=65), "requests[0]: NIC count must be 0 to 64, got 65 (request 'vm-1')"),
    (_request(nics="per-gpu", gpus=0), "requests[0]: NICs are placed within a PCIe level of the VM's GPUs"),
    (_request(nics=1, nic_affinity="PIX"),
     "requests[0].nic_affinity: expected one of pix, pxb, phb, node, sys, got 'PIX' (request 'vm-1')"),
    (_request(nics=1, nic_affinity=None), "requests[0].nic_affinity: expected a string, got null (request 'vm-1')"),
    (_request(nics=1, nic_function="sriov"),
     "requests[0].nic_function: expected one of pf, vf, got 'sriov' (request 'vm-1')"),
    (_request(nics=1, nic_function=2), "requests[0].nic_function: expected a string, got int (request 'vm-1')"),
]


@pytest.mark.parametrize(("bad", "message"), BAD, ids=[m.split(":")[1].strip() + "-" + str(i) for i, (_, m) in
                                                        enumerate(BAD)])
def test_bad_nic_keys_are_refused_naming_the_request(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        load_trace(_trace(requests=[bad]), "bad.json")
    assert str(err.value).startswith(f"bad.json: {message}")


BAD_DEVICES = [
    ({"nics": [{"root_complex": "pci0000:10"}]}, "hosts[0].cells[0].nics[0]: missing key 'address'"),
    ({"nics": [7]}, "hosts[0].cells[0].nics[0]: expected a PCI address string or an object with an address"),
    ({"nics": [{"address": "0000:16:00.0", "root_complex": ""}]},
     "hosts[0].cells[0].nics[0].root_complex: expected a non-empty string or null"),
    ({"nics": [{"address": "0000:16:00.0", "bridges": "0000:10:01.0"}]},
     "hosts[0].cells[0].nics[0].bridges: expected a list, got str"),
    ({"nics": [{"address": "0000:16:00.0", "switch": "0000:13:00.0", "bridges": ["0000:10:01.0"]}]},
     "hosts[0].cells[0].nics[0].switch: switch 0000:13:00.0 is not one of the device's bridges"),
    ({"gpus": [{"address": "0000:15:00.0", "vfs": 2}]},
     "hosts[0].cells[0].gpus[0].vfs: only a NIC has virtual functions here"),
    ({"nics": [{"address": "nic-1", "vfs": 2}]},
     "hosts[0].cells[0].nics[0].vfs: a count of VFs needs the PF's address as dddd:bb:ss.f, got 'nic-1'"),
    ({"nics": [{"address": "0000:16:1f.7", "vfs": 2}]}, "hosts[0].cells[0].nics[0].vfs: 2 VFs after 0000:16:1f.7"),
    ({"nics": [{"address": "0000:16:00.0", "vfs": -1}]}, "hosts[0].cells[0].nics[0].vfs: must be 0 or more, got -1"),
    ({"nics": [{"address": "0000:16:00.0", "vfs": 2}, {"address": "0000:16:00.1", "vfs": 2}]},
     "hosts[0]: PCI address 0000:16:00.3 is listed twice (a virtual function of 0000:16:00.1)"),
    ({"gpus": ["0000:16:00.0"], "nics": ["0000:16:00.0"]}, "hosts[0]: PCI address 0000:16:00.0 is listed twice"),
]


@pytest.mark.parametrize(("over", "message"), BAD_DEVICES, ids=[str(i) for i in range(len(BAD_DEVICES))])
def test_bad_devices_are_refused_with_their_path(over: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        load_trace(_trace([_cell(**over)], [_request(gpus=0)]), "bad.json")
    assert str(err.value).startswith(f"bad.json: {message}")


# ---------------------------------------------------------------- export ----


def _export(hosts: list[Host], placed: list[Placement], *, with_vms: bool) -> dict[str, Any]:
    tenants = [Tenant(t) for t in sorted({p.tenant for p in placed})]
    return json.loads(json.dumps(trace_document(hosts, placed, tenants, with_vms=with_vms)))


def _levels(host: Host) -> dict[tuple[str, str], Level | None]:
    nics = [d for d in host.devices if d.kind is DeviceKind.NIC]
    return {(g.address, n.address): pcie_level(g, n) for g in host.devices_of(DeviceKind.GPU) for n in nics}


def test_export_with_vms_then_replay_asks_the_nics_again(trace: Trace) -> None:
    hosts = list(trace.hosts[:3])
    names = {h.name for h in hosts}
    placed = [p for p in _placed(run(trace)) if p.host in names]
    asked = {r.name: r for r in trace.requests}
    assert any(asked[p.vm].wants_nics for p in placed)
    doc = _export(hosts, placed, with_vms=True)
    replayed = load_trace(json.dumps(doc).encode(), "export.json")
    for original, again in zip(hosts, replayed.hosts, strict=True):
        assert original.name == again.name
        assert _levels(again) == _levels(original)  # places and VFs as the hosts had them
        assert {d.address: d.pf for d in again.devices} == {d.address: d.pf for d in original.devices}
    written = {r.name: r for r in replayed.requests}
    assert written.keys() == {p.vm for p in placed}
    for p in placed:
        r, w = asked[p.vm], written[p.vm]
        assert (w.nics, w.nics_per_gpu, w.nic_function) == (r.nics, r.nics_per_gpu, r.nic_function)
        assert w.nic_affinity is (r.nic_affinity if r.wants_nics else Level.PXB)
    report = run(replayed)
    again = {p.vm: p for p in _placed(report)}
    assert len(again) > 0.9 * len(placed)
    for vm, p in again.items():  # a replayed VM gets what it asked, as the original got it
        r = asked[vm]
        nics = sum(1 for d in p.devices if d.kind is DeviceKind.NIC)
        assert nics == (r.gpus if r.nics_per_gpu else r.nics)
        assert (p.nic_affinity, p.nics_per_gpu) == ((r.nic_affinity, r.nics_per_gpu) if r.wants_nics else (None, False))


def test_export_as_it_is_leaves_held_nics_out_with_their_vfs(trace: Trace) -> None:
    host = trace.hosts[0]
    fleet = Fleet([host], (), {"t": Isolation.CORE})
    placed = []
    for name, function in (("pf-vm", NicFunction.PF), ("vf-vm", NicFunction.VF)):
        req = replace(next(r for r in trace.requests if r.nics_per_gpu),
                      name=name, tenant="t", vcpus=2, memory_kib=1 << 20, numa_nodes=1, page_size_kib=PAGE_4K,
                      gpus=1, nic_function=function)
        chosen = place(req, fleet, explain=False).chosen
        assert chosen is not None
        fleet.record(chosen)
        placed.append(chosen)
    doc = _export([host], placed, with_vms=False)
    written = [n["address"] for c in doc["hosts"][0]["cells"] for n in c.get("nics", [])]
    device = {d.address: d for d in host.devices}
    held = {d.address for p in placed for d in p.devices if d.kind is DeviceKind.NIC}
    gone = {device[a].pf or a for a in held}
    assert len(gone) == 2 and set(written) == {d.address for d in _pfs(host)} - gone
    assert "1 NIC(s) with a virtual function held left out" in doc["description"]
    assert len({g["address"] if isinstance(g, dict) else g for c in doc["hosts"][0]["cells"] for g in c["gpus"]}) == 6
    assert load_trace(json.dumps(doc).encode(), "export.json").hosts[0].name == host.name


def test_export_of_a_real_dgx_inventory_keeps_its_levels() -> None:
    base = parse_capabilities((DATA / "capabilities" / "x86-2cell-smt-resctrl.xml").read_bytes(), name="dgx")
    devices = with_parent_bridges(parse_nodedev_file_content((DATA / "nodedev" / "dgx-like.xml").read_bytes(), "d"))
    host = replace(base, devices=devices)
    doc = _export([host], [], with_vms=False)
    nics = [n for c in doc["hosts"][0]["cells"] for n in c.get("nics", [])]
    assert nics and all(isinstance(n, dict) and n["root_complex"] and n["bridges"] for n in nics)
    assert {n.get("vfs") for n in nics} >= {8}  # the fixture's VFs are numbered as a trace numbers them
    (again,) = load_trace(json.dumps(doc).encode(), "export.json").hosts
    on_cells = {d.address for d in host.devices if d.numa_node is not None}
    expected = {k: v for k, v in _levels(host).items() if k[0] in on_cells and k[1] in on_cells}
    assert _levels(again) == expected
