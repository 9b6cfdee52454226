"""Planner scenarios: a fragmented GPU host, split VMs consolidated, a stacked tenant spread,
trivial and impossible cases."""

from __future__ import annotations

import pytest

from tests.builders import kept, make_host
from tests.placement.helpers import GIB, check_fleet, request
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import (
    CellAssignment,
    DeviceAssignment,
    GpuAffinity,
    IoThreadPolicy,
    Isolation,
    Placement,
)
from vnuma.placement.rebalance import FleetState, Objective, plan_moves
from vnuma.placement.rebalance.search import Search
from vnuma.topology import PAGE_1G, DeviceKind, Host


def _vm(host: Host, name: str, cell: int, cpus: tuple[int, ...], gpus: tuple[str, ...] = ()) -> Placement:
    devices = tuple(DeviceAssignment(a, DeviceKind.GPU, 0, cell) for a in gpus)
    ca = CellAssignment(0, cell, tuple(range(len(cpus))), cpus, GIB, PAGE_1G)
    return kept(Placement(name, "t1", host.name, (ca,), devices=devices))


def _gpus(host: Host, cell: int) -> tuple[str, ...]:
    return tuple(d.address for d in host.devices if d.numa_node == cell)


def _fragmented() -> tuple[Host, list[Placement]]:
    """4 cells x 4 cores, 2 GPUs per cell. Cells 1-3: a 3-vCPU VM holds both GPUs (1 pCPU free).
    Cell 0: both GPUs free but two 1-vCPU VMs leave only 2 pCPUs, too few for a GPU VM to move in."""
    host = make_host("frag", cells=4, cores_per_cell=4, smt=1, gpus_per_cell=2)
    vms = [_vm(host, f"gpu{c}", c, (c * 4, c * 4 + 1, c * 4 + 2), _gpus(host, c)) for c in (1, 2, 3)]
    vms += [_vm(host, "small-a", 0, (0,)), _vm(host, "small-b", 0, (1,))]
    return host, vms


def _replay(hosts: list[Host], placements: list[Placement], plan_moves_: tuple) -> list[Placement]:  # type: ignore[type-arg]
    fleet = Fleet(hosts, placements, {"t1": Isolation.CORE})
    for move in plan_moves_:
        fleet.remove(move.vm)
        fleet.add(move.placement, Isolation.CORE)
    return list(fleet.placements())


def test_two_gpu_vm_fits_after_two_repins() -> None:
    host, vms = _fragmented()
    want = request("big", vcpus=4, memory_gib=4, gpus=2, numa_nodes=1)
    assert place(want, Fleet([host], vms)).chosen is None
    plan = plan_moves(FleetState((host,), tuple(vms), {"t1": Isolation.CORE}), Objective.ROOM, 3, want)
    assert (plan.before, plan.after, plan.optimal) == (1, 0, True)
    assert sorted(m.vm for m in plan.moves) == ["small-a", "small-b"]
    assert all(m.from_cells == (0,) and m.to_cells != (0,) and m.cost_kib == GIB for m in plan.moves)
    after = _replay([host], vms, plan.moves)
    check_fleet([host], after, {"t1": Isolation.CORE})
    assert place(want, Fleet([host], after)).chosen is not None


def test_one_move_is_not_enough_so_the_limit_of_one_finds_nothing() -> None:
    host, vms = _fragmented()
    want = request("big", vcpus=4, memory_gib=4, gpus=2, numa_nodes=1)
    plan = plan_moves(FleetState((host,), tuple(vms), {}), Objective.ROOM, 1, want)
    assert (plan.moves, plan.after, plan.optimal) == ((), 1, True)


def test_room_that_already_exists_needs_no_moves() -> None:
    host, vms = _fragmented()
    plan = plan_moves(
        FleetState((host,), tuple(vms), {}), Objective.ROOM, 3, request("s", vcpus=1, memory_gib=1)
    )
    assert (plan.moves, plan.before, plan.after) == ((), 0, 0)


def _split_when_placed(numa_nodes: int | None) -> tuple[Host, Placement]:
    """A 2-vCPU VM placed on a 2x4-core host while fillers left one free core per cell (then gone)."""
    host = make_host("h", cells=2, cores_per_cell=4, smt=1)
    fleet = Fleet([host])
    for i in range(2):
        filler = place(request(f"filler{i}", vcpus=3, memory_gib=1, numa_nodes=1), fleet).chosen
        assert filler is not None
        fleet.add(filler)
    split = place(request("split", vcpus=2, memory_gib=2, numa_nodes=numa_nodes), fleet).chosen
    assert split is not None and len(split.cells) == 2 and split.numa_nodes == numa_nodes
    return host, split


def test_split_vm_is_consolidated_onto_one_cell() -> None:
    host, split = _split_when_placed(None)
    plan = plan_moves(FleetState((host,), (split,), {}), Objective.LOCALITY, 2)
    assert (plan.before, plan.after, plan.optimal) == (1, 0, True)
    (move,) = plan.moves
    assert move.vm == "split" and len(move.to_cells) == 1 and move.cost_kib == GIB
    assert move.placement.numa_nodes is None
    check_fleet([host], _replay([host], [split], plan.moves), {})


