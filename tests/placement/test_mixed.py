"""Cpu policy ``mixed``: the request checks, the build (pins, then a float set around them), the ledger's
accounting on add and release, admission, and a state machine mixing dedicated, shared and mixed VMs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.builders import make_host
from tests.placement.helpers import check_fleet, floats_of, held_by, mixed_parts, request, siblings_of
from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CpuPolicy, EmulatorThreads, Isolation, Placement, ThreadPolicy, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.pins import vcpu_pins
from vnuma.placement.request import validate_request
from vnuma.topology import Host

HOST = make_host("a", cells=2, cores_per_cell=4, smt=2)
MIXED = CpuPolicy.MIXED


def _mixed(dedicated: set[int], vcpus: int = 8, **kw: Any) -> VmRequest:
    return request("m", vcpus=vcpus, cpu_policy=MIXED, dedicated_vcpus=frozenset(dedicated), **kw)


def _placed(fleet: Fleet, req: VmRequest) -> Placement:
    result = place(req, fleet)
    assert result.chosen is not None, result.rejections
    fleet.add(result.chosen, req.isolation)
    return result.chosen


# --- request checks ----------------------------------------------------------------------------------

BAD = [
    ("list-without-mixed", request(vcpus=4, dedicated_vcpus=frozenset({0})),
     "--dedicated-vcpus needs cpu policy mixed"),
    ("list-with-shared", request(vcpus=4, cpu_policy=CpuPolicy.SHARED, dedicated_vcpus=frozenset({0})),
     "--dedicated-vcpus needs cpu policy mixed"),
    ("mixed-without-list", _mixed(set()), "cpu policy mixed needs the vCPUs to dedicate"),
    ("out-of-range", _mixed({0, 8, 9}), "dedicated vCPU(s) 8-9 out of range: the VM has 8 vCPUs (0-7)"),
    ("negative", _mixed({-1, 0}), "dedicated vCPU(s) -1 out of range"),
    ("all-dedicated", _mixed(set(range(8))), "every vCPU is dedicated: use cpu policy dedicated"),
    ("require", _mixed({0, 1}, thread_policy=ThreadPolicy.REQUIRE),
     "thread policy require needs cpu policy dedicated"),
    ("no-vcpu-count", replace(_mixed({0}), vcpus=None, gpus=1), "cpu policy mixed needs an explicit vCPU count"),
]


@pytest.mark.parametrize(("req", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_mixed_requests_are_refused(req: VmRequest, words: str) -> None:
    fleet = Fleet([make_host("a", cells=2, cores_per_cell=4, gpus_per_cell=1)])
    with pytest.raises(InvalidInputError) as err:
        validate_request(req, fleet)
    assert words in str(err.value)
    assert err.value.exit_code == 4


@pytest.mark.parametrize(
    "kw", [{}, {"thread_policy": ThreadPolicy.ISOLATE}, {"emulator_threads": EmulatorThreads.ISOLATE}],
    ids=["prefer", "isolate", "isolated-emulator"],
)
def test_good_mixed_requests_pass(kw: dict[str, Any]) -> None:
    validate_request(_mixed({0, 1, 2}, **kw), Fleet([HOST]))


# --- build ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dedicated", "nodes", "kw"),
    [
        ({0, 1, 2, 3}, 1, {}),
        ({0, 5}, 2, {}),
        ({1, 2, 3, 4}, 2, {"thread_policy": ThreadPolicy.ISOLATE}),
        ({0, 1}, 2, {"emulator_threads": EmulatorThreads.ISOLATE}),
        ({4, 5, 6}, 2, {}),
    ],
    ids=["one-cell", "one-per-cell", "isolate", "isolated-emulator", "all-of-cell-1-dedicated-but-one"],
)
def test_build_pins_dedicated_vcpus_and_floats_the_rest(dedicated: set[int], nodes: int, kw: dict[str, Any]) -> None:
    fleet = Fleet([HOST])
    p = _placed(fleet, _mixed(dedicated, numa_nodes=nodes, **kw))
    check_fleet([HOST], fleet.placements(), fleet.isolation)
    pins = vcpu_pins(p)
    assert {v for v, cpus in pins.items() if len(cpus) == 1 and v in dedicated} == dedicated
    own = [next(iter(pins[v])) for v in sorted(dedicated)]
    assert len(set(own)) == len(own)
    sib = siblings_of(HOST)
    for c in p.cells:
        _pins, floats = mixed_parts(p, c)
        floating = [v for v in c.vcpus if v not in dedicated]
        assert all(pins[v] == frozenset(floats) for v in floating)
        assert len(floats) >= len(floating) and not set(floats) & set(own)
        if p.thread_policy is ThreadPolicy.ISOLATE:
            assert not {sib[x] for x in own} & {sib[x] for x in floats}
    assert p.threads_per_core == 1
    if kw.get("emulator_threads") is EmulatorThreads.ISOLATE:
        assert len(p.emulator_pcpus) == 1 and p.emulator_pcpus[0] not in floats_of(p) | set(own)
    else:
        assert set(p.emulator_pcpus) == floats_of(p), "a mixed VM's emulator threads float with its floats"


def test_capacity_counts_every_vcpu_of_a_mixed_cell_as_pinned() -> None:
    host = make_host("a", cells=1, cores_per_cell=2, smt=2)  # 4 threads
    fleet = Fleet([host])
    assert place(_mixed({0}, vcpus=5), fleet).chosen is None
    assert place(_mixed({0}, vcpus=4), fleet).chosen is not None
    # A shared VM of the same tenant floats on a whole core; the mixed VM still needs 4 free threads.
    _placed(fleet, request("s", vcpus=2, cpu_policy=CpuPolicy.SHARED))
    refused = place(_mixed({0}, vcpus=3), fleet)
    assert refused.chosen is None and refused.rejections
    assert place(_mixed({0}, vcpus=2), fleet).chosen is not None


# --- ledger: add and release ------------------------------------------------------------------------------


def _snapshot(fleet: Fleet, host: str) -> Any:
    """Everything the ledger keeps about a host's CPUs and pages, as plain values."""
    hs = fleet.state(host)
    cells = []
    for c in hs.cells:
        cores = [(core.cpus, sorted(core.free), sorted(core.shared.items()), sorted(core.owners.items()), core.bucket)
                 for core in c.cores]
        nonzero = [
            sorted((k, v) for k, v in d.items() if v) for d in (c.partial_free, c.partial_pairs, c.shared_threads)
        ]
        cells.append((c.id, cores, sorted(c.free_cores), c.free_core_threads, c.free_core_pairs, nonzero,
                      sorted(c.pages_free.items()), sorted(c.tenants.items()), c.locked, c.threads_free))
    return (cells, sorted(hs.holders.items()), sorted((k, sorted(v)) for k, v in hs.floaters.items()),
            fleet.free_pcpus(host))


