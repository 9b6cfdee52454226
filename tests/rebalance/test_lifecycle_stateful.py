"""A state machine over the VM and host lifecycle: place, release, repin, migrate, cordon, uncordon and drain
in any order, with every invariant checked after each step and every move keeping the guest shape; replica
groups kept apart (anti-affinity) or together (affinity), never both."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.placement.helpers import check_fleet
from tests.placement.strategies import ISOLATION, host_lists, vm_requests
from vnuma.errors import GroupModeError
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Affinity, AntiAffinity, Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance import SOLVERS, FleetState, Move, plan_moves
from vnuma.topology import KIB_PER_GIB, Host


class Lifecycle(RuleBasedStateMachine):
    """VMs come, go and move; hosts are cordoned, drained and uncordoned."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: dict[str, Host] = {}
        self.fleet = Fleet([])
        self.count = 0

    @initialize(hosts=host_lists(max_hosts=3), reqs=st.lists(vm_requests(), min_size=2, max_size=8))
    def start(self, hosts: list[Host], reqs: list[VmRequest]) -> None:
        self.hosts = {h.name: h for h in hosts}
        self.fleet = Fleet(hosts)
        for req in reqs:  # a fleet with VMs from the first step, so moves have something to move
            self.place_vm(req)

    def _rebuild(self) -> None:
        """The ledger after a host changed (cordon): the same VMs, recorded as they are."""
        self.fleet = Fleet(list(self.hosts.values()), self.fleet.placements(), ISOLATION)

    @rule(req=vm_requests(), group=st.sampled_from(["g1", "g2"]), apart=st.sampled_from(list(AntiAffinity)))
    def place_replica(self, req: VmRequest, group: str, apart: AntiAffinity) -> None:
        try:
            self.place_vm(replace(req, group=group, anti_affinity=apart))
        except GroupModeError:
            assert any(p.affinity is not None for p in self.fleet.placements() if p.group == group)

    @rule(req=vm_requests(), group=st.sampled_from(["g1", "g3"]))
    def place_together(self, req: VmRequest, group: str) -> None:
        """A VM of an affine group (g1 is also drawn anti-affine above: asking it both ways is refused)."""
        members = [p for p in self.fleet.placements() if p.group == group]
        try:
            self.place_vm(replace(req, group=group, affinity=Affinity.HOST))
        except GroupModeError:
            assert any(p.anti_affinity is not None for p in members)
            event("affinity: refused, the group is anti-affine")
            return
        now = [p for p in self.fleet.placements() if p.group == group]
        if members and len(now) > len(members):
            event("affinity: joined its group")
            assert {p.host for p in now} == {members[0].host}

    @rule(req=vm_requests(max_gpus=0, shared=False))
    def place_affine_pair(self, req: VmRequest) -> None:
        """Two small VMs of a new affine group (so that drains meet groups to move whole)."""
        small = replace(req, vcpus=1, memory_kib=KIB_PER_GIB // 2, numa_nodes=None, cell_vcpus=None,
                        cell_memory_kib=None, cell_gpus=None, memory_modes=req.memory_modes[:1], page_size_kib=None,
                        group=f"pair{self.count}", affinity=Affinity.HOST)
        for _ in range(2):
            self.place_vm(small)

    @rule(req=vm_requests())
    def place_vm(self, req: VmRequest) -> None:
        if req.gpus > self.fleet.gpus_total:
            return
        self.count += 1
        chosen = place(replace(req, name=f"vm{self.count}"), self.fleet, Strategy.PACK).chosen
        if chosen is not None:
            assert not self.hosts[chosen.host].cordoned
            self.fleet.add(chosen, req.isolation)

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def release_vm(self, data: st.DataObject) -> None:
        self.fleet.remove(data.draw(st.sampled_from([p.vm for p in self.fleet.placements()])))

    def _refit(self, old: Placement, host: str) -> None:
        """What `vm repin`/`vm migrate` do: the engine's re-fit with the VM left out, or it stays."""
        req = replace(move_request(old, ISOLATION[str(old.tenant)]), host=host)
        self.fleet.remove(old.vm)
        chosen = place(req, self.fleet, Strategy.PACK).chosen
        if chosen is None:
            self.fleet.record(old)
            event("refit: stays")
            return
        event("refit: moved (grouped)" if chosen.group and chosen.host != old.host else
              "refit: moved" if chosen.host_cells != old.host_cells or chosen.host != old.host else "refit: same cells")
        assert chosen.host == host and not self.hosts[host].cordoned
        _assert_shape_kept(old, chosen)
        self.fleet.add(chosen, ISOLATION[str(old.tenant)])

    @precondition(lambda self: bool(self.fleet.placements()))
    @rule(data=st.data())
    def repin_vm(self, data: st.DataObject) -> None:
        old = data.draw(st.sampled_from(list(self.fleet.placements())))
        self._refit(old, old.host)

    @precondition(lambda self: bool(self.fleet.placements()) and len(self.hosts) > 1)
    @rule(data=st.data())
    def migrate_vm(self, data: st.DataObject) -> None:
        old = data.draw(st.sampled_from(list(self.fleet.placements())))
        self._refit(old, data.draw(st.sampled_from(sorted(set(self.hosts) - {old.host}))))

    @rule(data=st.data(), cordoned=st.booleans())
    def cordon(self, data: st.DataObject, cordoned: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.hosts)))
        self.hosts[name] = replace(self.hosts[name], cordoned=cordoned)
        self._rebuild()

    def _group_hosts(self) -> list[str]:
        """Hosts holding two or more VMs of an affine group."""
        return sorted({p.host for p in self.fleet.placements() if p.affinity is not None and sum(
            1 for q in self.fleet.placements() if q.group == p.group and q.host == p.host) > 1})

    @precondition(lambda self: len(self.hosts) > 1 and bool(self._group_hosts()))
    @rule(data=st.data(), most=st.integers(2, 6))
    def drain_group_host(self, data: st.DataObject, most: int) -> None:
        """Drain a host an affine group is on (its VMs move whole or stay), the other hosts open."""
        name = data.draw(st.sampled_from(self._group_hosts()))
        self.hosts = {h: replace(host, cordoned=False) if h != name else host for h, host in self.hosts.items()}
        self._drain(name, most, data)

    @rule(data=st.data(), most=st.integers(0, 4))
    def drain(self, data: st.DataObject, most: int) -> None:
        self._drain(data.draw(st.sampled_from(sorted(self.hosts))), most, data)

    def _drain(self, name: str, most: int, data: st.DataObject) -> None:
        self.hosts[name] = replace(self.hosts[name], cordoned=True)
        self._rebuild()
        before = {p.vm: p for p in self.fleet.placements()}
        state = FleetState(tuple(self.hosts.values()), tuple(before.values()), ISOLATION)
        plan = plan_moves(state, Objective.DRAIN, most, drain=name, solver=data.draw(st.sampled_from(SOLVERS)))
        # Carried out as the apply steps do: claims leave, then arrive; an affine group's VMs (consecutive
        # moves, to one host) leave together and each arrives admitted, as its journaled steps are.
        batches: list[list[Move]] = []
        for move in plan.moves:
            group = move.placement.group
            same = batches and group is not None and batches[-1][0].placement.group == group
            if same and batches[-1][0].to_host == move.to_host:
                batches[-1].append(move)
            else:
                batches.append([move])
        for batch in batches:
            olds = {m.vm: self.fleet.remove(m.vm) for m in batch}
            for move in batch:
                old = olds[move.vm]
                _assert_shape_kept(old, move.placement)
                assert move.to_host != name and not self.hosts[move.to_host].cordoned
                self.fleet.add(move.placement, ISOLATION[str(old.tenant)])
        if any(len(b) > 1 for b in batches):
            event("drain: an affine group moved together")
        event(f"drain: {'moved' if plan.moves else 'nothing moved'}, {'some left' if plan.left else 'emptied'}")
        left = {vm for vm, _why in plan.left}
        assert {p.vm for p in self.fleet.placements() if p.host == name} == left
        assert {p.vm for p in self.fleet.placements()} == set(before)
        if data.draw(st.booleans()):  # the maintenance is over
            self.hosts[name] = replace(self.hosts[name], cordoned=False)
            self._rebuild()

    @invariant()
    def nothing_is_held_twice_and_tenants_keep_their_cores(self) -> None:
        check_fleet(list(self.hosts.values()), self.fleet.placements(), ISOLATION)

    @invariant()
    def replica_groups_stay_apart(self) -> None:
        """Two VMs of one group never share a host under ``host`` (either asked it), nor a cell under ``cell``."""
        grouped = [p for p in self.fleet.placements() if p.group is not None]
        for i, a in enumerate(grouped):
            for b in grouped[i + 1 :]:
                scopes = {a.anti_affinity, b.anti_affinity} - {None}
                if a.group != b.group or a.host != b.host or not scopes:
                    continue
                assert AntiAffinity.HOST not in scopes, (a, b)
                assert not set(a.host_cells) & set(b.host_cells), (a, b)

    @invariant()
    def affine_groups_stay_together(self) -> None:
        """A group one of whose VMs asked affinity has all its VMs on one host, and none asked anti-affinity."""
        by_group: dict[str, list[Placement]] = {}
        for p in self.fleet.placements():
            if p.group is not None:
                by_group.setdefault(p.group, []).append(p)
        for members in by_group.values():
            if any(p.affinity is not None for p in members):
                assert len({p.host for p in members}) == 1, members
                assert all(p.anti_affinity is None for p in members), members


def _assert_shape_kept(old: Placement, new: Placement) -> None:
    assert (new.vm, new.tenant, new.vcpus, new.memory_kib, new.numa_nodes, new.group, new.anti_affinity,
            new.affinity) == (
        old.vm, old.tenant, old.vcpus, old.memory_kib, old.numa_nodes, old.group, old.anti_affinity, old.affinity
    )
    assert sum(1 for d in new.devices if d.kind == "gpu") == sum(1 for d in old.devices if d.kind == "gpu")
    if old.numa_nodes is not None:
        assert [(len(c.vcpus), c.memory_kib) for c in new.cells] == [(len(c.vcpus), c.memory_kib) for c in old.cells]


Lifecycle.TestCase.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
TestLifecycle = Lifecycle.TestCase