def test_vm_that_asked_for_two_cells_keeps_them() -> None:
    host, split = _split_when_placed(2)
    plan = plan_moves(FleetState((host,), (split,), {}), Objective.LOCALITY, 2)
    assert (plan.before, plan.after, plan.moves) == (0, 0, ())


def test_room_without_a_shape_is_refused() -> None:
    host, vms = _fragmented()
    with pytest.raises(InvalidInputError):
        plan_moves(FleetState((host,), tuple(vms), {}), Objective.ROOM, 2)


def test_time_limit_returns_unproven_plan() -> None:
    host, vms = _fragmented()
    want = request("big", vcpus=4, memory_gib=4, gpus=2, numa_nodes=1)
    ticks = iter(range(1000))
    plan = plan_moves(
        FleetState((host,), tuple(vms), {}), Objective.ROOM, 3, want, 2.0, clock=lambda: float(next(ticks))
    )
    assert plan.optimal is False and plan.moves == () and plan.after == 1


def _stacked(host: Host, tenant: str, count: int, cell: int) -> list[Placement]:
    """``count`` one-vCPU VMs of ``tenant`` all on ``cell`` (pCPUs cell*4, cell*4+1, ...)."""
    return [
        kept(Placement(f"{tenant}-{i}", tenant, host.name, (CellAssignment(0, cell, (0,), (cell * 4 + i,), GIB,
                                                                          PAGE_1G),)))
        for i in range(count)
    ]


def test_tenant_stacked_on_one_cell_is_spread_over_free_cells() -> None:
    host = make_host("h", cells=4, cores_per_cell=4, smt=1)
    vms = [*_stacked(host, "noisy", 3, 0), _vm(host, "other", 1, (4, 5))]
    state = FleetState((host,), tuple(vms), {"noisy": Isolation.CORE, "t1": Isolation.CORE})
    plan = plan_moves(state, Objective.SPREAD_TENANTS, 3)
    assert (plan.before, plan.after, plan.optimal, len(plan.moves)) == (3, 0, True, 2)
    assert all(m.vm.startswith("noisy-") and m.from_cells == (0,) and m.cost_kib == GIB for m in plan.moves)
    assert "tenant noisy crowds cells [0] of h" in plan.moves[0].reason
    after = _replay([host], vms, plan.moves)
    check_fleet([host], after, state.isolation)
    assert len({p.host_cells for p in after if p.tenant == "noisy"}) == 3


def test_sharing_that_no_placement_avoids_is_not_counted() -> None:
    # Three VMs on a two-cell host: two of them must share (pigeonhole), so one move is all it takes.
    host = make_host("h", cells=2, cores_per_cell=4, smt=1)
    vms = _stacked(host, "noisy", 3, 0)
    plan = plan_moves(FleetState((host,), tuple(vms), {}), Objective.SPREAD_TENANTS, 3)
    assert (plan.before, plan.after, plan.optimal) == (1, 0, True)
    (move,) = plan.moves
    assert move.to_cells == (1,)
    check_fleet([host], _replay([host], vms, plan.moves), {})


def test_spread_moves_to_another_host_when_its_own_has_no_free_cell() -> None:
    full = make_host("a", cells=2, cores_per_cell=4, smt=1)
    spare = make_host("b", cells=2, cores_per_cell=4, smt=1)
    vms = [*_stacked(full, "noisy", 2, 0), _vm(full, "other", 1, (4, 5, 6, 7))]
    state = FleetState((full, spare), tuple(vms), {"noisy": Isolation.CORE, "t1": Isolation.CORE})
    plan = plan_moves(state, Objective.SPREAD_TENANTS, 3)
    assert (plan.before, plan.after) == (2, 0)
    (move,) = plan.moves
    assert (move.from_host, move.to_host, move.cost_kib) == ("a", "b", GIB)
    assert "to host b" in move.reason
    check_fleet([full, spare], _replay([full, spare], vms, plan.moves), state.isolation)


def test_fewest_cells_of_a_device_local_vm_whose_gpus_fit_no_cell_set() -> None:
    """A VM whose 2 GPUs sit off its one cell (affinity preferred) gets no 1-cell fit with its GPUs on an empty
    host; the fewest cells are then asked without GPUs, and so without device-local iothreads either."""
    host = make_host("h", cells=2, cores_per_cell=4, smt=1, gpus_per_cell=1)
    req = request("v", vcpus=2, memory_gib=1, gpus=2, numa_nodes=1, gpu_affinity=GpuAffinity.PREFERRED,
                  iothreads=1, iothread_policy=IoThreadPolicy.DEVICE_LOCAL)
    p = place(req, Fleet([host])).chosen
    assert p is not None and len(p.cells) == 1
    search = Search(FleetState((host,), (p,), {}), 10.0, None)
    assert search.fewest_cells(p) == 1
