"""``first-fit``: no host preference, so among the hosts where the VM fits on the fewest guest cells (adjacent
first), the first in name order wins; the rules are the same as every strategy's."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.helpers import check_fleet
from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host


def _filled(hosts: list[Host], history: list[VmRequest]) -> Fleet:
    fleet = Fleet(hosts, (), ISOLATION)
    for i, r in enumerate(history):
        if r.gpus <= fleet.gpus_total:
            chosen = place(replace(r, name=f"old{i}"), fleet, Strategy.FIRST_FIT).chosen
            if chosen is not None:
                fleet.add(chosen, r.isolation)
    return fleet


@settings(max_examples=150)
@given(hosts=host_lists(max_hosts=3), history=st.lists(vm_requests(), max_size=6), req=vm_requests("new"))
def test_first_fit_takes_the_first_host_by_name_among_the_fewest_cells(
    hosts: list[Host], history: list[VmRequest], req: VmRequest
) -> None:
    fleet = _filled(hosts, history)
    check_fleet(hosts, list(fleet.placements()), ISOLATION)
    if req.gpus > fleet.gpus_total:
        return
    chosen = place(req, fleet, Strategy.FIRST_FIT).chosen
    alone: dict[str, Placement] = {}
    for h in sorted(fleet.host_names()):
        found = place(replace(req, host=h), fleet, Strategy.FIRST_FIT).chosen
        if found is not None:
            alone[h] = found
    if chosen is None:
        assert alone == {}
        return
    fewest = min(len(p.cells) for p in alone.values())
    candidates = [h for h, p in sorted(alone.items()) if len(p.cells) == fewest]
    adjacent = [h for h in candidates if fleet.state(h).is_adjacent(alone[h].host_cells)]
    assert chosen.host == (adjacent or candidates)[0]
    assert chosen == alone[chosen.host]
