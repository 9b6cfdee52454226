"""Planner invariants on random fragmented fleets: valid replay, objective never worse, move limit,
and the room search's capacity bound never ruling out a plan."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from tests.placement.strategies import memory_modes
from vnuma.placement.engine import place
from vnuma.placement.kept import kept_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import GpuAffinity, Isolation, Placement, VmRequest
from vnuma.placement.rebalance import FleetState, Objective, Plan, is_movable, plan_moves
from vnuma.placement.rebalance.room import could_fit
from vnuma.placement.rebalance.search import Search
from vnuma.topology import DeviceKind, Host

TENANTS = {"t1": Isolation.CORE, "t2": Isolation.NONE, "t3": Isolation.CELL}


@st.composite
def fleets(draw: st.DrawFn) -> FleetState:
    hosts = [
        make_host(
            f"h{i}",
            cells=draw(st.integers(2, 4)),
            cores_per_cell=draw(st.integers(2, 4)),
            smt=draw(st.sampled_from([1, 2])),
            gpus_per_cell=draw(st.integers(0, 2)),
            memory_gib=8,
            hugepages_2m_gib=2,
            hugepages_1g_gib=4,
        )
        for i in range(draw(st.integers(1, 2)))
    ]
    fleet = Fleet(hosts, (), TENANTS)
    for i in range(draw(st.integers(2, 10))):
        tenant = draw(st.sampled_from(sorted(TENANTS)))
        req = request(
            f"vm{i}",
            tenant,
            vcpus=draw(st.sampled_from([1, 2, 4])),
            memory_gib=draw(st.integers(1, 3)),
            gpus=draw(st.integers(0, min(2, fleet.gpus_total))),
            numa_nodes=draw(st.sampled_from([None, 1, 2])),
            gpu_affinity=draw(st.sampled_from([GpuAffinity.REQUIRED, GpuAffinity.PREFERRED])),
            isolation=TENANTS[tenant],
        )
        if req.vcpus and req.numa_nodes and req.vcpus % req.numa_nodes:
            continue
        req = replace(req, memory_modes=draw(memory_modes(req.numa_nodes)), iothreads=draw(st.integers(0, 2)))
        if req.numa_nodes == 2 and draw(st.booleans()):  # guest cells of their own sizes
            vcpus = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
            memory = (draw(st.integers(1, 2)) * 1024**2, draw(st.integers(1, 2)) * 1024**2)
            first = draw(st.integers(0, req.gpus))
            req = replace(
                req, vcpus=sum(vcpus), memory_kib=sum(memory), cell_vcpus=vcpus, cell_memory_kib=memory,
                cell_gpus=(first, req.gpus - first) if req.gpus else None,
            )
        chosen = place(req, fleet).chosen
        if chosen is not None:
            fleet.add(chosen, TENANTS[tenant])
    for p in fleet.placements():
        if draw(st.booleans()):
            fleet.remove(p.vm)
    return FleetState(tuple(hosts), fleet.placements(), TENANTS)


def _replay(state: FleetState, plan: Plan) -> list[Placement]:
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    for move in plan.moves:
        old = fleet.remove(move.vm)
        assert (old.host, old.host_cells) == (move.from_host, move.from_cells)
        _assert_shape_kept(old, move.placement)
        fleet.add(move.placement, state.isolation[move.placement.tenant])  # raises if not free at this step
        check_fleet(list(state.hosts), list(fleet.placements()), state.isolation)
    return list(fleet.placements())


def _assert_shape_kept(old: Placement, new: Placement) -> None:
    """A move keeps what the VM asked for: the request it keeps, its size, and its guest cells and their sizes
    unless auto; GPUs asked ``required`` stay on its own cells."""
    asked = kept_request(old)
    assert kept_request(new) == asked
    if asked.gpu_affinity is GpuAffinity.REQUIRED:
        assert all(d.host_cell in new.host_cells for d in new.devices if d.kind is DeviceKind.GPU)
    assert (new.vcpus, new.memory_kib, new.numa_nodes) == (old.vcpus, old.memory_kib, old.numa_nodes)
    assert set(new.memory_modes) == set(old.memory_modes)
    assert (new.iothreads, new.iothread_policy) == (old.iothreads, old.iothread_policy)
    if old.numa_nodes is not None:
        sizes = [(len(c.vcpus), c.memory_kib) for c in old.cells]
        assert len(old.cells) == old.numa_nodes
        assert [(len(c.vcpus), c.memory_kib) for c in new.cells] == sizes
        assert new.memory_modes == old.memory_modes


def _hosts(state: FleetState) -> list[Host]:
    return list(state.hosts)


@settings(max_examples=40)
@given(state=fleets(), max_moves=st.integers(0, 3))
def test_locality_plan_replays_validly_and_never_gets_worse(state: FleetState, max_moves: int) -> None:
    plan = plan_moves(state, Objective.LOCALITY, max_moves)
    assert len(plan.moves) <= max_moves
    assert plan.after <= plan.before
    after = _replay(state, plan)
    again = plan_moves(FleetState(state.hosts, tuple(after), state.isolation), Objective.LOCALITY, 0)
    assert again.before == plan.after
    assert {p.vm for p in after} == {p.vm for p in state.placements}


@settings(max_examples=60)
@given(state=fleets(), max_moves=st.integers(0, 2), whole=st.booleans(), gpus=st.integers(0, 2))
def test_room_plan_replays_validly_and_makes_room_when_it_says_so(
    state: FleetState, max_moves: int, whole: bool, gpus: int
) -> None:
    total_gpus = sum(len(h.devices) for h in state.hosts)
    # A whole cell's worth of vCPUs on one cell is what fragmentation most often refuses.
    vcpus = len(state.hosts[0].cells[0].cpus) if whole else 2
    want: VmRequest = replace(
        request(
            "want",
            "t1",
            vcpus=vcpus,
            memory_gib=2,
            gpus=min(gpus, total_gpus),
            numa_nodes=1 if whole else None,
        ),
        isolation=Isolation.CORE,
    )
    plan = plan_moves(state, Objective.ROOM, max_moves, want)
    assert len(plan.moves) <= max_moves and plan.after <= plan.before
    after = _replay(state, plan)
    fits = place(want, Fleet(_hosts(state), after, state.isolation)).chosen is not None
    assert fits == (plan.after == 0)
    if plan.moves:
        fits_before = place(want, Fleet(_hosts(state), state.placements, state.isolation)).chosen is not None
        assert not fits_before


def _crowding(hosts: list[Host], placements: list[Placement]) -> int:
    """Spread-tenants from its definition: per tenant and host with n VMs, those sharing a cell with
    another of them, less max(0, n - cells + 1) when n exceeds the host's CPU cells."""
    cells = {h.name: sum(1 for c in h.cells if c.cpus) for h in hosts}
    total = 0
    for host in cells:
        for tenant in {p.tenant for p in placements if p.host == host}:
            vms = [p for p in placements if (p.host, p.tenant) == (host, tenant)]
            crowded = sum(
                1 for p in vms if any(set(p.host_cells) & set(q.host_cells) for q in vms if q.vm != p.vm)
            )
            total += crowded - (len(vms) - cells[host] + 1 if len(vms) > cells[host] else 0)
    return total


