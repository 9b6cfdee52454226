"""``rebalance --make-room-for … --solver cp-sat``: room planned by CP-SAT.

The solver's plan replays validly (each move admitted in order), lets the
shape in exactly when it says so, never makes room with more moves than the
search (nor fails where the search succeeds), respects ``max_moves``, and
reaches plans the search does not consider.
"""

from __future__ import annotations

import time
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from tests.rebalance.test_properties import _replay, fleets
from tests.rebalance.test_scenarios import _fragmented
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.rebalance import FleetState, Objective, plan_moves

ISO = {"t1": Isolation.CORE}


def test_the_solver_makes_room_with_the_fewest_moves() -> None:
    host, vms = _fragmented()
    state = FleetState((host,), tuple(vms), ISO)
    want = request("big", vcpus=4, memory_gib=4, gpus=2, numa_nodes=1)
    plan = plan_moves(state, Objective.ROOM, 3, want, solver="cp-sat", clock=time.monotonic)
    assert (plan.solver, plan.before, plan.after, plan.optimal, plan.gap) == ("cp-sat", 1, 0, True, 0.0)
    assert sorted(m.vm for m in plan.moves) == ["small-a", "small-b"]
    after = _replay(state, plan)
    assert place(want, Fleet([host], after, ISO)).chosen is not None


def test_one_move_is_not_enough_and_the_solver_says_so() -> None:
    host, vms = _fragmented()
    want = request("big", vcpus=4, memory_gib=4, gpus=2, numa_nodes=1)
    plan = plan_moves(FleetState((host,), tuple(vms), ISO), Objective.ROOM, 1, want, solver="cp-sat")
    assert (plan.moves, plan.before, plan.after, plan.optimal) == ((), 1, 1, True)


def test_a_shape_that_fits_needs_no_plan() -> None:
    host, vms = _fragmented()
    plan = plan_moves(FleetState((host,), tuple(vms), ISO), Objective.ROOM, 3, request("s", vcpus=1, memory_gib=1),
                      solver="cp-sat")
    assert (plan.moves, plan.before, plan.after, plan.solver) == ((), 0, 0, "cp-sat")


def _two_crowded_hosts() -> tuple[FleetState, VmRequest]:
    """Two hosts of 2 cells x 4 CPUs, each cell with a 2-vCPU VM (``a0``/``b0`` on h0, ``a1``/``b1`` on h1),
    and h2 (1 cell x 2 CPUs) with room for one of them. The shape (4 vCPUs on one cell) fits on h0 or h1
    once one VM there leaves its cell: a re-pin next to the other, or h2."""
    hosts = (
        make_host("h0", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
        make_host("h1", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
        make_host("h2", cells=1, cores_per_cell=2, smt=1, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4),
    )
    fleet = Fleet(hosts, (), ISO)
    for host in ("h0", "h1"):
        for cell, name in enumerate(("a", "b")):
            avoid = frozenset({(h, c) for h in ("h0", "h1", "h2") for c in range(2)} - {(host, cell)})
            chosen = place(request(f"{name}{host[1]}", vcpus=2, numa_nodes=1, avoid_cells=avoid), fleet).chosen
            assert chosen is not None and (chosen.host, chosen.host_cells) == (host, (cell,))
            fleet.add(chosen, Isolation.CORE)
    return FleetState(hosts, fleet.placements(), ISO), request("big", vcpus=4, memory_gib=2, numa_nodes=1)


def test_the_solver_plans_over_several_target_hosts() -> None:
    state, want = _two_crowded_hosts()
    plan = plan_moves(state, Objective.ROOM, 2, want, solver="cp-sat")
    assert (plan.solver, plan.before, plan.after, len(plan.moves)) == ("cp-sat", 1, 0, 1)
    after = _replay(state, plan)
    assert place(want, Fleet(state.hosts, after, ISO)).chosen is not None


@settings(max_examples=40, deadline=None)
@given(state=fleets(), max_moves=st.integers(0, 2), whole=st.booleans(), gpus=st.integers(0, 2))
def test_a_solver_room_plan_replays_validly_and_is_never_worse_than_the_search(
    state: FleetState, max_moves: int, whole: bool, gpus: int
) -> None:
    total_gpus = sum(len(h.devices) for h in state.hosts)
    vcpus = len(state.hosts[0].cells[0].cpus) if whole else 2
    want = replace(request("want", "t1", vcpus=vcpus, memory_gib=2, gpus=min(gpus, total_gpus),
                           numa_nodes=1 if whole else None), isolation=Isolation.CORE)
    search = plan_moves(state, Objective.ROOM, max_moves, want)
    solved = plan_moves(state, Objective.ROOM, max_moves, want, solver="cp-sat")
    assert solved.before == search.before
    assert (solved.after, len(solved.moves)) <= (search.after, len(search.moves))
    assert len(solved.moves) <= max_moves
    assert len({m.vm for m in solved.moves}) == len(solved.moves)  # each VM moves once
    after = _replay(state, solved)  # each move admitted in order; no pCPU, page or GPU held twice
    fits = place(want, Fleet(state.hosts, after, state.isolation)).chosen is not None
    assert fits == (solved.after == 0)
    assert {p.vm for p in after} == {p.vm for p in state.placements}
