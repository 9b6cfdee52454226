"""``host drain --solver cp-sat``: every VM's destination chosen at once by OR-Tools CP-SAT.

The solver plan replays validly (each move admitted on the state the earlier
ones left), keeps every VM's guest shape, and never moves fewer VMs than the
hand-written drain; on a fleet where largest-first strands the small VMs it
moves more, and proves its answer optimal for its model.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings

from tests.builders import make_host
from tests.placement.helpers import request
from tests.rebalance.test_properties import _replay, fleets
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Objective
from vnuma.placement.rebalance import FleetState, plan_moves
from vnuma.topology import PAGE_1G, PAGE_2M

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
    greedy = plan_moves(state, Objective.DRAIN, 4, drain="h0")
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
    greedy = plan_moves(state, Objective.DRAIN, on_host, drain=host)
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
