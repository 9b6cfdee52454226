"""The ``bandwidth`` objective: measured memory bandwidth moved off over-share L3 domains, hosts without
resctrl left out, stale samples split by pCPUs, and plans that replay validly and never get worse.

The property test recomputes the objective from its definition (host facts, placements and loads only)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from tests.placement.test_resctrl import rdt_host
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement
from vnuma.placement.rebalance import FleetState, Objective, Plan, VmLoad, plan_moves
from vnuma.topology import Host

TENANTS = {"t1": Isolation.CORE, "t2": Isolation.NONE, "t3": Isolation.CELL}
AT = "2026-12-04T12:00:00+00:00"
GB = 10**9


def pin(fleet: Fleet, vm: str, host: Host, cells: tuple[int, ...], vcpus: int = 4, tenant: str = "t1") -> Placement:
    """``vm`` placed by the engine on exactly ``cells`` of ``host``."""
    avoid = frozenset((host.name, c.id) for c in host.cells if c.id not in cells)
    req = request(vm, tenant, vcpus=vcpus, numa_nodes=len(cells), host=host.name, avoid_cells=avoid,
                  isolation=TENANTS[tenant])
    chosen = place(req, fleet).chosen
    assert chosen is not None and set(chosen.host_cells) == set(cells), chosen
    fleet.add(chosen, TENANTS[tenant])
    return chosen


def measured(host: str, bps: int, *domains: tuple[int, int]) -> VmLoad:
    return VmLoad(host, bps, domains or ((0, bps),), AT)


def objective(hosts: list[Host], placements: list[Placement], loads: dict[str, VmLoad]) -> int:
    """The definition: per (host, L3 id) of the hosts with L3 banks on their CPU cells, the VMs' measured split
    when taken on that host and those ids, else their total by pCPUs; excess over the mean, in MB/s."""
    banks = {h.name: [b for b in h.resctrl.caches if b.level == 3] for h in hosts}
    domains: dict[tuple[str, int], Fraction] = {}
    for h in hosts:
        cpus = frozenset().union(*(c.cpu_ids for c in h.cells if c.cpus))
        domains |= {(h.name, b.id): Fraction(0) for b in banks[h.name] if b.cpus & cpus}
    for p in placements:
        load = loads.get(p.vm)
        if load is None:
            continue
        per = Counter(b.id for c in p.cells for x in c.pcpus for b in banks[p.host] if x in b.cpus)
        if load.host == p.host and {i for i, _ in load.domains} == set(per):
            for i, bps in load.domains:
                domains[(p.host, i)] += bps
        else:
            for i, k in per.items():
                domains[(p.host, i)] += Fraction(load.total_bps * k, sum(per.values()))
    if not domains:
        return 0
    share = sum(domains.values()) / len(domains)
    return round(sum(max(Fraction(0), v - share) for v in domains.values()) / 10**6)


def test_two_heavy_vms_on_one_domain_are_split_by_a_repin() -> None:
    h1 = rdt_host("h1", snc=True, default_ways=2, limit=100)  # cells 0-1: L3 0, cells 2-3: L3 1
    fleet = Fleet([h1], (), TENANTS)
    pin(fleet, "vm-a", h1, (0,))
    pin(fleet, "vm-b", h1, (1,))
    loads = {"vm-a": measured("h1", 5_200_000_000), "vm-b": measured("h1", 4_600_000_000)}
    state = FleetState((h1,), fleet.placements(), TENANTS, loads)
    plan = plan_moves(state, Objective.BANDWIDTH, 4)
    assert (plan.before, plan.after, plan.optimal) == (4900, 300, False)
    (move,) = plan.moves
    assert move.to_host == "h1" and set(move.to_cells) <= {2, 3}
    assert move.reason == (
        f"L3 domain 0 of h1 carries 9800 MB/s, share 4900 MB/s; {move.vm} measured "
        f"{loads[move.vm].total_bps // 10**6} MB/s at {AT}; to cells {list(move.to_cells)}; excess 4900 -> 300 MB/s"
    )


def test_hosts_without_resctrl_are_neither_measured_nor_a_destination() -> None:
    h1 = rdt_host("h1", snc=True, default_ways=2, limit=100)
    plain = make_host("h2", cells=2, cores_per_cell=8, memory_gib=32)  # roomy, but no L3 domains
    h3 = rdt_host("h3", snc=True, default_ways=2, limit=100)
    fleet = Fleet([h1, plain, h3], (), TENANTS)
    pin(fleet, "vm-a", h1, (0,))
    pin(fleet, "vm-b", h1, (1,))
    pin(fleet, "full-c", h1, (2,), vcpus=8)  # L3 1 of h1 has no room left: a re-pin cannot help
    pin(fleet, "full-d", h1, (3,), vcpus=8)
    pin(fleet, "vm-x", plain, (0,))
    pin(fleet, "vm-y", h3, (0,))
    loads = {
        "vm-a": measured("h1", 6 * GB), "vm-b": measured("h1", 6 * GB),
        "vm-x": measured("h2", 50 * GB), "vm-y": measured("h3", 4 * GB, (0, 4 * GB)),
    }
    state = FleetState((h1, plain, h3), fleet.placements(), TENANTS, loads)
    plan = plan_moves(state, Objective.BANDWIDTH, 4)
    # Four domains carry 16 GB/s: share 4000 MB/s; h1's L3 0 is 8000 over, vm-x on h2 counts nowhere.
    assert plan.before == 8000
    assert plan.moves and all(m.to_host == "h3" for m in plan.moves)
    assert plan.after < plan.before
    assert plan.after == objective(list(state.hosts), _replay(state, plan), loads)


def test_a_sample_from_another_host_or_other_domains_is_split_by_pcpus() -> None:
    h1 = rdt_host("h1", snc=True, default_ways=2, limit=100)
    fleet = Fleet([h1], (), TENANTS)
    pin(fleet, "vm-a", h1, (0, 2))  # 2 pCPUs on L3 0, 2 on L3 1
    state = FleetState((h1,), fleet.placements(), TENANTS)

    def value(load: VmLoad) -> int:
        return plan_moves(replace(state, loads={"vm-a": load}), Objective.BANDWIDTH, 0).before

    split = ((0, 3 * GB), (1, GB))
    assert value(measured("h1", 4 * GB, *split)) == 1000  # measured here: 3 and 1 GB/s, share 2
    assert value(measured("h0", 4 * GB, *split)) == 0  # stale (taken on h0): 2 and 2 GB/s
    assert value(measured("h1", 4 * GB, (0, 4 * GB))) == 0  # its pCPUs touch other domains now


def test_no_loads_plan_nothing() -> None:
    h1 = rdt_host("h1", snc=False, default_ways=2, limit=100)
    fleet = Fleet([h1], (), TENANTS)
    pin(fleet, "vm-a", h1, (0,))
    pin(fleet, "vm-b", h1, (0,))
    plan = plan_moves(FleetState((h1,), fleet.placements(), TENANTS), Objective.BANDWIDTH, 3)
    assert (plan.before, plan.after, plan.optimal, plan.moves) == (0, 0, True, ())


def _replay(state: FleetState, plan: Plan) -> list[Placement]:
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    domain_hosts = {h.name for h in state.hosts if h.resctrl.caches}
    for move in plan.moves:
        old = fleet.remove(move.vm)
        assert (old.host, old.host_cells) == (move.from_host, move.from_cells)
        assert move.to_host in domain_hosts
        isolation = state.isolation[move.placement.tenant]  # type: ignore[index]
        assert fleet.admit(move.placement, isolation) is None  # free at this step, slices and caps too
        fleet.add(move.placement, isolation)
        check_fleet(list(state.hosts), list(fleet.placements()), state.isolation)
    return list(fleet.placements())


@st.composite
def loaded_fleets(draw: st.DrawFn) -> FleetState:
    hosts = [
        rdt_host(f"h{i}", snc=draw(st.booleans()), default_ways=2, limit=100)
        if draw(st.integers(0, 3))
        else make_host(f"h{i}", cells=2, cores_per_cell=4, memory_gib=8, hugepages_2m_gib=4, hugepages_1g_gib=0)
        for i in range(draw(st.integers(1, 3)))
    ]
    fleet = Fleet(hosts, (), TENANTS)
    loads: dict[str, VmLoad] = {}
    for i in range(draw(st.integers(2, 14))):
        tenant = draw(st.sampled_from(sorted(TENANTS)))
        req = request(
            f"vm{i}", tenant, vcpus=draw(st.sampled_from([1, 2, 4])), memory_gib=1,
            numa_nodes=draw(st.sampled_from([None, 1, 2])), page_size_kib=2048, isolation=TENANTS[tenant],
            host=draw(st.sampled_from([h.name for h in hosts])),
            mem_bw=draw(st.sampled_from([None, None, 10, 30])), llc_ways=draw(st.sampled_from([None, None, 2])),
        )
        if req.vcpus and req.numa_nodes and req.vcpus % req.numa_nodes:
            continue
        chosen = place(req, fleet).chosen
        if chosen is None:
            continue
        fleet.add(chosen, TENANTS[tenant])
        kind = draw(st.sampled_from(["none", "here", "here", "here", "stale", "odd"]))
        if kind == "none":
            continue
        host = fleet.host(chosen.host)
        ids = sorted({b.id for b in host.resctrl.caches for c in chosen.cells if b.cpus & set(c.pcpus)})
        parts = [(i, draw(st.integers(0, 20 * GB))) for i in ids] or [(0, draw(st.integers(0, 20 * GB)))]
        total = sum(bps for _, bps in parts)
        if kind == "stale":
            loads[chosen.vm] = VmLoad("elsewhere", total, tuple(parts), AT)
        elif kind == "odd":  # a measured split that does not add up to the total
            loads[chosen.vm] = VmLoad(chosen.host, draw(st.integers(0, 20 * GB)), tuple(parts), AT)
        else:
            loads[chosen.vm] = VmLoad(chosen.host, total, tuple(parts), AT)
    return FleetState(tuple(hosts), fleet.placements(), TENANTS, loads)


@settings(max_examples=100, deadline=None)
@given(state=loaded_fleets(), max_moves=st.integers(0, 4))
def test_bandwidth_plan_replays_validly_and_never_gets_worse(state: FleetState, max_moves: int) -> None:
    plan = plan_moves(state, Objective.BANDWIDTH, max_moves)
    hosts = list(state.hosts)
    assert len(plan.moves) <= max_moves
    assert plan.before == objective(hosts, list(state.placements), dict(state.loads))
    after = _replay(state, plan)
    assert plan.after == objective(hosts, after, dict(state.loads)) <= plan.before
    assert plan.optimal == (plan.after == 0)
    if plan.moves:
        assert plan.after < plan.before
    for move in plan.moves:
        assert f"; {move.vm} measured " in move.reason and " MB/s" in move.reason


def test_an_excluded_vm_or_destination_makes_the_planner_try_the_next_best() -> None:
    from vnuma.placement.rebalance import Exclusion

    h1 = rdt_host("h1", snc=True, default_ways=2, limit=100)  # cells 0-1: L3 0, cells 2-3: L3 1
    fleet = Fleet([h1], (), TENANTS)
    pin(fleet, "vm-a", h1, (0,))
    pin(fleet, "vm-b", h1, (1,))
    loads = {"vm-a": measured("h1", 5_200_000_000), "vm-b": measured("h1", 4_600_000_000)}

    def first(excluded: Exclusion) -> tuple[str, tuple[int, ...]]:
        state = FleetState((h1,), fleet.placements(), TENANTS, loads, excluded)
        (move,) = plan_moves(state, Objective.BANDWIDTH, 1).moves
        return move.vm, move.to_cells

    vm, cells = first(Exclusion())
    other = "vm-b" if vm == "vm-a" else "vm-a"
    assert first(Exclusion(vms=frozenset({vm})))[0] == other  # the next best VM
    barred = first(Exclusion(targets=frozenset({(vm, "h1", cells)})))
    assert barred != (vm, cells) and (barred[0] == other or set(barred[1]).isdisjoint(cells))
    state = FleetState((h1,), fleet.placements(), TENANTS, loads, Exclusion(vms=frozenset({"vm-a", "vm-b"})))
    assert plan_moves(state, Objective.BANDWIDTH, 4).moves == ()
