"""NICs beside GPUs (``--nics N|per-gpu --nic-affinity LEVEL``) on the DGX-like host: every GPU's NIC within
the level, no NIC twice, no virtual function, and refusals that name the level reached.

The invariants are checked from the placements and the host's devices with
the level function alone (a brute-force matching for ``per-gpu``), never from
the engine's own bookkeeping.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.helpers import request
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import NicFunction, Placement, VmRequest
from vnuma.placement.nics import within
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.topology import PAGE_4K, DeviceKind, Host
from vnuma.topology.pcie import Level, pcie_level

DATA = Path(__file__).resolve().parent.parent / "data"


def _dgx(name: str = "dgx") -> Host:
    host = parse_capabilities((DATA / "capabilities" / "x86-2cell-smt-resctrl.xml").read_bytes(), name=name)
    devices = with_parent_bridges(parse_nodedev_file_content((DATA / "nodedev" / "dgx-like.xml").read_bytes(), "d"))
    return replace(host, devices=devices)


DGX = _dgx()
DEVICE = {d.address: d for d in DGX.devices}


def _ask(name: str, gpus: int, **kw: object) -> VmRequest:
    return request(name, "t1", vcpus=1, memory_gib=1, gpus=gpus, page_size_kib=PAGE_4K, **kw)


def _check(p: Placement, req: VmRequest) -> None:
    gpus = [DEVICE[d.address] for d in p.devices if d.kind is DeviceKind.GPU]
    nics = [DEVICE[d.address] for d in p.devices if d.kind is DeviceKind.NIC]
    vf = req.nic_function is NicFunction.VF
    assert all((n.pf is not None) == vf and n.kind is DeviceKind.NIC for n in nics)
    if req.nics_per_gpu:
        assert len(nics) == len(gpus)
        assert any(
            all(within(pcie_level(g, n), req.nic_affinity) for g, n in zip(gpus, order, strict=True))
            for order in itertools.permutations(nics)
        ), "no pairing of the VM's GPUs and NICs is within the level"
    else:
        assert len(nics) == req.nics
        assert all(any(within(pcie_level(g, n), req.nic_affinity) for g in gpus) for n in nics)


def test_per_gpu_gives_each_gpu_a_nic_under_its_own_switch() -> None:
    fleet = Fleet([DGX])
    req = _ask("a", 2, nics_per_gpu=True)
    p = place(req, fleet).chosen
    assert p is not None
    _check(p, req)
    gpus = [DEVICE[d.address] for d in p.devices if d.kind is DeviceKind.GPU]
    nics = [DEVICE[d.address] for d in p.devices if d.kind is DeviceKind.NIC]
    assert {pcie_level(g, n) for g in gpus for n in nics} == {Level.PIX}  # one switch: two GPUs, two NICs


def test_a_refusal_names_the_gpu_the_level_and_the_nearest_nic() -> None:
    fleet = Fleet([DGX])
    for i in range(7):  # each switch's two NICs go to one VM of one GPU (the 8th switch's GPUs are PXB)
        taken = place(_ask(f"n{i}", 1, nics=2, nic_affinity=Level.PIX), fleet).chosen
        assert taken is not None
        fleet.add(taken)
    refused = place(_ask("late", 1, nics_per_gpu=True, nic_affinity=Level.PIX), fleet, explain=True)
    assert refused.chosen is None
    (rejection,) = refused.rejections
    assert rejection.check == "nic-affinity"
    assert "has no free NIC of its own within PIX; nearest free NIC 0000:" in rejection.reason
    assert rejection.reason.endswith("is PHB (and on every other cell set)"), rejection.reason
    assert place(_ask("late", 1, nics_per_gpu=True, nic_affinity=Level.SYS), fleet).chosen is not None


def test_the_matching_gives_a_contested_nic_to_the_gpu_without_another_choice() -> None:
    from vnuma.placement import nics

    g1, g2 = DEVICE["0000:13:00.0"], DEVICE["0000:14:00.0"]
    n1, n2 = DEVICE["0000:15:00.0"], DEVICE["0000:16:00.0"]
    table = {
        (g1.address, n1.address): Level.PIX,
        (g1.address, n2.address): Level.PXB,
        (g2.address, n1.address): Level.PIX,
        (g2.address, n2.address): Level.SYS,
    }
    options = {
        g.address: [n for n in (n1, n2) if nics.within(table[(g.address, n.address)], Level.PXB)] for g in (g1, g2)
    }
    chosen = nics.matching([g1.address, g2.address], options)
    assert not isinstance(chosen, str)
    assert [n.address for n in chosen] == [n2.address, n1.address]  # g1 takes its second choice


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 4),
            st.sampled_from(["per-gpu", 0, 1, 2]),
            st.sampled_from(list(Level)),
            st.sampled_from(list(NicFunction)),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_no_device_twice_and_every_nic_within_its_level(asks: list[tuple[int, object, Level, NicFunction]]) -> None:
    fleet = Fleet([DGX, _dgx("dgx-2")])
    placed: list[Placement] = []
    for i, (gpus, nics, level, function) in enumerate(asks):
        req = _ask(
            f"v{i}", gpus, nics_per_gpu=nics == "per-gpu", nics=0 if nics == "per-gpu" else nics, nic_affinity=level,
            nic_function=function,
        )
        result = place(req, fleet, explain=True)
        if result.chosen is None:
            assert result.rejections
            continue
        _check(result.chosen, req)
        fleet.add(result.chosen)
        placed.append(result.chosen)
    held = [(p.host, d.address) for p in placed for d in p.devices]
    assert len(held) == len(set(held))
    # A PF and any of its VFs are never both held (on one host), and every IOMMU companion follows its device.
    assert not any((h, DEVICE[a].pf) in set(held) for h, a in held if DEVICE[a].pf is not None)
    assert all(d.peer_of in {e.address for e in p.devices} for p in placed for d in p.devices if d.peer_of)


def test_virtual_functions_are_claimed_alone_and_keep_their_pf_from_any_vm() -> None:
    fleet = Fleet([DGX])
    vfs = place(_ask("vfs", 2, nics_per_gpu=True, nic_function=NicFunction.VF), fleet).chosen
    assert vfs is not None
    fleet.add(vfs)
    pfs = {DEVICE[d.address].pf for d in vfs.devices if d.kind is DeviceKind.NIC}
    assert pfs and None not in pfs
    pf = sorted(pfs)[0]
    # Whole NICs for the next VM: the PF whose VFs are out is not among them, though it is the closest.
    whole = place(_ask("whole", 2, nics_per_gpu=True, nic_affinity=Level.SYS), fleet).chosen
    assert whole is not None and pf not in {d.address for d in whole.devices}
    forced = replace(whole, devices=tuple(
        replace(d, address=pf) if d.kind is DeviceKind.NIC and i == 0 else d
        for i, d in enumerate(sorted(whole.devices, key=lambda d: d.kind != DeviceKind.NIC))
    ))
    refusal = fleet.admit(forced)
    assert refusal is not None and refusal.check == "sr-iov"
    assert f"physical function {pf} has virtual function(s)" in refusal.reason and "to VM 'vfs'" in refusal.reason
    fleet.remove("vfs")
    assert fleet.admit(forced) is None or fleet.admit(forced).check != "sr-iov"


@pytest.mark.parametrize("solver", ["search", "cp-sat"])
def test_a_drain_moves_vms_with_their_nics_asked_again(solver: str) -> None:
    from vnuma.placement.model import Isolation
    from vnuma.placement.rebalance import FleetState, Objective, plan_moves

    other = _dgx("dgx-2")
    fleet = Fleet([DGX, other])
    asks = [_ask("pf", 2, nics_per_gpu=True, host=DGX.name), _ask("vf", 1, nics=1, nic_function=NicFunction.VF,
                                                                     host=DGX.name, nic_affinity=Level.PIX)]
    placed = []
    for req in asks:
        chosen = place(req, fleet).chosen
        assert chosen is not None
        fleet.add(chosen)
        placed.append(chosen)
    plan = plan_moves(FleetState((DGX, other), tuple(placed), {"t1": Isolation.CORE}), Objective.DRAIN, 5,
                      drain=DGX.name, solver=solver)
    assert not plan.left and {m.vm for m in plan.moves} == {"pf", "vf"}
    for move, req in zip(sorted(plan.moves, key=lambda m: asks.index(next(a for a in asks if a.name == m.vm))),
                         asks, strict=True):
        new = move.placement
        assert new.host == "dgx-2" and (new.nic_affinity, new.nic_function) == (req.nic_affinity, req.nic_function)
        other_devices = {d.address: d for d in other.devices}
        assert {d.address for d in new.devices if d.kind is DeviceKind.NIC} <= other_devices.keys()
        _check(new, req)


def test_two_gpus_sharing_one_near_nic_are_not_both_taken_while_another_gpu_has_its_own() -> None:
    """One cell: GPUs 12 and 13 under a switch with one NIC (14), GPU 22 under another with NIC 23. A
    2-GPU VM asking a NIC per GPU within PIX gets 12 and 22 (a maximum matching), not 12 and 13."""
    import json

    from vnuma.simulate import load_trace

    def dev(address: str, switch: str) -> dict[str, object]:
        return {"address": address, "root_complex": "pci0000:10", "switch": switch}

    cell = {"id": 0, "cpus": [0, 1, 2, 3], "siblings": [[0], [1], [2], [3]], "memory_mib": 8192,
            "hugepages": {"4": {"total": 2097152, "free": 2097152}}, "distances": {"0": 10},
            "gpus": [dev("0000:12:00.0", "0000:11:00.0"), dev("0000:13:00.0", "0000:11:00.0"),
                     dev("0000:22:00.0", "0000:21:00.0")],
            "nics": [dev("0000:14:00.0", "0000:11:00.0"), dev("0000:23:00.0", "0000:21:00.0")]}
    doc = {"format": "numa-placement-trace", "version": 1, "scenario": "shared-nic", "seed": None,
           "description": "", "hosts": [{"name": "h", "cells": [cell]}], "requests": []}
    (host,) = load_trace(json.dumps(doc).encode(), "shared-nic").hosts
    req = request("vm", "t1", vcpus=1, memory_gib=1, gpus=2, page_size_kib=PAGE_4K, nics_per_gpu=True,
                  nic_affinity=Level.PIX)
    chosen = place(req, Fleet([host])).chosen
    assert chosen is not None
    assert sorted(d.address for d in chosen.devices) == ["0000:12:00.0", "0000:14:00.0", "0000:22:00.0",
                                                          "0000:23:00.0"]
