"""Filling host by host (:mod:`vnuma.placement.fill`, what `vnuma capacity` runs for one shape) places the very
copies that placing them one after another with the engine places, and stops on the same rejections."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.placement.strategies import tiny_hosts, vm_requests
from tests.placement.test_properties import _history
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.fill import fill
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.request import validate_request
from vnuma.placement.result import Rejection
from vnuma.topology import Host


@st.composite
def twin_fleets(draw: st.DrawFn) -> list[Host]:
    """1-6 hosts of one or two hardware shapes (hosts of a shape alike until VMs land on them)."""
    shapes = [draw(tiny_hosts("x")) for _ in range(draw(st.integers(1, 2)))]
    return [replace(draw(st.sampled_from(shapes)), name=f"h{i}") for i in range(draw(st.integers(1, 6)))]


def _fleet(hosts: list[Host], history: list[VmRequest], shape: VmRequest) -> Fleet:
    fleet = Fleet(hosts)
    for r in history:
        if r.gpus <= fleet.gpus_total:
            chosen = place(r, fleet, Strategy.PACK, explain=False).chosen
            if chosen is not None:
                fleet.add(chosen, r.isolation)
    fleet.set_isolation(shape.tenant or "", shape.isolation)
    return fleet


def _one_after_another(
    shape: VmRequest, fleet: Fleet, strategy: Strategy, count: int | None
) -> tuple[list[Placement], tuple[Rejection, ...]]:
    placed: list[Placement] = []
    while count is None or len(placed) < count:
        req = replace(shape, name=f"c-{len(placed) + 1}")
        chosen = place(req, fleet, strategy, explain=False).chosen
        if chosen is None:
            return placed, place(req, fleet, strategy, explain=True).rejections
        fleet.record(chosen)
        placed.append(chosen)
    return placed, ()


@settings(max_examples=200, deadline=None)
@given(
    hosts=twin_fleets(), history=_history(max_size=5), shape=vm_requests("shape", shared=False),
    strategy=st.sampled_from(list(Strategy)), count=st.none() | st.integers(1, 8),
)
def test_filling_host_by_host_places_what_one_after_another_places(
    hosts: list[Host], history: list[VmRequest], shape: VmRequest, strategy: Strategy, count: int | None
) -> None:
    reference = _fleet(hosts, history, shape)
    try:
        validate_request(shape, reference)
    except InvalidInputError:
        assume(False)
    placed, rejections = _one_after_another(shape, reference, strategy, count)
    fleet = _fleet(hosts, history, shape)
    filled = fill(shape, fleet, strategy, list(fleet.states), count, name="c-{}")
    assert list(filled.placements) == placed
    event(f"copies placed: {min(len(placed), 4)}{'+' if len(placed) >= 4 else ''}")
    event(f"groups of alike hosts: {len(filled.stops)} for {len(hosts)} hosts" if filled.stops else "count reached")
    stopped = count is None or len(placed) < count
    assert bool(filled.stops) == (stopped and bool(hosts))
    if filled.stops:
        by_host = {r.host: r for r in rejections}
        for r, _n in filled.stops:
            assert by_host[r.host] == r  # each group's first host: the very rejection, reason and all
        weighted: Counter[str] = Counter()
        for r, n in filled.stops:
            weighted[r.check] += n
        assert weighted == Counter(r.check for r in rejections)
