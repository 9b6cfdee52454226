"""A state machine that places and releases VMs, checking every invariant after each step."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.placement.helpers import check_fleet, held_by, siblings_of
from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host


class PlaceAndRelease(RuleBasedStateMachine):
    """Random placements and releases on a few tiny hosts."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[Host] = []
        self.fleet = Fleet([])
        self.count = 0

    @initialize(hosts=host_lists(max_hosts=3))
    def start(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        self.fleet = Fleet(hosts)

    @rule(req=vm_requests(socket=True), strategy=st.sampled_from(tuple(Strategy)))
    def place_vm(self, req: VmRequest, strategy: Strategy) -> None:
        if req.gpus > self.fleet.gpus_total:
            return
        self.count += 1
        req = replace(req, name=f"vm{self.count}")
        # The fast path (with its memory of refused shapes) must agree with a full evaluation.
        fast = place(req, self.fleet, strategy, explain=False)
        result = place(req, self.fleet, strategy)
        assert fast.chosen == result.chosen
        if result.chosen is None:
            assert result.rejections or not self.hosts
            return
        assert result.chosen.vm == req.name and result.chosen.tenant == req.tenant
        self.fleet.add(result.chosen, req.isolation)

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def release_vm(self, data: st.DataObject) -> None:
        vm = data.draw(st.sampled_from([p.vm for p in self.fleet.placements()]))
        self.fleet.remove(vm)

    @invariant()
    def claims_are_consistent(self) -> None:
        placements = self.fleet.placements()
        check_fleet(self.hosts, placements, ISOLATION)
        for host in self.hosts:
            taken = set().union(
                *(held_by(p, host) | p.shared_pcpus for p in placements if p.host == host.name)
            )
            assert self.fleet.free_pcpus(host.name) == frozenset(siblings_of(host)) - taken
            used = {d.address for p in placements if p.host == host.name for d in p.devices}
            all_gpus = {d.address for d in host.devices if d.kind == "gpu"}
            assert set(self.fleet.free_gpus(host.name)) == all_gpus - used


PlaceAndRelease.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
TestPlaceAndRelease = PlaceAndRelease.TestCase
