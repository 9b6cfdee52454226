"""Property tests: feasibility, completeness against brute force, determinism."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.placement.helpers import brute_force_fits, check_fleet
from tests.placement.strategies import EVEN, ISOLATION, host_lists, vm_requests
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host


def _fill(hosts: list[Host], reqs: list[VmRequest], strategy: Strategy) -> tuple[Fleet, list[Placement]]:
    """Place ``reqs`` in order (skipping what does not fit); the fleet and its placements."""
    fleet = Fleet(hosts)
    for r in reqs:
        if r.gpus > fleet.gpus_total:
            continue
        chosen = place(r, fleet, strategy, explain=False).chosen
        if chosen is not None:
            fleet.add(chosen, r.isolation)
    return fleet, list(fleet.placements())


def _history(max_size: int = 4, **kw: object) -> st.SearchStrategy[list[VmRequest]]:
    return (
        st.lists(st.integers(0, 10_000), max_size=max_size)
        .flatmap(
            lambda ids: st.tuples(*(vm_requests(f"old{i}-{n}", **kw) for i, n in enumerate(ids)))  # type: ignore[arg-type]
        )
        .map(list)
    )


@settings(max_examples=300)
@given(hosts=host_lists(), history=_history(), req=vm_requests("new"))
def test_place_finds_a_fit_exactly_when_brute_force_does(
    hosts: list[Host], history: list[VmRequest], req: VmRequest
) -> None:
    fleet, placed = _fill(hosts, history, Strategy.PACK)
    assume(req.gpus <= fleet.gpus_total)
    result = place(req, fleet)
    expected = brute_force_fits(hosts, placed, req, ISOLATION)
    assert (result.chosen is not None) == expected, result.rejections
    if result.chosen is None:
        assert {r.host for r in result.rejections} == {h.name for h in hosts}
        assert all(r.reason for r in result.rejections)


@settings(max_examples=150)
@given(
    hosts=host_lists(),
    history=_history(max_size=8, socket=True),
    strategy=st.sampled_from(tuple(Strategy)),
)
def test_every_placement_sequence_keeps_the_invariants(
    hosts: list[Host], history: list[VmRequest], strategy: Strategy
) -> None:
    fleet, placed = _fill(hosts, history, strategy)
    check_fleet(hosts, placed, ISOLATION)
    for p in placed:
        assert fleet.placement(p.vm) == p


@settings(max_examples=150)
@given(
    hosts=host_lists(max_hosts=3),
    history=_history(socket=True),
    req=vm_requests("new", socket=True),
    strategy=st.sampled_from(tuple(Strategy)),
)
def test_same_state_same_answer_whatever_the_host_order_or_path(
    hosts: list[Host], history: list[VmRequest], req: VmRequest, strategy: Strategy
) -> None:
    fleet, placed = _fill(hosts, history, strategy)
    assume(req.gpus <= fleet.gpus_total)
    reordered = Fleet(list(reversed(hosts)), placed, ISOLATION)
    first = place(req, fleet, strategy)
    assert place(req, fleet, strategy) == first
    assert place(req, reordered, strategy) == first
    assert place(req, fleet, strategy, explain=False).chosen == first.chosen


@settings(max_examples=100)
@given(hosts=host_lists(), history=_history(max_size=6), data=st.data())
def test_gpu_only_requests_are_sized_and_placed_consistently(
    hosts: list[Host], history: list[VmRequest], data: st.DataObject
) -> None:
    fleet, _placed = _fill(hosts, history, Strategy.PACK)
    assume(fleet.gpus_total > 0)
    base = data.draw(vm_requests("gpu-only", shared=False))
    req = replace(base, vcpus=None, memory_kib=None, gpus=data.draw(st.integers(1, fleet.gpus_total)), **EVEN)
    result = place(req, fleet)
    if result.chosen is not None:
        fleet.add(result.chosen, req.isolation)
        check_fleet(hosts, fleet.placements(), ISOLATION)
        assert sum(1 for d in result.chosen.devices if d.kind == "gpu") == req.gpus