def test_add_then_release_restores_the_cell_exactly() -> None:
    fleet = Fleet([HOST])
    _placed(fleet, request("d", vcpus=3))
    _placed(fleet, request("s", vcpus=2, cpu_policy=CpuPolicy.SHARED))
    before = _snapshot(fleet, "a")
    for kw in ({}, {"thread_policy": ThreadPolicy.ISOLATE}, {"emulator_threads": EmulatorThreads.ISOLATE}):
        p = _placed(fleet, _mixed({0, 2}, vcpus=4, **kw))
        assert _snapshot(fleet, "a") != before
        assert held_by(p, HOST) <= set(fleet.state("a").holders)
        fleet.remove(p.vm)
        assert _snapshot(fleet, "a") == before


def test_dedicated_pins_are_never_floated_over_by_another_vm() -> None:
    host = make_host("a", cells=1, cores_per_cell=4, smt=2)
    fleet = Fleet([host])
    m = _placed(fleet, _mixed({0, 1, 2}, vcpus=4))
    s = _placed(fleet, request("s", vcpus=3, cpu_policy=CpuPolicy.SHARED))
    own = {x for c in m.cells for x in mixed_parts(m, c)[0]}
    assert not own & s.shared_pcpus and not own & floats_of(s)
    # A placement that floats over a mixed VM's pin is refused by admission.
    stolen = replace(s, vm="s2", cells=(replace(s.cells[0], pcpus=tuple(sorted(own))),))
    refusal = fleet.admit(stolen, Isolation.CORE)
    assert refusal is not None and refusal.check == "pcpus"


