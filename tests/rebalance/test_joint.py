"""``rebalance --solver cp-sat``: ``locality``, ``fragmentation`` and ``spread-tenants`` as one joint assignment.

The solver plan replays validly (each move admitted, in order, on the state
the earlier ones left), is never worse than the greedy's, reaches the
optimum where the greedy's one-move-at-a-time search cannot, respects
``max_moves``, and says so (exit 5, nothing planned) when the time runs out
before it has any assignment.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from tests.rebalance.test_fragmentation import _two_half_used_cells
from tests.rebalance.test_properties import _replay, fleets
from vnuma.errors import NoRoomError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance import FleetState, plan_moves

ISO = {"t1": Isolation.CORE, "t2": Isolation.CORE, "t3": Isolation.CORE}


def _split_behind_a_neighbour() -> FleetState:
    """h0 (2 cells x 4 CPUs): ``split`` (4 vCPUs, auto) has 2 on each cell, ``a`` and ``b`` (2 each) fill
    the rest; h1 has room for one 2-vCPU VM only. ``split`` fits one cell only once ``a`` or ``b`` leaves
    for h1, a move that gains nothing by itself, so the greedy never makes it."""
    hosts = (
        make_host("h0", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
        make_host("h1", cells=1, cores_per_cell=2, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
    )
    fleet = Fleet(hosts, (), ISO)
    steps = (("a", 2, 1, {("h0", 1), ("h1", 0)}), ("b", 2, 1, {("h0", 0), ("h1", 0)}), ("split", 4, None, {("h1", 0)}))
    for name, vcpus, nodes, avoid in steps:
        chosen = place(request(name, vcpus=vcpus, numa_nodes=nodes, avoid_cells=frozenset(avoid)), fleet).chosen
        assert chosen is not None, name
        fleet.add(chosen, Isolation.CORE)
    split = fleet.placement("split")
    assert split is not None and split.host_cells == (0, 1)
    return FleetState(hosts, fleet.placements(), ISO)


def test_the_joint_plan_reaches_the_optimum_the_greedy_cannot() -> None:
    state = _split_behind_a_neighbour()
    greedy = plan_moves(state, Objective.LOCALITY, 3, solver="search")
    assert (greedy.before, greedy.after, greedy.moves) == (1, 1, ())
    solved = plan_moves(state, Objective.LOCALITY, 3, solver="cp-sat", clock=time.monotonic)
    assert (solved.solver, solved.before, solved.after, solved.optimal, solved.gap) == ("cp-sat", 1, 0, True, 0.0)
    assert len(solved.moves) == 2  # the fewest: a neighbour leaves for h1, then split re-pins
    first, second = solved.moves
    assert (first.vm in {"a", "b"}, first.to_host) == (True, "h1")
    assert (second.vm, second.to_host, len(second.to_cells)) == ("split", "h0", 1)
    after = _replay(state, solved)
    again = plan_moves(FleetState(state.hosts, tuple(after), state.isolation), Objective.LOCALITY, 0)
    assert again.before == 0


def _crowded_behind_another_tenant() -> FleetState:
    """One host of 3 cells x 2 CPUs: t1's ``a`` and ``b`` share cell 0, t1's ``f`` and a free CPU are on
    cell 1, t2's ``g`` and t3's ``h`` fill cell 2. Moving ``a`` or ``b`` to cell 1 only swaps which t1 VMs
    share a cell, so the greedy finds no gain; ``g`` moving to cell 1 first lets ``a`` into cell 2."""
    host = make_host("h0", cells=3, cores_per_cell=2, smt=1, memory_gib=12, hugepages_2m_gib=3, hugepages_1g_gib=6)
    fleet = Fleet([host], (), ISO)
    for name, tenant, cell in (("a", "t1", 0), ("b", "t1", 0), ("f", "t1", 1), ("g", "t2", 2), ("h", "t3", 2)):
        avoid = frozenset(("h0", c) for c in range(3) if c != cell)
        chosen = place(request(name, tenant, vcpus=1, numa_nodes=1, avoid_cells=avoid), fleet).chosen
        assert chosen is not None and chosen.host_cells == (cell,), name
        fleet.add(chosen, Isolation.CORE)
    return FleetState((host,), fleet.placements(), ISO)


def test_the_joint_plan_spreads_a_tenant_the_greedy_cannot() -> None:
    state = _crowded_behind_another_tenant()
    greedy = plan_moves(state, Objective.SPREAD_TENANTS, 3, solver="search")
    assert (greedy.before, greedy.after, greedy.moves) == (2, 2, ())
    solved = plan_moves(state, Objective.SPREAD_TENANTS, 3, solver="cp-sat", clock=time.monotonic)
    assert (solved.solver, solved.before, solved.after, solved.optimal, len(solved.moves)) == ("cp-sat", 2, 0, True, 2)
    assert solved.moves[0].vm in {"g", "h"}  # the other tenant's VM leaves cell 2 first
    after = _replay(state, solved)
    again = plan_moves(FleetState(state.hosts, tuple(after), state.isolation), Objective.SPREAD_TENANTS, 0)
    assert again.before == 0


def test_max_moves_bounds_the_joint_plan() -> None:
    """With one move allowed nothing gains: the solver moves nothing rather than something useless."""
    solved = plan_moves(_split_behind_a_neighbour(), Objective.LOCALITY, 1, solver="cp-sat")
    assert (solved.before, solved.after, solved.moves) == (1, 1, ())


def test_fragmentation_by_the_solver_fills_one_cell() -> None:
    state = _two_half_used_cells()
    solved = plan_moves(state, Objective.FRAGMENTATION, 3, solver="cp-sat")
    assert (solved.solver, solved.before, solved.after, solved.optimal, len(solved.moves)) == ("cp-sat", 2, 0, True, 1)
    after = _replay(state, solved)
    assert len({p.host_cells for p in after}) == 1


def test_no_assignment_within_the_time_limit_is_exit_5() -> None:
    ticks = itertools.count(0.0, 1.0)  # every look at the clock is a second later: the limit passes at once
    with pytest.raises(NoRoomError, match="CP-SAT found no plan within the time limit") as err:
        plan_moves(_split_behind_a_neighbour(), Objective.LOCALITY, 3, None, 0.5, clock=lambda: next(ticks),
                   solver="cp-sat")
    assert err.value.exit_code == 5


@settings(max_examples=40, deadline=None)
@given(state=fleets(), max_moves=st.integers(0, 3),
       objective=st.sampled_from([Objective.LOCALITY, Objective.FRAGMENTATION, Objective.SPREAD_TENANTS]))
def test_a_joint_plan_replays_validly_and_is_never_worse_than_the_greedy(
    state: FleetState, max_moves: int, objective: Objective
) -> None:
    greedy = plan_moves(state, objective, max_moves, solver="search")
    solved = plan_moves(state, objective, max_moves, solver="cp-sat")
    assert solved.before == greedy.before
    assert (solved.after, len(solved.moves)) <= (greedy.after, len(greedy.moves))
    assert len(solved.moves) <= max_moves
    assert len({m.vm for m in solved.moves}) == len(solved.moves)  # each VM moves once
    after = _replay(state, solved)  # each move admitted in order; no pCPU, page or GPU held twice
    again = plan_moves(FleetState(state.hosts, tuple(after), state.isolation), objective, 0)
    assert again.before == solved.after
    assert {p.vm for p in after} == {p.vm for p in state.placements}


def test_the_joint_plan_moves_the_other_neighbour_when_one_is_excluded() -> None:
    from dataclasses import replace

    from vnuma.placement.rebalance import Exclusion

    state = _split_behind_a_neighbour()
    solved = plan_moves(state, Objective.LOCALITY, 3, solver="cp-sat", clock=time.monotonic)
    leaving = solved.moves[0].vm
    other = "b" if leaving == "a" else "a"
    barred = replace(state, excluded=Exclusion(vms=frozenset({leaving})))
    again = plan_moves(barred, Objective.LOCALITY, 3, solver="cp-sat", clock=time.monotonic)
    assert [(m.vm, m.to_host) for m in again.moves][:1] == [(other, "h1")] and again.after == 0
    both = replace(state, excluded=Exclusion(vms=frozenset({"a", "b"})))
    assert plan_moves(both, Objective.LOCALITY, 3, solver="cp-sat", clock=time.monotonic).moves == ()
