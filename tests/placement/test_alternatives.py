"""Requests with alternatives (:mod:`vnuma.placement.alternatives`): the first alternative that fits on some host
of the fleet wins, the placement says which and keeps them all, a move takes an earlier one when it fits; every
alternative is checked before any is placed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from vnuma.errors import InvalidInputError
from vnuma.placement.alternatives import variants
from vnuma.placement.asks import as_asked, request_from
from vnuma.placement.engine import place
from vnuma.placement.kept import kept_request, move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.objectives import Strategy


def _with(*alternatives: dict[str, object], **options: object) -> VmRequest:
    """A request of 2 vCPUs and 1 GiB with ``options`` (as written) and ``alternatives``."""
    asked = {"tenant": "t1", "name": "vm", "vcpus": 2, "memory": "1GiB", **options}
    return request_from({**asked, "alternatives": list(alternatives)})


def _busy(fleet: Fleet, host: str, gpus: int, vcpus: int = 2) -> None:
    """A VM holding ``gpus`` GPUs of ``host``."""
    got = place(request(f"busy-{host}", vcpus=vcpus, gpus=gpus, host=host), fleet).chosen
    assert got is not None
    fleet.add(got)


def test_the_first_alternative_that_fits_anywhere_wins_over_a_later_one_on_a_better_host() -> None:
    """Four GPUs fit on ``a`` only (``b`` has two); ``b`` is the host the strategy would choose for one GPU
    (``pack``: ``a`` is half full of another VM, ``b`` empty is not, ... whichever: the first alternative
    decides before any host is ranked)."""
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=2), make_host("b", cells=2, gpus_per_cell=1)])
    req = _with({"gpus": 1}, gpus=4)
    one = place(replace(variants(req)[1], name="probe"), fleet, Strategy.PACK).chosen
    assert one is not None and one.host == "a"  # pack fills the larger host first: make b the better one
    _busy(fleet, "b", 0, vcpus=20)
    one = place(replace(variants(req)[1], name="probe"), fleet, Strategy.PACK).chosen
    assert one is not None and one.host == "b"  # alternative 1 alone would go to b
    for explain in (False, True):
        got = place(req, fleet, Strategy.PACK, explain=explain).chosen
        assert got is not None
        assert (got.host, got.alternative, len(got.devices)) == ("a", 0, 4)
        assert kept_request(got).alternatives == req.alternatives


def test_the_next_alternative_is_tried_only_when_none_before_fits_anywhere_and_the_record_says_which() -> None:
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=2), make_host("b", cells=2, gpus_per_cell=2)])
    _busy(fleet, "a", 3)
    _busy(fleet, "b", 2)
    req = _with({"gpus": 3}, {"gpus": 2}, {"gpus": 1}, gpus=4)
    result = place(req, fleet, Strategy.PACK)
    got = result.chosen
    assert got is not None and (got.host, got.alternative, len(got.devices)) == ("b", 2, 2)
    assert [(u.index, u.text) for u in result.unfit] == [(0, "as asked"), (1, "gpus=3,vcpus=2,memory=1GiB")]
    assert {r.host for r in result.unfit[0].rejections} == {"a", "b"}  # why it fits on neither, per host
    kept = kept_request(got)
    assert (kept.gpus, [a.get("gpus") for a in kept.alternatives]) == (4, [3, 2, 1])
    assert request_from(as_asked(kept)) == replace(kept, isolation=Isolation.CORE, host=None)


def test_none_fits_anywhere_is_no_placement_with_every_alternatives_reasons() -> None:
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=1)])
    _busy(fleet, "a", 2)
    result = place(_with({"gpus": 1}, gpus=2), fleet, Strategy.PACK, explain=False)
    assert result.chosen is None
    assert [u.index for u in result.unfit] == [0, 1]
    assert all(u.rejections for u in result.unfit)


def test_a_move_takes_an_earlier_alternative_where_it_fits_now() -> None:
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=2)])
    _busy(fleet, "a", 3)
    got = place(_with({"gpus": 1}, gpus=2, host="a"), fleet).chosen
    assert got is not None and got.alternative == 1 and len(got.devices) == 1
    fleet.add(got)
    fleet.remove("busy-a")
    fleet.remove(got.vm)
    moved = place(move_request(got, Isolation.CORE), fleet).chosen  # what every move asks
    assert moved is not None and (moved.alternative, len(moved.devices)) == (0, 2)
    assert kept_request(moved).alternatives == kept_request(got).alternatives


def test_an_alternative_sized_from_its_gpus_keeps_the_size_it_got() -> None:
    """Without vCPUs and memory, an alternative is sized from its GPUs as the request is; the VM keeps that
    size for its alternative (a move does not size it again), and the others stay as asked."""
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=2)])
    _busy(fleet, "a", 1)
    req = request_from({"tenant": "t1", "name": "vm", "gpus": 4, "alternatives": ["gpus=2", "gpus=1"]})
    got = place(req, fleet).chosen
    assert got is not None and got.alternative == 1
    alts = kept_request(got).alternatives
    assert alts[0].get("vcpus") == got.vcpus and alts[1].get("vcpus") is None
    assert kept_request(got).vcpus is None


@pytest.mark.parametrize(
    ("alternatives", "words"),
    [
        (["mig=9g.99gb:2,vcpus=2,memory=1GiB"], "alternative 1 (mig=9g.99gb:2,vcpus=2,memory=1GiB): no GPU of the "
                                                "fleet offers MIG profile '9g.99gb'"),
        (["gpus=1", "vgpu=nope:1,vcpus=2,memory=1GiB"], "alternative 2 (vgpu=nope:1,vcpus=2,memory=1GiB): no GPU"),
        (["gpus=99"], "alternative 1 (gpus=99,vcpus=2,memory=1GiB): asks for 99 GPUs, the whole fleet has 4"),
        (["vcpus=0"], "alternative 1 (vcpus=0,memory=1GiB): needs at least 1 vCPU"),
        (["numa_nodes=2"], "alternative 1 (numa_nodes=2): numa_nodes cannot change in an alternative"),
        (["gpus"], "bad --or 'gpus' (alternative 1)"),
    ],
    ids=["unknown-mig", "unknown-vgpu", "too-many-gpus", "no-vcpus", "not-a-device", "no-value"],
)
def test_every_alternative_is_checked_before_any_is_placed(alternatives: list[str], words: str) -> None:
    fleet = Fleet([make_host("a", cells=2, gpus_per_cell=2)])
    with pytest.raises(InvalidInputError) as caught:
        place(request_from({"tenant": "t1", "name": "vm", "vcpus": 2, "memory": "1GiB", "gpus": 1,
                            "alternatives": alternatives}), fleet)
    assert words in str(caught.value)


def _fleet(loads: list[tuple[int, int]]) -> Fleet:
    """Hosts of 2 cells with ``gpus`` GPUs per cell, each with a VM holding ``busy`` of them."""
    hosts = [make_host(f"h{i}", cells=2, cores_per_cell=4, gpus_per_cell=g) for i, (g, _b) in enumerate(loads)]
    fleet = Fleet(hosts)
    for i, (_g, busy) in enumerate(loads):
        if busy:
            _busy(fleet, f"h{i}", busy)
    return fleet


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.integers(0, 3).flatmap(lambda g: st.tuples(st.just(g), st.integers(0, 2 * g))),
                   min_size=1, max_size=4),
    counts=st.lists(st.integers(1, 6), min_size=2, max_size=4),
    strategy=st.sampled_from(list(Strategy)),
)
def test_the_chosen_alternative_is_the_first_any_host_can_take(
    loads: list[tuple[int, int]], counts: list[int], strategy: Strategy
) -> None:
    """Over random fleets, the alternative placed is the first one some host takes when asked alone (each
    host asked by itself: ``--host``), and nothing is placed only when no host takes any."""
    fleet = _fleet(loads)
    total = fleet.gpus_total
    counts = [min(c, total) for c in counts if c <= max(total, 1)]
    if not counts or not total:
        return
    req = request_from({"tenant": "t1", "name": "vm", "vcpus": 2, "memory": "1GiB", "gpus": counts[0],
                        "alternatives": [f"gpus={c}" for c in counts[1:]]})
    takers = [
        [h for h in fleet.host_names() if place(replace(v, host=h), fleet, strategy).chosen is not None]
        for v in variants(req)
    ]
    first = next((i for i, hosts in enumerate(takers) if hosts), None)
    got = place(req, fleet, strategy, explain=False).chosen
    if first is None:
        assert got is None
        return
    assert got is not None and got.alternative == first and got.host in takers[first]
    assert len(got.devices) == counts[first]
    assert place(req, fleet, strategy, explain=True).chosen == got
