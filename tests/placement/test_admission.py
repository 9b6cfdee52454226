"""Admission is the one rule: it agrees with an independent checker, the filters never propose what it
refuses, and the pre-filter never drops what the filters accept."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import admissible, check_fleet, request
from tests.placement.strategies import EVEN, ISOLATION, host_lists, vm_requests
from vnuma.placement.build import build_placement
from vnuma.placement.engine import place, prefilter_sizes
from vnuma.placement.fit import HostFit, fit_host
from vnuma.placement.ledger.admit import ADMISSION, admit
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CellAssignment, DeviceAssignment, Isolation, Placement, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.prefilter import may_fit
from vnuma.placement.quota import Usage
from vnuma.placement.request import resolve_size
from vnuma.topology import PAGE_1G, PAGE_2M, DeviceKind, Host


def _fill(hosts: list[Host], reqs: list[VmRequest], strategy: Strategy) -> Fleet:
    fleet = Fleet(hosts, (), ISOLATION)
    for r in reqs:
        if r.gpus > fleet.gpus_total:
            continue
        chosen = place(r, fleet, strategy, explain=False).chosen
        if chosen is not None:
            fleet.add(chosen, r.isolation)
    return fleet


def _history(max_size: int = 6) -> st.SearchStrategy[list[VmRequest]]:
    return st.lists(st.integers(0, 10_000), max_size=max_size).flatmap(
        lambda ids: st.tuples(*(vm_requests(f"old{i}-{n}", socket=True) for i, n in enumerate(ids))).map(list)
    )


@settings(max_examples=200)
@given(
    hosts=host_lists(max_hosts=3),
    history=_history(),
    req=vm_requests("new", socket=True),
    strategy=st.sampled_from(tuple(Strategy)),
    n=st.integers(1, 3),
)
def test_the_filters_never_propose_what_admission_refuses(
    hosts: list[Host], history: list[VmRequest], req: VmRequest, strategy: Strategy, n: int
) -> None:
    fleet = _fill(hosts, history, strategy)
    for hs in fleet.states:
        assert req.vcpus is not None
        if req.vcpus % n:
            continue
        found = fit_host(hs, req, strategy, fleet.isolation, n)
        if isinstance(found, HostFit):
            p = build_placement(found, req)
            assert fleet.admit(p, req.isolation) is None, (p, fleet.admit(p, req.isolation))
            assert all(len(c.vcpus) >= 1 for c in p.cells)


@settings(max_examples=100)
@given(hosts=host_lists(max_hosts=3), history=_history(), data=st.data())
def test_sized_gpu_requests_only_become_admissible_placements(
    hosts: list[Host], history: list[VmRequest], data: st.DataObject
) -> None:
    fleet = _fill(hosts, history, Strategy.PACK)
    base = data.draw(vm_requests("gpu-only", shared=False))
    req = replace(base, vcpus=None, memory_kib=None, gpus=data.draw(st.integers(1, 3)), **EVEN)
    for hs in fleet.states:
        for size in hs.page_sizes(req.page_size_kib):
            sized = resolve_size(req, hs, size)
            if isinstance(sized, str):
                continue
            assert sized.vcpus is not None and sized.vcpus >= (req.numa_nodes or 1)
            found = fit_host(hs, sized, Strategy.PACK, fleet.isolation)
            if isinstance(found, HostFit):
                p = build_placement(found, sized)
                assert min(len(c.vcpus) for c in p.cells) >= 1
                assert fleet.admit(p, req.isolation) is None


@settings(max_examples=200)
@given(
    hosts=host_lists(max_hosts=3),
    history=_history(),
    req=vm_requests("new", socket=True),
    strategy=st.sampled_from(tuple(Strategy)),
)
def test_the_prefilter_never_drops_a_host_the_filters_accept(
    hosts: list[Host], history: list[VmRequest], req: VmRequest, strategy: Strategy
) -> None:
    fleet = _fill(hosts, history, strategy)
    assert req.vcpus is not None and req.memory_kib is not None
    for n in range(1, 4):
        if req.vcpus % n or req.memory_kib % (4 * n) or (req.numa_nodes and n != req.numa_nodes):
            continue
        kept = may_fit(fleet.arrays, req, n, prefilter_sizes(req, n), strategy)
        for hs in fleet.states:
            if isinstance(fit_host(hs, req, strategy, fleet.isolation, n), HostFit):
                assert kept[hs.index], f"{hs.name} fits {n} cell(s) but the pre-filter dropped it"


def _perturbed(p: Placement, host: Host, data: st.DataObject) -> Placement:
    """``p`` with one thing changed the way a stale or hand-written placement could be."""
    cpus = sorted(host.cpu_ids)
    gpus = sorted(d.address for d in host.devices if d.kind is DeviceKind.GPU)
    kind = data.draw(st.sampled_from(("none", "pin", "tenant", "pages", "gpu", "isolation-tenant")))
    cells = list(p.cells)
    if kind == "pin":
        g = data.draw(st.integers(0, len(cells) - 1))
        pins = list(cells[g].pcpus)
        pins[data.draw(st.integers(0, len(pins) - 1))] = data.draw(st.sampled_from(cpus))
        cells[g] = replace(cells[g], pcpus=tuple(pins))
    elif kind == "pages":
        g = data.draw(st.integers(0, len(cells) - 1))
        size = data.draw(st.sampled_from((4, PAGE_2M, PAGE_1G)))
        pages = data.draw(st.integers(1, 6))
        cells[g] = replace(cells[g], page_size_kib=size, memory_kib=pages * size)
    elif kind == "gpu" and gpus:
        address = data.draw(st.sampled_from(gpus))
        home = next(d.numa_node for d in host.devices if d.address == address)
        p = replace(p, devices=(*p.devices, DeviceAssignment(address, DeviceKind.GPU, 0, home)))
    elif kind == "tenant":
        p = replace(p, tenant=data.draw(st.sampled_from(sorted(ISOLATION))))
    elif kind == "isolation-tenant":
        p = replace(p, tenant="t4")  # cell isolation
    return replace(p, cells=tuple(cells))


@settings(max_examples=300)
@given(hosts=host_lists(max_hosts=2), history=_history(), req=vm_requests("new"), data=st.data())
def test_admission_accepts_exactly_what_the_independent_checker_accepts(
    hosts: list[Host], history: list[VmRequest], req: VmRequest, data: st.DataObject
) -> None:
    fleet = _fill(hosts, history, Strategy.PACK)
    placed = list(fleet.placements())
    check_fleet(hosts, placed, ISOLATION)
    host = data.draw(st.sampled_from(hosts))
    if data.draw(st.integers(0, 7)) == 0:  # cordoned after its VMs were placed: they stay, nothing new comes
        host = replace(host, cordoned=True)
        hosts = [host if h.name == host.name else h for h in hosts]
    unplaced = Fleet(hosts, placed, ISOLATION)
    cpus = sorted(host.cpu_ids - host.reserved_cpus)
    if not cpus:
        return
    empty = Fleet([host], (), ISOLATION)
    base = place(req, empty, explain=False).chosen if req.gpus <= empty.gpus_total else None
    if base is None:  # a hand-made one-vCPU placement instead
        pin = data.draw(st.sampled_from(cpus))
        cell = next(c.id for c in host.cells if pin in c.cpu_ids)
        base = Placement("new", req.tenant, host.name, (CellAssignment(0, cell, (0,), (pin,), PAGE_2M, PAGE_2M),))
    candidate = _perturbed(replace(base, vm="new"), host, data)
    expected = admissible(host, placed, candidate, ISOLATION)
    refusal = unplaced.admit(candidate)
    assert (refusal is None) == expected, (refusal, candidate, placed)


HOST = make_host("h", cells=2, cores_per_cell=2, smt=2, memory_gib=4, hugepages_1g_gib=2, gpus_per_cell=1)


def _one(vm: str, tenant: str, pins: tuple[int, ...], cell: int = 0, gib: int = 1) -> Placement:
    return Placement(vm, tenant, "h", (CellAssignment(0, cell, tuple(range(len(pins))), pins, gib * PAGE_1G, PAGE_1G),))


REFUSED = [
    # (check, placement, tenants, what is already there)
    ("topology", _one("x", "a", (9,)), {}, []),
    ("shape", replace(_one("x", "a", (0,)), cells=()), {}, []),
    ("shape", _one("x", "a", (0, 0)), {}, []),
    ("pcpus", _one("x", "a", (0,)), {}, [_one("y", "a", (0,))]),
    ("core-isolation", _one("x", "a", (4,)), {"b": Isolation.CORE}, [_one("y", "b", (0,))]),
    ("cell-isolation", _one("x", "a", (1,)), {"a": Isolation.CELL}, [_one("y", "b", (0,))]),
    ("cell-pages", _one("x", "a", (1,), gib=2), {}, [_one("y", "b", (0,))]),
    (
        "devices",
        replace(_one("x", "a", (1,)), devices=(DeviceAssignment(HOST.devices[0].address, DeviceKind.GPU, 0, 0),)),
        {},
        [replace(_one("y", "b", (0,)), devices=(DeviceAssignment(HOST.devices[0].address, DeviceKind.GPU, 0, 0),))],
    ),
]


@pytest.mark.parametrize(
    ("check", "p", "tenants", "there"), REFUSED, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSED)]
)
def test_each_check_refuses_under_its_own_name(
    check: str, p: Placement, tenants: dict[str, Isolation], there: list[Placement]
) -> None:
    fleet = Fleet([HOST], there, tenants)
    refusal = fleet.admit(p)
    assert refusal is not None and refusal.check == check, refusal
    assert check in {unit.name for unit in ADMISSION}


def test_a_placement_for_another_host_is_refused() -> None:
    hs = Fleet([HOST]).state("h")
    refusal = admit(replace(_one("x", "a", (0,)), host="elsewhere"), hs, Tenant("a"), {}, Usage())
    assert refusal is not None and refusal.check == "topology"


def test_a_cordoned_host_admits_nothing_and_the_engine_filters_it_first() -> None:
    """One cordon rule: admission refuses any claim there (a re-pin too); the engine's host filter says the same
    before looking at cells, and ranks it as far from fitting; the host's VMs stay recorded."""
    cordoned = replace(HOST, cordoned=True)
    fleet = Fleet([cordoned], [_one("y", "a", (0,))])
    refusal = fleet.admit(_one("x", "a", (1,)))
    assert refusal is not None and refusal.check == "cordoned" and "uncordon h" in (refusal.hint or "")
    assert fleet.placement("y") is not None
    result = place(request("z", "a", vcpus=1, memory_gib=1), fleet, explain=True)
    assert result.chosen is None and [r.check for r in result.rejections] == ["cordoned"]
    other = make_host("other", cells=2, cores_per_cell=2, smt=2, memory_gib=4, hugepages_1g_gib=2)
    both = Fleet([cordoned, other])
    chosen = place(request("z", "a", vcpus=1, memory_gib=1), both).chosen
    assert chosen is not None and chosen.host == "other"


