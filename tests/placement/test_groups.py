"""Replica groups, the rule itself: affinity keeps a group on one host, anti-affinity apart, never both; the
engine, admission, a claim's one-host ledger and the drain planner all ask it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.placement.helpers import request
from vnuma.errors import ConflictError, GroupModeError, InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.groups import GroupIndex, group_clash, group_hosts
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Affinity, AntiAffinity, Isolation, Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance import FleetState, plan_moves
from vnuma.placement.rebalance.base import Move
from vnuma.placement.rebalance.drain import why_not
from vnuma.topology import Host

TOGETHER = {"group": "pair", "affinity": Affinity.HOST}
HOSTS = ("h1", "h2", "h3")


def _hosts() -> list[Host]:
    return [make_host(name) for name in HOSTS]


def _fleet(*placed: Placement) -> Fleet:
    return Fleet(_hosts(), placed, {"t1": Isolation.CORE, "t2": Isolation.CORE})


def _placed(fleet: Fleet, req: VmRequest, strategy: Strategy = Strategy.PACK) -> Placement:
    chosen = place(req, fleet, strategy).chosen
    assert chosen is not None
    fleet.add(chosen)
    return chosen


def _member(vm: str, host: str, **kw: object) -> Placement:
    return replace(Placement(vm, "t1", host, ()), **kw)  # type: ignore[arg-type]


def test_the_index_follows_members_and_their_affinity() -> None:
    index = GroupIndex()
    a, b = _member("a", "h1", group="g", affinity=Affinity.HOST), _member("b", "h2", group="g")
    index.add(a)
    index.add(b)
    index.add(_member("c", "h3"))  # no group: not a member of anything
    assert [m.vm for m in index.others("g", "b")] == ["a"] and index.is_affine("g")
    index.discard(a)
    assert [m.vm for m in index.others("g", "zz")] == ["b"] and not index.is_affine("g")
    index.add(replace(b, host="h3"))  # the same VM again (moved): counted once
    assert [m.host for m in index.others("g", "zz")] == ["h3"]
    index.discard(b)
    assert index.others("g", "zz") == []


@pytest.mark.parametrize(
    ("members", "vm", "affinity", "hosts"),
    [
        ([], "x", Affinity.HOST, ()),
        ([("a", "h2", None)], "x", None, ()),  # nobody asked affinity: nothing binds
        ([("a", "h2", None)], "x", Affinity.HOST, ("h2",)),
        ([("a", "h2", Affinity.HOST)], "x", None, ("h2",)),  # a member's affinity binds a plain VM too
        ([("a", "h2", Affinity.HOST)], "a", Affinity.HOST, ()),  # the VM itself does not count
        ([("a", "h2", None), ("b", "h1", None)], "x", Affinity.HOST, ("h1", "h2")),
    ],
    ids=["empty", "plain", "asked", "member-asked", "itself", "split-plain-members"],
)
def test_the_hosts_an_affine_group_holds_a_vm_to(
    members: list[tuple[str, str, Affinity | None]], vm: str, affinity: Affinity | None, hosts: tuple[str, ...]
) -> None:
    index = GroupIndex()
    for name, host, asked in members:
        index.add(_member(name, host, group="g", affinity=asked))
    assert group_hosts(index, vm, "g", affinity) == hosts
    assert group_hosts(index, vm, None, affinity) == ()


@pytest.mark.parametrize(
    ("member", "affinity", "scope", "clash"),
    [
        ({"affinity": Affinity.HOST}, None, AntiAffinity.HOST, "keeps its VMs together"),
        ({"anti_affinity": AntiAffinity.CELL}, Affinity.HOST, None, "keeps its VMs apart"),
        ({}, None, None, None),
        ({"affinity": Affinity.HOST}, None, None, None),  # only the group: goes with either
        ({"anti_affinity": AntiAffinity.HOST}, None, None, None),
        ({}, Affinity.HOST, AntiAffinity.HOST, "for both affinity host and anti-affinity host"),
    ],
    ids=["anti-in-affine", "affinity-in-anti-affine", "plain", "plain-in-affine", "plain-in-anti", "both"],
)
def test_a_group_is_either_affine_or_anti_affine(
    member: dict[str, object], affinity: Affinity | None, scope: AntiAffinity | None, clash: str | None
) -> None:
    index = GroupIndex()
    index.add(_member("a", "h1", group="g", **member))
    found = group_clash(index, "x", "g", affinity, scope)
    assert (found is None) if clash is None else (found is not None and clash in found)
    assert group_clash(index, "x", None, affinity, None) is None


def test_the_first_vm_goes_anywhere_and_the_others_follow_it() -> None:
    fleet = _fleet()
    _placed(fleet, request("filler", host="h2"))  # pack now prefers h2; first-fit would take h1
    first = _placed(fleet, request("p1", **TOGETHER), Strategy.FIRST_FIT)
    assert first.host == "h1" and first.affinity is Affinity.HOST
    for strategy in (Strategy.PACK, Strategy.GPU_FIRST):
        result = place(request(f"p-{strategy}", **TOGETHER), fleet, strategy)
        assert result.chosen is not None and result.chosen.host == "h1"
        assert {(r.host, r.check, r.reason) for r in result.rejections} == {
            (h, "group", "group 'pair' (affinity host) has its VMs on host 'h1'") for h in ("h2", "h3")
        }
    fast = place(request("p2", **TOGETHER), fleet, Strategy.PACK, explain=False)
    assert fast.chosen == place(request("p2", **TOGETHER), fleet, Strategy.PACK).chosen
    plain = _placed(fleet, request("p3", group="pair", host=None))  # a VM giving only the group joins it
    assert plain.host == "h1"


def test_a_full_group_host_refuses_the_vm_everywhere() -> None:
    fleet = _fleet()
    _placed(fleet, request("big", vcpus=28, memory_gib=8, **TOGETHER))
    result = place(request("next", vcpus=28, memory_gib=8, **TOGETHER), fleet, Strategy.PACK)
    assert result.chosen is None
    checks = {r.host: r.check for r in result.rejections}
    assert checks["h2"] == checks["h3"] == "group" and checks["h1"] != "group"
    fast = place(request("next", vcpus=28, memory_gib=8, **TOGETHER), fleet, Strategy.PACK, explain=False)
    assert fast.chosen is None and len(fast.rejections) == 1
    assert place(request("next", vcpus=28, memory_gib=8), fleet, Strategy.PACK).chosen is not None
    fleet.remove("big")  # the group is empty again: any host
    assert place(request("next", vcpus=28, memory_gib=8, **TOGETHER), fleet, Strategy.PACK).chosen is not None


def test_the_engine_refuses_a_group_asked_both_ways_before_any_host() -> None:
    fleet = _fleet()
    _placed(fleet, request("a1", group="g", anti_affinity=AntiAffinity.HOST))
    with pytest.raises(GroupModeError, match="group 'g' keeps its VMs apart"):
        place(request("a2", group="g", affinity=Affinity.HOST), fleet, Strategy.PACK)
    with pytest.raises(GroupModeError, match="both affinity host and anti-affinity host"):
        place(request("a3", group="h", affinity=Affinity.HOST, anti_affinity=AntiAffinity.HOST), fleet)
    with pytest.raises(InvalidInputError, match="need a group"):
        place(request("a4", affinity=Affinity.HOST), fleet)


def test_admission_refuses_a_split_and_a_clash() -> None:
    fleet = _fleet()
    p1 = _placed(fleet, request("p1", **TOGETHER))
    away = replace(_placed(_fleet(), request("p2", host="h3", **TOGETHER)), vm="p2")
    refusal = fleet.admit(away)
    assert refusal is not None and refusal.check == "group"
    assert refusal.reason == f"group 'pair' (affinity host) has its VMs on host {p1.host!r}"
    with pytest.raises(ConflictError, match="affinity host"):
        fleet.add(away)
    clash = replace(away, affinity=None, anti_affinity=AntiAffinity.HOST)
    refusal = fleet.admit(clash)
    assert refusal is not None and refusal.check == "group-mode"
    with pytest.raises(GroupModeError):
        fleet.add(clash)


def test_a_one_host_ledger_told_the_members_elsewhere_decides_as_the_fleet() -> None:
    """What a claim does: the ledger of the target host alone, plus the group's VMs on other hosts."""
    whole = _fleet()
    p1 = _placed(whole, request("p1", host="h1", **TOGETHER))
    p2 = _placed(_fleet(), request("p2", host="h2", **TOGETHER))
    alone = Fleet([make_host("h2")], (), {"t1": Isolation.CORE})
    assert alone.admit(p2) is None  # without the members elsewhere the split goes unseen
    told = Fleet([make_host("h2")], (), {"t1": Isolation.CORE}, members_elsewhere=[p1])
    refusal = told.admit(p2)
    assert refusal is not None and refusal.reason == "group 'pair' (affinity host) has its VMs on host 'h1'"
    assert told.placements() == () and told.free_pcpus("h2") == alone.free_pcpus("h2")
    assert whole.admit(p2) == refusal


