"""``host drain --solver cp-sat``: every VM's destination chosen at once by OR-Tools CP-SAT.

The solver plan replays validly (each move admitted on the state the earlier
ones left), keeps every VM's guest shape, and never moves fewer VMs than the
hand-written drain; on a fleet where largest-first strands the small VMs it
moves more, and proves its answer optimal for its model.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from hypothesis import given, settings

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from tests.rebalance.test_properties import _replay, fleets
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Affinity, GpuAffinity, Isolation
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance import FleetState, Move, Plan, plan_moves
from vnuma.topology import PAGE_1G, PAGE_2M, PAGE_4K

TENANTS = {"t1": Isolation.CORE, "t2": Isolation.NONE}


def _small_beats_large() -> FleetState:
    """h0 (2 cells x 4 CPUs) holds a 4-vCPU VM and three small ones; h1 has one 6-CPU cell."""
    hosts = (
        make_host("h0", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
        make_host("h1", cells=1, cores_per_cell=6, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
    )
    fleet = Fleet(hosts, (), TENANTS)
    for name, tenant, vcpus, gib, page in (
        ("big", "t1", 4, 3, PAGE_1G), ("a", "t1", 2, 1, PAGE_1G), ("b", "t2", 1, 3, PAGE_1G), ("c", "t2", 1, 1, PAGE_2M)
    ):
        req = request(name, tenant, vcpus=vcpus, memory_gib=gib, numa_nodes=1, page_size_kib=page, host="h0",
                      isolation=TENANTS[tenant])
        chosen = place(req, fleet).chosen
        assert chosen is not None, name
        fleet.add(chosen, TENANTS[tenant])
    return FleetState(hosts, fleet.placements(), TENANTS)


def test_the_solver_moves_the_small_vms_largest_first_strands() -> None:
    state = _small_beats_large()
    greedy = plan_moves(state, Objective.DRAIN, 4, drain="h0", solver="search")
    assert sorted(m.vm for m in greedy.moves) == ["a", "big"] and greedy.solver == "search"
    solved = plan_moves(state, Objective.DRAIN, 4, drain="h0", solver="cp-sat", clock=time.monotonic)
    assert sorted(m.vm for m in solved.moves) == ["a", "b", "c"]
    assert [vm for vm, _ in solved.left] == ["big"] and "the solver keeps it here" in solved.left[0][1]
    assert (solved.solver, solved.gap, solved.before, solved.after) == ("cp-sat", 0.0, 4, 1)
    _replay(state, solved)


def test_max_moves_bounds_the_solver_too() -> None:
    solved = plan_moves(_small_beats_large(), Objective.DRAIN, 2, drain="h0", solver="cp-sat")
    assert len(solved.moves) == 2 and len(solved.left) == 2


@settings(max_examples=25, deadline=None)
@given(state=fleets())
def test_a_solver_drain_replays_validly_and_moves_at_least_what_the_search_moves(state: FleetState) -> None:
    host = state.hosts[0].name
    on_host = sum(1 for p in state.placements if p.host == host)
    greedy = plan_moves(state, Objective.DRAIN, on_host, drain=host, solver="search")
    solved = plan_moves(state, Objective.DRAIN, on_host, drain=host, solver="cp-sat")
    assert len(solved.moves) >= len(greedy.moves)
    assert len(solved.moves) + len(solved.left) == on_host == solved.before
    assert len({m.vm for m in solved.moves}) == len(solved.moves)
    _replay(state, solved)  # each move admitted in order; guest shapes kept


def test_the_solver_refuses_objectives_it_does_not_plan() -> None:
    words = "plans drain, locality, room, fragmentation, spread-tenants, not bandwidth"
    with pytest.raises(InvalidInputError, match=words):
        plan_moves(_small_beats_large(), Objective.BANDWIDTH, 2, solver="cp-sat")
    with pytest.raises(InvalidInputError, match="unknown solver 'gurobi'"):
        plan_moves(_small_beats_large(), Objective.DRAIN, 2, drain="h0", solver="gurobi")


def _group_blocks_a_single() -> FleetState:
    """h1 (drained) holds an affine pair (6 vCPUs each) and ``s`` (4 vCPUs, 16 GiB). h2 has 12 pCPUs and
    plenty of memory free, h3 14 pCPUs but only 11 GiB: the engine's first choice for the pair is h2 (the
    fuller), which leaves ``s`` nowhere; the pair on h3 lets ``s`` go to h2."""
    kw = {"cells": 1, "cores_per_cell": 16, "smt": 1, "hugepages_2m_gib": 0}
    hosts = (
        make_host("h1", memory_gib=64, hugepages_1g_gib=48, **kw),  # type: ignore[arg-type]
        make_host("h2", memory_gib=64, hugepages_1g_gib=48, **kw),  # type: ignore[arg-type]
        make_host("h3", memory_gib=16, hugepages_1g_gib=12, **kw),  # type: ignore[arg-type]
    )
    fleet = Fleet(hosts, (), TENANTS)
    asks = [("fill-h2", "t2", 4, "h2", {}), ("fill-h3", "t2", 2, "h3", {}),
            ("p1", "t1", 6, "h1", {"group": "pair", "affinity": Affinity.HOST}),
            ("p2", "t1", 6, "h1", {"group": "pair", "affinity": Affinity.HOST}), ("s", "t1", 4, "h1", {})]
    for name, tenant, vcpus, host, extra in asks:
        gib = 16 if name == "s" else 1
        req = request(name, tenant, vcpus=vcpus, memory_gib=gib, numa_nodes=1, page_size_kib=PAGE_1G, host=host,
                      isolation=TENANTS[tenant], **extra)
        chosen = place(req, fleet).chosen
        assert chosen is not None, name
        fleet.add(chosen, TENANTS[tenant])
    return FleetState(tuple(replace(h, cordoned=h.name == "h1") for h in hosts), fleet.placements(), TENANTS)


def test_the_solver_chooses_a_groups_host_with_the_single_vms() -> None:
    state = _group_blocks_a_single()
    greedy = plan_moves(state, Objective.DRAIN, 10, drain="h1", solver="search")
    assert {m.vm: m.to_host for m in greedy.moves} == {"p1": "h2", "p2": "h2"}
    assert [vm for vm, _ in greedy.left] == ["s"]
    solved = plan_moves(state, Objective.DRAIN, 10, drain="h1", solver="cp-sat", clock=time.monotonic)
    assert {m.vm: m.to_host for m in solved.moves} == {"p1": "h3", "p2": "h3", "s": "h2"}
    assert (solved.solver, solved.gap, solved.left) == ("cp-sat", 0.0, ())
    assert [m.vm for m in solved.moves][:2] == ["p1", "p2"]  # the group's VMs consecutive, as a run moves them
    _run(state, solved)
    # --max-moves counts the group's two VMs: with 2 allowed, the pair (two VMs) rather than s alone.
    short = plan_moves(state, Objective.DRAIN, 2, drain="h1", solver="cp-sat")
    assert {m.vm for m in short.moves} == {"p1", "p2"}


def _run(state: FleetState, plan: Plan) -> None:
    """The plan as a journaled run carries it out: an affine group's consecutive moves to one host leave
    together, then each arrives admitted; the others one by one. Nothing is held twice at any step."""
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    batches: list[list[Move]] = []
    for m in plan.moves:
        if batches and m.placement.group is not None and (batches[-1][0].placement.group, batches[-1][0].to_host) == (
                m.placement.group, m.to_host):
            batches[-1].append(m)
        else:
            batches.append([m])
    for batch in batches:
        for m in batch:
            fleet.remove(m.vm)
        for m in batch:
            fleet.add(m.placement, state.isolation[str(m.placement.tenant)])
        check_fleet(list(state.hosts), list(fleet.placements()), state.isolation)


def test_a_tie_goes_the_way_of_the_search() -> None:
    """Two equal VMs and room for one elsewhere: CP-SAT moves the one the VM-by-VM drain moves (by name)."""
    kw = {"cells": 1, "cores_per_cell": 8, "smt": 1, "memory_gib": 16, "hugepages_2m_gib": 0, "hugepages_1g_gib": 12}
    hosts = (make_host("h0", **kw), make_host("h1", **kw))  # type: ignore[arg-type]
    fleet = Fleet(hosts, (), TENANTS)
    for name, host in (("fill", "h1"), ("v1", "h0"), ("v2", "h0")):
        req = request(name, vcpus=4, numa_nodes=1, page_size_kib=PAGE_1G, host=host)
        chosen = place(req, fleet).chosen
        assert chosen is not None, name
        fleet.add(chosen, Isolation.CORE)
    state = FleetState(hosts, fleet.placements(), TENANTS)
    plans = [plan_moves(state, Objective.DRAIN, 2, drain="h0", solver=s) for s in ("search", "cp-sat")]
    assert [[m.vm for m in p.moves] for p in plans] == [["v1"], ["v1"]]
    assert [[vm for vm, _ in p.left] for p in plans] == [["v2"], ["v2"]]


def test_the_solver_counts_a_gpu_of_a_cell_with_no_placeable_cpu_as_a_loose_gpu() -> None:
    """Cell 0's only CPU is reserved, so its GPU is one of h0's loose GPUs: a drain's model counts it
    where the ledger does (it once looked it up as a memory-only cell and failed)."""
    hosts = (
        make_host("h0", cells=2, cores_per_cell=1, smt=1, memory_gib=4, hugepages_2m_gib=0, hugepages_1g_gib=0,
                  gpus_per_cell=1, reserved_cpus=frozenset({0})),
        make_host("h1", cells=2, cores_per_cell=1, smt=1, memory_gib=4, hugepages_2m_gib=0, hugepages_1g_gib=0,
                  gpus_per_cell=1, reserved_cpus=frozenset({0})),
    )
    fleet = Fleet(hosts, (), TENANTS)
    req = request("vm", "t1", vcpus=1, memory_gib=1, gpus=2, host="h0", gpu_affinity=GpuAffinity.PREFERRED,
                  page_size_kib=PAGE_4K)
    chosen = place(req, fleet).chosen
    assert chosen is not None and len([d for d in chosen.devices if d.kind == "gpu"]) == 2
    fleet.add(chosen, TENANTS["t1"])
    state = FleetState(hosts, fleet.placements(), TENANTS)
    for most in (0, 1):
        plans = [plan_moves(state, Objective.DRAIN, most, drain="h0", solver=s) for s in ("search", "cp-sat")]
        assert [[m.vm for m in p.moves] for p in plans] == [["vm"] * most] * 2
        if most:
            _run(state, plans[1])