def test_reserved_and_quota_refusals() -> None:
    reserved = replace(HOST, reserved_cpus=frozenset({0}))
    assert Fleet([reserved]).admit(_one("x", "a", (0,))).check == "reserved"  # type: ignore[union-attr]
    quota = Fleet([HOST], [_one("y", "a", (0,))], [Tenant("a", max_vcpus=1)])
    refusal = quota.admit(_one("x", "a", (1,)))
    assert refusal is not None and refusal.check == "quota" and "quota of 1" in refusal.reason


def test_a_gpu_only_request_never_gets_a_guest_cell_without_vcpus() -> None:
    # Cells of 1 core x 2 threads with 2 GPUs each: a GPU's share is 1 vCPU, which cannot be split
    # over 2 guest cells (the request once got 0 vCPUs in both).
    host = make_host("tiny", cells=2, cores_per_cell=1, smt=2, memory_gib=4, hugepages_1g_gib=2, gpus_per_cell=2)
    fleet = Fleet([host])
    for thread in ("prefer", "require"):
        req = request("g", vcpus=None, memory_gib=None, gpus=1, numa_nodes=2, thread_policy=thread)
        result = place(req, fleet)
        if result.chosen is not None:
            assert all(len(c.vcpus) >= 1 for c in result.chosen.cells)
        else:
            (rejection,) = result.rejections
            assert rejection.check == "size" and "cell 0" in rejection.reason, rejection
    two = place(request("g2", vcpus=None, memory_gib=None, gpus=2, numa_nodes=2), fleet).chosen
    assert two is not None and [len(c.vcpus) for c in two.cells] == [1, 1]


def test_place_never_changes_the_ledger_it_reads() -> None:
    hosts = [make_host("a", gpus_per_cell=1), make_host("b")]
    fleet = Fleet(hosts)
    before = (fleet.arrays.cells.copy(), [hs.built for hs in fleet.states], fleet.epoch, fleet.gpu_epoch)
    for explain in (True, False):
        for strategy in Strategy:
            assert place(request("vm", vcpus=4, gpus=1), fleet, strategy, explain=explain).chosen is not None
            assert place(request("big", vcpus=999), fleet, strategy, explain=explain).chosen is None
    after = (fleet.arrays.cells, [hs.built for hs in fleet.states], fleet.epoch, fleet.gpu_epoch)
    assert np.array_equal(before[0], after[0]) and before[1:] == after[1:]
    assert fleet.placements() == ()
