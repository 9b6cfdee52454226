"""GPU–NIC pairs in `vnuma stats`: each GPU's NIC and their PCIe level, flagged when worse than asked."""

from __future__ import annotations

from dataclasses import replace

from tests.cli.conftest import REPO, Cli
from tests.placement.test_nics import DGX, _ask
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import DeviceAssignment, Placement
from vnuma.report.usage import NicPair, locality, nic_pairs
from vnuma.topology import DeviceKind
from vnuma.topology.pcie import Level, pcie_level

KNOWN = {d.address: d for d in DGX.devices}
GPU = "0000:13:00.0"


def test_per_gpu_nics_pair_up_within_the_level_asked() -> None:
    p = place(_ask("a", 2, nics_per_gpu=True), Fleet([DGX])).chosen
    assert p is not None and p.nic_affinity is Level.PXB
    pairs = nic_pairs(p, DGX)
    assert [x.gpu for x in pairs] == sorted(d.address for d in p.devices if d.kind is DeviceKind.GPU)
    assert len({x.nic for x in pairs}) == 2  # each GPU its own NIC
    assert all(x.level is Level.PIX and not x.worse for x in pairs)
    assert locality(p, DGX).nic_pairs == pairs


def test_a_pair_worse_than_asked_is_flagged_and_a_vm_without_nics_has_none() -> None:
    far = next(a for a, d in KNOWN.items() if d.kind is DeviceKind.NIC and d.pf is None
               and pcie_level(KNOWN[GPU], d) is Level.PHB)
    p = Placement(vm="v", tenant="t", host=DGX.name, cells=(), nic_affinity=Level.PIX, devices=(
        DeviceAssignment(GPU, DeviceKind.GPU, 0, 0), DeviceAssignment(far, DeviceKind.NIC, 0, 0)))
    assert nic_pairs(p, DGX) == (NicPair(GPU, far, Level.PHB, True),)
    assert nic_pairs(replace(p, nic_affinity=Level.PHB), DGX) == (NicPair(GPU, far, Level.PHB, False),)
    assert nic_pairs(replace(p, devices=p.devices[:1]), DGX) == ()


def test_stats_prints_the_pairs(cli: Cli) -> None:
    cli.ok("host", "import", "dgx", "--capabilities", str(REPO / "tests" / "data" / "capabilities" /
                                                          "x86-2cell-smt-resctrl.xml"),
           "--nodedev", str(REPO / "tests" / "data" / "nodedev" / "dgx-like.xml"))
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--gpus", "2", "--nics", "per-gpu", "--vcpus", "2", "--memory", "2GiB", "--page-size",
           "4K", "--name", "a")
    (vm,) = cli.ok("stats", "--json").json()["vms"]
    assert [(x["level"], x["worse_than_asked"]) for x in vm["nic_pairs"]] == [("PIX", False), ("PIX", False)]
    assert "GPU-NIC pairs" in cli.ok("stats").stdout


def test_the_locality_objective_charges_a_pair_worse_than_asked_and_a_move_mends_it() -> None:
    from vnuma.placement.model import Isolation
    from vnuma.placement.rebalance import FleetState, Objective, plan_moves

    fleet = Fleet([DGX])
    p = place(_ask("a", 1, nics=1, nic_affinity=Level.PHB), fleet).chosen
    assert p is not None
    far = next(a for a, d in KNOWN.items() if d.kind is DeviceKind.NIC and d.pf is None and d.numa_node == 1)
    # As if the host's NIC had moved since (or the domain was adopted so): a SYS pair, asked within PHB.
    strayed = replace(p, devices=tuple(
        replace(d, address=far, host_cell=1) if d.kind is DeviceKind.NIC else d for d in p.devices))
    assert [x.worse for x in nic_pairs(strayed, DGX)] == [True]
    plan = plan_moves(FleetState((DGX,), (strayed,), {"t1": Isolation.CORE}), Objective.LOCALITY, 2)
    assert (plan.before, plan.after) == (1, 0)
    (move,) = plan.moves
    assert not any(x.worse for x in nic_pairs(move.placement, DGX))