def test_a_float_set_never_lands_on_another_tenants_core() -> None:
    host = make_host("a", cells=1, cores_per_cell=4, smt=2)
    fleet = Fleet([host])
    other = _placed(fleet, request("d", tenant="t2", vcpus=3))  # one half-used core of t2
    m = _placed(fleet, _mixed({0}, vcpus=4))
    sib = siblings_of(host)
    theirs = {sib[x] for c in other.cells for x in c.pcpus}
    assert not {sib[x] for c in m.cells for x in c.pcpus} & theirs
    check_fleet([host], fleet.placements(), fleet.isolation)


def test_a_mixed_placement_floating_over_its_own_isolated_siblings_is_refused() -> None:
    fleet = Fleet([HOST])
    p = place(_mixed({0}, vcpus=2, thread_policy=ThreadPolicy.ISOLATE), fleet).chosen
    assert p is not None
    (pin,), _ = mixed_parts(p, p.cells[0])
    sibling = next(iter(siblings_of(HOST)[pin] - {pin}))
    bad = replace(p, cells=(replace(p.cells[0], pcpus=(pin, sibling)),))
    refusal = fleet.admit(bad, Isolation.CORE)
    assert refusal is not None and refusal.check == "pcpus" and "held and floated" in refusal.reason


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"dedicated_vcpus": frozenset()}, "some but not all"),
        ({"dedicated_vcpus": frozenset({0, 1, 2, 3})}, "some but not all"),
        ({"dedicated_vcpus": frozenset({9})}, "some but not all"),
    ],
    ids=["none", "all", "foreign"],
)
def test_admission_refuses_malformed_mixed_placements(change: dict[str, Any], words: str) -> None:
    fleet = Fleet([HOST])
    p = place(_mixed({0, 1}, vcpus=4), fleet).chosen
    assert p is not None
    refusal = fleet.admit(replace(p, **change), Isolation.CORE)
    assert refusal is not None and refusal.check == "shape" and words in refusal.reason


def test_codec_and_moves_keep_the_dedicated_vcpus() -> None:
    fleet = Fleet([HOST])
    p = _placed(fleet, _mixed({1, 6}, numa_nodes=2))
    doc = placement_to_dict(p)
    assert doc["dedicated_vcpus"] == [1, 6]
    assert placement_from_dict(doc) == p
    assert placement_from_dict(doc).shared_pcpus == p.shared_pcpus
    assert move_request(p, Isolation.CORE).dedicated_vcpus == frozenset({1, 6})
    plain = placement_to_dict(_placed(fleet, request("d", vcpus=2)))
    assert "dedicated_vcpus" not in plain


# --- a state machine mixing the three policies ----------------------------------------------------------


@st.composite
def _mixed_requests(draw: st.DrawFn) -> VmRequest:
    """A request from :func:`vm_requests`, turned ``mixed`` about half the time (when it has 2+ vCPUs)."""
    req: VmRequest = draw(vm_requests(socket=True))
    assert req.vcpus is not None
    if req.vcpus < 2 or draw(st.booleans()):
        return req
    dedicated = draw(st.sets(st.integers(0, req.vcpus - 1), min_size=1, max_size=req.vcpus - 1))
    thread = draw(st.sampled_from((ThreadPolicy.PREFER, ThreadPolicy.ISOLATE)))
    return replace(req, cpu_policy=MIXED, dedicated_vcpus=frozenset(dedicated), thread_policy=thread)