@settings(max_examples=60)
@given(state=fleets(), max_moves=st.integers(0, 3))
def test_spread_plan_replays_validly_and_never_gets_worse(state: FleetState, max_moves: int) -> None:
    plan = plan_moves(state, Objective.SPREAD_TENANTS, max_moves)
    assert len(plan.moves) <= max_moves
    assert plan.before == _crowding(_hosts(state), list(state.placements))
    after = _replay(state, plan)
    assert plan.after == _crowding(_hosts(state), after) <= plan.before
    assert plan.optimal == (plan.after == 0)
    for move in plan.moves:
        assert f"tenant {move.placement.tenant} " in move.reason
    if plan.moves:
        assert plan.after < plan.before


@settings(max_examples=60)
@given(state=fleets(), data=st.data())
def test_room_bound_never_rules_out_what_departures_would_allow(state: FleetState, data: st.DataObject) -> None:
    # Moves can free on a host at most what its leaving VMs hold: if the shape fits once some k of
    # them are simply gone, the planner's bound must allow k moves there.
    host = data.draw(st.sampled_from(_hosts(state)))
    mine = sorted(p.vm for p in state.placements if p.host == host.name and is_movable(p))
    gone = set(data.draw(st.lists(st.sampled_from(mine), unique=True, max_size=3))) if mine else set()
    want = request(
        "want",
        "t1",
        vcpus=data.draw(st.sampled_from([2, 4, 8])),
        memory_gib=2 * data.draw(st.integers(1, 2)),
        gpus=data.draw(st.integers(0, min(2, sum(len(h.devices) for h in state.hosts)))),
        numa_nodes=data.draw(st.sampled_from([None, 1, 2])),
        host=host.name,
    )
    left = [p for p in state.placements if p.vm not in gone]
    if place(want, Fleet(_hosts(state), left, state.isolation)).chosen is not None:
        assert could_fit(Search(state, 10.0, None), want, host.name, len(gone), set())


@settings(max_examples=60)
@given(state=fleets(), max_moves=st.integers(0, 4), data=st.data())
def test_drain_plan_replays_validly_and_leaves_only_what_it_names(
    state: FleetState, max_moves: int, data: st.DataObject
) -> None:
    host = data.draw(st.sampled_from([h.name for h in state.hosts]))
    on_host = sorted(p.vm for p in state.placements if p.host == host)
    plan = plan_moves(state, Objective.DRAIN, max_moves, drain=host)
    assert len(plan.moves) <= max_moves and len({m.vm for m in plan.moves}) == len(plan.moves)
    assert all(m.from_host == host and m.to_host != host for m in plan.moves)
    after = _replay(state, plan)
    stays = sorted(p.vm for p in after if p.host == host)
    assert stays == sorted(vm for vm, _why in plan.left) and all(why for _vm, why in plan.left)
    assert (plan.before, plan.after) == (len(on_host), len(stays))
    # optimal: every VM left, or CP-SAT proved no plan moves more (its gap, then 0.0, is this plan's own)
    assert plan.optimal == (not stays or plan.gap == 0.0)
    if len(state.hosts) == 1:
        assert stays == on_host
