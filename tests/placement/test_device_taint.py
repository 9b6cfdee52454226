"""Device states in the ledger: a tainted or cleaning device is never claimed, by a placement, a move or a
partition; the VMs holding it stay; capacity does not count it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.builders import make_host
from tests.placement.helpers import request
from tests.placement.strategies import host_lists, vm_requests
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host
from vnuma.topology.devstates import DeviceStateKind, TaintEffect, tainted, untainted


def _taint(host: Host, address: str) -> Host:
    return replace(host, device_states=tainted(host.device_states, address, "Xid 79", TaintEffect.NO_SCHEDULE,
                                                 "test", "2026-12-07T00:00:00Z"))


def _gpus(host: Host) -> list[str]:
    return [d.address for d in host.devices if d.kind == "gpu"]


class TaintsPlacementsAndMoves(RuleBasedStateMachine):
    """Random taints, untaints, placements, moves and releases; after every step no VM placed or moved since a
    device was tainted holds it, and the ledger's free GPUs are the untainted unheld ones."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: dict[str, Host] = {}
        self.fleet = Fleet([])
        self.count = 0
        self.refused_at: dict[str, frozenset[tuple[str, str]]] = {}
        """VM -> the (host, device) pairs tainted when it was last placed or moved."""

    @initialize(hosts=host_lists(max_hosts=3))
    def start(self, hosts: list[Host]) -> None:
        self.hosts = {h.name: h for h in hosts}
        self.fleet = Fleet(hosts)

    def _tainted(self) -> frozenset[tuple[str, str]]:
        return frozenset((h.name, a) for h in self.hosts.values() for a in h.device_states.blocked)

    def _rebuild(self) -> None:
        # A taint is a host change: the ledger is built again from the hosts and what the VMs hold (as the
        # inventory's readers do), admission then sees it.
        self.fleet = Fleet(self.hosts.values(), self.fleet.placements())

    @precondition(lambda self: any(_gpus(h) for h in self.hosts.values()))
    @rule(data=st.data())
    def taint_a_gpu(self, data: st.DataObject) -> None:
        host = data.draw(st.sampled_from(sorted(h for h in self.hosts if _gpus(self.hosts[h]))))
        gpu = data.draw(st.sampled_from(_gpus(self.hosts[host])))
        self.hosts[host] = _taint(self.hosts[host], gpu)
        self._rebuild()

    @precondition(lambda self: bool(self._tainted()))
    @rule(data=st.data())
    def untaint_a_gpu(self, data: st.DataObject) -> None:
        host, gpu = data.draw(st.sampled_from(sorted(self._tainted())))
        h = self.hosts[host]
        self.hosts[host] = replace(h, device_states=untainted(h.device_states, host, gpu, "test", ""))
        self._rebuild()

    @rule(req=vm_requests(socket=True), strategy=st.sampled_from(tuple(Strategy)))
    def place_vm(self, req: object, strategy: Strategy) -> None:
        if req.gpus > self.fleet.gpus_total:  # type: ignore[attr-defined]
            return
        self.count += 1
        req = replace(req, name=f"vm{self.count}")  # type: ignore[type-var]
        chosen = place(req, self.fleet, strategy, explain=False).chosen  # type: ignore[arg-type]
        if chosen is not None:
            self.fleet.add(chosen, req.isolation)  # type: ignore[attr-defined]
            self.refused_at[chosen.vm] = self._tainted()

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def move_vm(self, data: st.DataObject) -> None:
        vm = data.draw(st.sampled_from([p.vm for p in self.fleet.placements()]))
        old = self.fleet.remove(vm)
        chosen = place(move_request(old, Isolation.CORE), self.fleet, explain=False).chosen
        if chosen is None or self.fleet.admit(chosen) is not None:
            self.fleet.record(old)  # it stays where it was
            return
        self.fleet.add(chosen)
        self.refused_at[vm] = self._tainted()

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def release_vm(self, data: st.DataObject) -> None:
        self.fleet.remove(data.draw(st.sampled_from([p.vm for p in self.fleet.placements()])))

    @invariant()
    def no_tainted_device_is_claimed_anew(self) -> None:
        for p in self.fleet.placements():
            held = {(p.host, d.address) for d in p.devices}
            assert not held & self.refused_at[p.vm], (p.vm, held & self.refused_at[p.vm])
        for h in self.hosts.values():
            used = {d.address for p in self.fleet.placements() if p.host == h.name for d in p.devices}
            assert set(self.fleet.free_gpus(h.name)) == set(_gpus(h)) - used - set(h.device_states.blocked)


TaintsPlacementsAndMoves.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestTaintsPlacementsAndMoves = TaintsPlacementsAndMoves.TestCase


def test_admission_names_device_taint_and_the_vm_holding_it_stays() -> None:
    host = make_host(gpus_per_cell=2)
    gpu = _gpus(host)[0]
    fleet = Fleet([host])
    held = place(request("a", gpus=1), fleet).chosen
    assert held is not None and held.devices[0].address == gpu
    fleet.add(held)
    fleet = Fleet([_taint(host, gpu)], fleet.placements())
    assert fleet.placement("a") == held  # it stays
    fleet.remove("a")
    assert gpu not in fleet.free_gpus(host.name)  # released, still tainted
    refusal = fleet.admit(held)
    assert refusal is not None and refusal.check == "device-taint" and "Xid 79" in refusal.reason
    assert fleet.admit(held, returning=True) is None  # an undo gets back onto it


def test_a_cleaning_gpu_is_refused_as_cleaning() -> None:
    host = make_host(gpus_per_cell=1)
    gpu = _gpus(host)[0]
    states = replace(tainted(host.device_states, gpu, "x", TaintEffect.NO_SCHEDULE, "t", ""), devices=())
    from vnuma.topology.devstates import DeviceState

    states = states.with_device(DeviceState(gpu, DeviceStateKind.CLEANING, "released by VM 'a'"))
    fleet = Fleet([replace(host, device_states=states)])
    result = place(request("b", gpus=2), fleet)
    assert result.chosen is None
    probe = place(request("b", gpus=1), Fleet([host])).chosen
    assert probe is not None and probe.devices[0].address == gpu
    refusal = fleet.admit(probe)
    assert refusal is not None and refusal.check == "device-taint" and "cleaning" in refusal.reason


def test_the_same_taint_again_changes_nothing_and_another_replaces_it() -> None:
    from vnuma.topology.devstates import NO_DEVICE_STATES

    once = tainted(NO_DEVICE_STATES, "0000:17:00.0", "Xid 79", TaintEffect.DRAIN, "ops", "2026-12-07T06:00:00Z")
    again = tainted(once, "0000:17:00.0", "Xid 79", TaintEffect.DRAIN, "ops", "2026-12-07T07:00:00Z")
    assert again == once  # "already tainted": its time kept
    other = tainted(once, "0000:17:00.0", "Xid 79", TaintEffect.NO_SCHEDULE, "ops", "2026-12-07T07:00:00Z")
    own = other.of("0000:17:00.0")
    assert own is not None and (own.effect, own.since) == (TaintEffect.NO_SCHEDULE, "2026-12-07T07:00:00Z")