class MixedPlaceAndRelease(RuleBasedStateMachine):
    """Dedicated, shared and mixed VMs placed and released on tiny hosts; after every step the claims are
    consistent, and releasing a VM then adding it back restores the ledger exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[Host] = []
        self.fleet = Fleet([])
        self.count = 0
        self.mixed = 0  # mixed VMs placed (the test below checks the machine places some)

    @initialize(hosts=host_lists(max_hosts=2))
    def start(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        self.fleet = Fleet(hosts)

    @rule(req=_mixed_requests(), strategy=st.sampled_from(tuple(Strategy)))
    def place_vm(self, req: VmRequest, strategy: Strategy) -> None:
        if req.gpus > self.fleet.gpus_total:
            return
        self.count += 1
        req = replace(req, name=f"vm{self.count}")
        result = place(req, self.fleet, strategy)
        if req.cpu_policy is MIXED:
            # One capacity rule: a mixed VM fits wherever the same VM with every vCPU dedicated fits.
            twin = replace(req, cpu_policy=CpuPolicy.DEDICATED, dedicated_vcpus=frozenset())
            if place(twin, self.fleet, strategy, explain=False).chosen is not None:
                assert result.chosen is not None, result.rejections
        if result.chosen is None:
            assert result.rejections or not self.hosts
            return
        if req.cpu_policy is MIXED:
            assert result.chosen.dedicated_vcpus == req.dedicated_vcpus
            self.mixed += 1
        self.fleet.add(result.chosen, req.isolation)

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def release_vm(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from(self.fleet.placements()))
        with_it = _snapshot(self.fleet, p.host)
        self.fleet.remove(p.vm)
        without = _snapshot(self.fleet, p.host)
        self.fleet.add(p, ISOLATION.get(p.tenant or "", Isolation.CORE))  # admitted again on what it left
        assert _snapshot(self.fleet, p.host) == with_it
        self.fleet.remove(p.vm)
        assert _snapshot(self.fleet, p.host) == without

    @invariant()
    def claims_are_consistent(self) -> None:
        placements = self.fleet.placements()
        check_fleet(self.hosts, placements, ISOLATION)
        for host in self.hosts:
            mine = [p for p in placements if p.host == host.name]
            taken = set().union(*(held_by(p, host) | floats_of(p) for p in mine))
            assert self.fleet.free_pcpus(host.name) == frozenset(siblings_of(host)) - taken
            pinned = [x for p in mine for c in p.cells for x in mixed_parts(p, c)[0]]
            assert len(pinned) == len(set(pinned)), "a pCPU pinned by two VMs"
            assert not set(pinned) & set().union(*(floats_of(p) for p in mine)), "a pin floated over"


MixedPlaceAndRelease.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestMixedPlaceAndRelease = MixedPlaceAndRelease.TestCase


# --- traces --------------------------------------------------------------------------------------------


def test_a_trace_request_may_be_mixed_and_is_simulated_so() -> None:
    from tests.placement.test_simulate import _request, _trace
    from vnuma.simulate import load_trace, run

    trace = load_trace(_trace(requests=[_request(cpu_policy="mixed", dedicated_vcpus=[1])]), "t.json")
    (req,) = trace.requests
    assert req.dedicated_vcpus == frozenset({1})
    assert req.dedicated_vcpus == frozenset({1})
    (p,) = run(trace).placements
    assert p is not None and p.cpu_policy is MIXED and p.dedicated_vcpus == frozenset({1})
    with pytest.raises(InvalidInputError, match="dedicated_vcpus"):
        load_trace(_trace(requests=[_request(cpu_policy="mixed", dedicated_vcpus="1")]), "t.json")


def test_a_mixed_placement_exports_its_dedicated_vcpus_to_a_trace() -> None:
    from vnuma.placement.kept import kept_request
    from vnuma.sources.tracerequests import request_keys

    fleet = Fleet([HOST])
    p = _placed(fleet, _mixed({0, 3}, vcpus=4))
    assert request_keys(kept_request(p))["dedicated_vcpus"] == [0, 3]
    assert "dedicated_vcpus" not in request_keys(kept_request(_placed(fleet, request("d", vcpus=2))))


def test_the_host_picture_names_each_pin_by_its_own_vcpu_and_draws_the_float_set_as_shared() -> None:
    from vnuma.report import palette
    from vnuma.report.hostpicture import host_svg

    fleet = Fleet([HOST])
    p = _placed(fleet, _mixed({1, 3}, vcpus=4))
    svg = host_svg(HOST, [p], {"t1": Isolation.CORE})
    for v in (1, 3):
        (cpu,) = vcpu_pins(p)[v]
        assert f"CPU {cpu}: vCPU {v} of" in svg
    for cpu in floats_of(p):
        assert f"id='pu-{cpu}'" in svg or f'id="pu-{cpu}"' in svg
        assert f"CPU {cpu}: shared pool of m" in svg
    assert palette.SHARED_POOL in svg


def test_admission_refuses_a_mixed_cell_short_of_pins() -> None:
    fleet = Fleet([HOST])
    p = place(_mixed({0, 1}, vcpus=4), fleet).chosen
    assert p is not None
    short = replace(p, cells=(replace(p.cells[0], pcpus=p.cells[0].pcpus[:1]),))
    refusal = fleet.admit(short, Isolation.CORE)
    assert refusal is not None and refusal.check == "shape" and "pins 2 dedicated vCPUs to 1 pCPUs" in refusal.reason
