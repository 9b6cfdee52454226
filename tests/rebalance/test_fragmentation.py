"""The ``fragmentation`` objective: fewer partly used cells, every move valid in order, never worse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from tests.rebalance.test_properties import _replay, fleets
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance import FleetState, plan_moves

ISO = {"t1": Isolation.CORE}


def _two_half_used_cells() -> FleetState:
    host = make_host("h", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4)
    fleet = Fleet([host], (), ISO)
    for name, cell in (("a", 0), ("b", 1)):
        req = request(name, vcpus=2, memory_gib=1, numa_nodes=1, avoid_cells=frozenset({("h", 1 - cell)}))
        chosen = place(req, fleet).chosen
        assert chosen is not None and chosen.host_cells == (cell,)
        fleet.add(chosen, Isolation.CORE)
    return FleetState((host,), fleet.placements(), ISO)


def test_two_half_used_cells_become_one_full_cell_and_one_empty() -> None:
    state = _two_half_used_cells()
    plan = plan_moves(state, Objective.FRAGMENTATION, 3)
    assert (plan.before, plan.after, plan.optimal, len(plan.moves)) == (2, 0, True, 1)
    (move,) = plan.moves
    assert "partly used cells 2 -> 0" in move.reason
    after = _replay(state, plan)
    assert len({p.host_cells for p in after}) == 1  # both VMs on one cell now


def test_no_moves_allowed_changes_nothing() -> None:
    plan = plan_moves(_two_half_used_cells(), Objective.FRAGMENTATION, 0)
    assert (plan.before, plan.after, plan.moves) == (2, 2, ())


@settings(max_examples=40)
@given(state=fleets(), max_moves=st.integers(0, 3))
def test_fragmentation_plan_replays_validly_and_never_gets_worse(state: FleetState, max_moves: int) -> None:
    plan = plan_moves(state, Objective.FRAGMENTATION, max_moves)
    assert len(plan.moves) <= max_moves and plan.after <= plan.before
    after = _replay(state, plan)
    again = plan_moves(FleetState(state.hosts, tuple(after), state.isolation), Objective.FRAGMENTATION, 0)
    assert again.before == plan.after