def _replayed(state: FleetState, moves: tuple[Move, ...]) -> Fleet:
    """The plan carried out as a journaled run is: a drained affine group's VMs leave together, then each
    arrives, every arrival admitted."""
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    for m in moves:
        fleet.remove(m.vm)
    for m in moves:
        fleet.add(m.placement)
    return fleet


def test_a_drain_moves_an_affine_group_together_and_a_lone_member_alone() -> None:
    fleet = _fleet()
    for name in ("p1", "p2"):
        _placed(fleet, request(name, host="h1", **TOGETHER))
    _placed(fleet, request("solo", host="h1", group="one", affinity=Affinity.HOST))
    _placed(fleet, request("free", host="h1"))
    hosts = [replace(h, cordoned=h.name == "h1") for h in _hosts()]
    state = FleetState(tuple(hosts), fleet.placements(), {"t1": Isolation.CORE})
    plan = plan_moves(state, Objective.DRAIN, 10, drain="h1", solver="search")
    assert sorted(m.vm for m in plan.moves) == ["free", "p1", "p2", "solo"] and plan.left == ()
    to = {m.vm: m.to_host for m in plan.moves}
    assert to["p1"] == to["p2"] != "h1"
    after = _replayed(state, plan.moves)
    assert {p.vm: p.host for p in after.placements()} == to
    # --max-moves counts the group's VMs: a group that does not fit in what is left stays whole.
    for solver in ("search", "cp-sat"):
        short = plan_moves(state, Objective.DRAIN, 1, drain="h1", solver=solver)
        assert len(short.moves) == 1 and {vm for vm, _why in short.left} >= {"p1", "p2"}, solver
    # CP-SAT's drain moves the group first, as the search does, and chooses for the single VMs.
    solved = plan_moves(state, Objective.DRAIN, 10, drain="h1", solver="cp-sat")
    assert sorted(m.vm for m in solved.moves) == ["free", "p1", "p2", "solo"] and solved.left == ()
    moved = {m.vm: m.to_host for m in solved.moves}
    assert moved["p1"] == moved["p2"] != "h1"
    assert {p.vm: p.host for p in _replayed(state, solved.moves).placements()} == moved
    assert why_not(next(p for p in state.placements if p.vm == "p1"), "h1", ["h2", "h3"], fleet.groups) is None


