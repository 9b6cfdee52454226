"""The fast path's candidate index (each kind's first unclaimed host stands for the others) changes no answer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.errors import GroupModeError
from vnuma.placement.engine import place
from vnuma.placement.kept import for_tenant
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Affinity, Isolation, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace
from vnuma.topology import Host

TRACES = sorted((Path(__file__).parents[2] / "examples" / "traces").glob("*.json"))


def _copies(hosts: list[Host], copies: int) -> list[Host]:
    """The hosts plus same-shape copies under other names, some before and some after the original in name
    order (ties between them are decided by name)."""
    return hosts + [replace(h, name=f"{h.name}-c{i}") for h in hosts for i in range(copies)] + [
        replace(h, name=f"a-{h.name}") for h in hosts
    ]


@pytest.mark.parametrize("strategy", tuple(Strategy), ids=str)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_example_traces_place_as_when_every_host_is_looked_at(path: Path, strategy: Strategy) -> None:
    """Request after request, the fast path (candidates only) chooses what the explaining path (every host,
    no index) chooses: host, cells, pCPUs, pages and devices, ties between hosts of one shape included."""
    trace = load_trace(path.read_bytes(), str(path))
    fleet = Fleet(trace.hosts, (), {r.tenant: Isolation.CORE for r in trace.requests})
    looked_at = set()
    for r in trace.requests:
        req = for_tenant(r, fleet.tenant(r.tenant))
        fast = place(req, fleet, strategy, explain=False)
        assert fast.chosen == place(req, fleet, strategy).chosen, req.name
        looked_at.add(len(fleet.candidates.indices()))
        if fast.chosen is not None:
            fleet.record(fast.chosen)
    assert min(looked_at) < len(trace.hosts)  # the index did leave hosts out


@settings(max_examples=150, deadline=None)
@given(
    hosts=host_lists(max_hosts=2),
    copies=st.integers(1, 3),
    steps=st.lists(
        st.tuples(st.integers(0, 10_000).flatmap(lambda n: vm_requests(f"vm{n}")), st.integers(0, 6),
                  st.integers(0, 5), st.sampled_from(tuple(Strategy))),
        max_size=10,
    ),
)
def test_named_hosts_and_copies_place_as_when_every_host_is_looked_at(
    hosts: list[Host], copies: int, steps: list[tuple[VmRequest, int, int, Strategy]]
) -> None:
    """Requests avoiding hosts or their cells, or held to a group's host, on fleets of few shapes: the fast path
    chooses as the explaining path does, and the index lists every claimed host."""
    hosts = _copies(hosts, copies)
    names = sorted(h.name for h in hosts)
    fleet = Fleet(hosts, (), ISOLATION)
    for i, (req, avoid, group, strategy) in enumerate(steps):
        req = replace(req, name=f"{req.name}-{i}")
        if avoid % 3 == 1:
            req = replace(req, avoid_hosts=frozenset(names[avoid % len(names) :: 3]))
        elif avoid % 3 == 2:
            req = replace(req, avoid_cells=frozenset({(names[avoid % len(names)], 0)}))
        if group:
            req = replace(req, group=f"g{group % 2}", affinity=Affinity.HOST if group > 3 else None)
        if req.gpus > fleet.gpus_total:
            continue
        try:
            expected = place(req, fleet, strategy)
        except GroupModeError:  # both paths refuse a clash of group modes alike
            with pytest.raises(GroupModeError):
                place(req, fleet, strategy, explain=False)
            continue
        got = place(req, fleet, strategy, explain=False)
        assert got.chosen == expected.chosen
        if got.chosen is not None:
            fleet.add(got.chosen, req.isolation)
        claimed = {fleet.by_name[p.host].index for p in fleet.placements()}
        assert claimed <= set(fleet.candidates.indices().tolist())


def test_avoiding_the_first_hosts_cells_leaves_its_copies_placeable() -> None:
    """The explaining path shares one fit among unclaimed hosts of a shape, made on the shape's template, which
    bears the name of the shape's first host: a request avoiding that host's cells must not refuse its copies."""
    from tests.builders import make_host
    from tests.placement.helpers import request

    base = make_host("h0", cells=1, cores_per_cell=1, smt=1)
    fleet = Fleet([base, replace(base, name="h1"), replace(base, name="a0")], (), ISOLATION)
    req = replace(request("vm", vcpus=1, memory_gib=1), avoid_cells=frozenset({("a0", 0)}))
    chosen = place(req, fleet).chosen
    assert chosen is not None and chosen.host == "h0"
    assert place(req, fleet, explain=False).chosen == chosen
