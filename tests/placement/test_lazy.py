"""Lazily built host state answers exactly as eagerly built state does."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host


def _copies(hosts: list[Host], copies: int) -> list[Host]:
    """The hosts plus same-shape copies under other names (sharing the cell objects)."""
    return hosts + [replace(h, name=f"{h.name}-c{i}") for h in hosts for i in range(copies)]


def _eager(hosts: list[Host]) -> Fleet:
    fleet = Fleet(hosts, (), ISOLATION)
    for hs in fleet.states:
        hs.build()  # every host gets its own per-cell state now
    assert all(hs.built for hs in fleet.states)
    return fleet


@settings(max_examples=150, deadline=None)
@given(
    hosts=host_lists(max_hosts=3),
    copies=st.integers(0, 3),
    steps=st.lists(
        st.tuples(st.integers(0, 10_000).flatmap(lambda n: vm_requests(f"vm{n}")), st.booleans(),
                  st.sampled_from(tuple(Strategy)), st.integers(0, 3)),
        max_size=12,
    ),
)
def test_lazy_fleet_places_as_eager_fleet(
    hosts: list[Host], copies: int, steps: list[tuple[VmRequest, bool, Strategy, int]]
) -> None:
    """Same results, rejections and arrays over a random place/remove sequence, built lazily or not."""
    hosts = _copies(hosts, copies)
    lazy, eager = Fleet(hosts, (), ISOLATION), _eager(hosts)
    for i, (req, explain, strategy, remove) in enumerate(steps):
        req = replace(req, name=f"{req.name}-{i}")
        if req.gpus > lazy.gpus_total:
            continue  # an invalid request: validation refuses it before any host is looked at
        if remove == 0 and lazy.placements():
            vm = lazy.placements()[i % len(lazy.placements())].vm
            assert lazy.remove(vm) == eager.remove(vm)
        got = place(req, lazy, strategy, explain=explain)
        assert got == place(req, eager, strategy, explain=explain)
        if got.chosen is not None:
            lazy.add(got.chosen, req.isolation)
            eager.add(got.chosen, req.isolation)
        assert np.array_equal(lazy.arrays.cells, eager.arrays.cells)
        assert lazy.free_gpus(hosts[-1].name) == eager.free_gpus(hosts[-1].name)
    assert lazy.placements() == eager.placements()


def test_unclaimed_hosts_stay_unbuilt() -> None:
    """Placing reads, it never builds; adding the chosen placement builds only its host."""
    from tests.builders import make_host
    from tests.placement.helpers import request

    base = make_host("h000")
    fleet = Fleet([replace(base, name=f"h{i:03d}") for i in range(50)])
    result = place(request("a", vcpus=2, memory_gib=1), fleet)
    assert result.chosen is not None
    assert not any(hs.built for hs in fleet.states)  # place() changed nothing, not even a cache
    fleet.add(result.chosen)
    assert [hs.name for hs in fleet.states if hs.built] == [result.chosen.host]