def test_a_group_that_fits_whole_on_no_other_host_stays_whole() -> None:
    fleet = _fleet()
    for name in ("p1", "p2", "p3"):
        _placed(fleet, request(name, vcpus=10, memory_gib=8, host="h1", **TOGETHER))
    for host in ("h2", "h3"):  # each other host has room for two of the group's VMs, not three
        _placed(fleet, request(f"fill-{host}", vcpus=12, memory_gib=8, host=host, tenant="t2"))
    hosts = [replace(h, cordoned=h.name == "h1") for h in _hosts()]
    state = FleetState(tuple(hosts), fleet.placements(), {"t1": Isolation.CORE, "t2": Isolation.CORE})
    for solver in ("search", "cp-sat"):
        plan = plan_moves(state, Objective.DRAIN, 10, drain="h1", solver=solver)
        assert plan.moves == ()
        assert {vm for vm, _ in plan.left} == {"p1", "p2", "p3"}
        assert all(why.startswith("group 'pair' (affinity host): its 3 VMs fit together on no other host (")
                   for _vm, why in plan.left), (solver, plan.left)


def test_rebalance_never_splits_an_affine_group() -> None:
    fleet = _fleet()
    for i in range(4):
        _placed(fleet, request(f"p{i}", vcpus=6, host="h1", **TOGETHER))
    state = FleetState(tuple(_hosts()), fleet.placements(), {"t1": Isolation.CORE})
    for objective in (Objective.LOCALITY, Objective.FRAGMENTATION, Objective.SPREAD_TENANTS):
        plan = plan_moves(state, objective, 4)
        assert all(m.to_host == "h1" for m in plan.moves), (objective, plan.moves)
