"""Random claim/release sequences against a plain-Python model of one small host.

The model says, independently of the inventory code, whether each claim
must succeed; after every step the inventory must hold exactly the model's VMs.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.builders import kept, make_host
from vnuma.errors import ConflictError, NotFoundError
from vnuma.inventory import open_inventory
from vnuma.placement.model import CellAssignment, CpuPolicy, DeviceAssignment, Isolation, Placement, Tenant
from vnuma.topology import PAGE_1G, DeviceKind

# 2 cells x 2 cores x 2 threads: cell 0 = CPUs 0,1,4,5 (cores 0,1); cell 1 = CPUs 2,3,6,7.
HOST = make_host(
    "hv",
    cells=2,
    cores_per_cell=2,
    smt=2,
    memory_gib=4,
    hugepages_2m_gib=0,
    hugepages_1g_gib=3,
    gpus_per_cell=1,
)
CORE_OF = {cpu.id: cpu.core for cell in HOST.cells for cpu in cell.cpus}
TENANTS = {"strict": Isolation.CORE, "lax": Isolation.NONE}


@dataclass
class Model:
    vms: dict[str, Placement] = field(default_factory=dict)

    def fits(self, p: Placement) -> bool:
        if p.vm in self.vms:
            return False
        others = list(self.vms.values())
        pinned = {c for o in others for c in o.dedicated_pcpus}
        floating = {c for o in others for c in o.shared_pcpus}
        if p.dedicated_pcpus & (pinned | floating) or p.shared_pcpus & pinned:
            return False
        cell = p.cells[0].host_cell
        used = sum(c.pages for o in others for c in o.cells if c.host_cell == cell)
        if used + p.cells[0].pages > HOST.cell(cell).pages_of(PAGE_1G):
            return False
        if {d.address for d in p.devices} & {d.address for o in others for d in o.devices}:
            return False
        return all(self._isolated(p, o) for o in others)

    @staticmethod
    def _isolated(p: Placement, o: Placement) -> bool:
        if p.tenant == o.tenant or (
            TENANTS[p.tenant] is Isolation.NONE and TENANTS[o.tenant] is Isolation.NONE
        ):
            return True
        mine = {CORE_OF[c] for c in p.dedicated_pcpus | p.shared_pcpus}
        theirs = {CORE_OF[c] for c in o.dedicated_pcpus | o.shared_pcpus}
        return not mine & theirs


class ClaimMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vnuma-claims-")
        self.inv = open_inventory(f"sqlite:///{self.dir}/inventory.db")
        self.inv.add_host(HOST)
        for name, isolation in TENANTS.items():
            self.inv.add_tenant(Tenant(name, isolation))
        self.model = Model()

    def teardown(self) -> None:
        self.inv.close()
        shutil.rmtree(self.dir)

    @rule(
        vm=st.sampled_from([f"vm{i}" for i in range(6)]),
        tenant=st.sampled_from(sorted(TENANTS)),
        cell=st.integers(0, 1),
        picks=st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True),
        pages=st.integers(1, 2),
        gpu=st.booleans(),
        policy=st.sampled_from(CpuPolicy),
    )
    def claim(
        self, vm: str, tenant: str, cell: int, picks: list[int], pages: int, gpu: bool, policy: CpuPolicy
    ) -> None:
        cpus = sorted(HOST.cell(cell).cpu_ids)
        pcpus = tuple(cpus[i] for i in picks)
        devices = tuple(
            DeviceAssignment(d.address, DeviceKind.GPU, 0, cell)
            for d in HOST.devices
            if d.numa_node == cell and gpu
        )
        if policy is CpuPolicy.MIXED and len(pcpus) < 2:
            return  # a mixed VM pins vCPU 0 and floats the others: it needs a float set beside the pin
        assignment = CellAssignment(0, cell, tuple(range(len(pcpus))), pcpus, pages * PAGE_1G, PAGE_1G)
        dedicated = frozenset({0}) if policy is CpuPolicy.MIXED else frozenset()
        p = kept(Placement(vm, tenant, "hv", (assignment,), devices=devices, cpu_policy=policy,
                           dedicated_vcpus=dedicated))
        if self.model.fits(p):
            self.inv.claim(p, TENANTS[tenant])
            self.model.vms[vm] = p
        else:
            try:
                self.inv.claim(p, TENANTS[tenant])
            except ConflictError:
                return
            raise AssertionError(f"claim of {p} should have been refused")

    @rule(vm=st.sampled_from([f"vm{i}" for i in range(6)]))
    def release(self, vm: str) -> None:
        if vm in self.model.vms:
            self.inv.release(vm)
            del self.model.vms[vm]
        else:
            try:
                self.inv.release(vm)
            except NotFoundError:
                return
            raise AssertionError(f"release of unknown {vm} should fail")

    @invariant()
    def inventory_matches_model(self) -> None:
        assert self.inv.placements_on(["hv"]) == [self.model.vms[n] for n in sorted(self.model.vms)]
        for tenant in TENANTS:
            mine = [p for p in self.model.vms.values() if p.tenant == tenant]
            assert self.inv.tenant_usage(tenant) == (
                sum(p.vcpus for p in mine),
                sum(len(p.devices) for p in mine),
            )


ClaimMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
test_claims_match_the_model = ClaimMachine.TestCase
