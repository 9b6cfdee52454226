"""Claims: recorded in one transaction, re-checked inside it, and backed by database constraints."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc, select
from sqlalchemy.orm import Session

from tests.builders import make_host
from tests.dbdump import dump
from tests.inventory.conftest import placement
from vnuma.errors import ConflictError, InvalidInputError, NotFoundError, VnumaError
from vnuma.inventory import Inventory, VmState
from vnuma.inventory.claimtables import CpuClaim, DeviceClaim, PageClaim
from vnuma.inventory.models import HostRow, VmRow
from vnuma.placement.ledger import fleet as fleet_module
from vnuma.placement.model import CpuPolicy, Isolation, Placement, Tenant
from vnuma.topology import PAGE_2M, PAGE_4K

GPU0 = "0000:10:00.0"
GPU1 = "0000:11:00.0"


@pytest.fixture
def hv(inv: Inventory) -> Inventory:
    """An inventory holding host-a: 2 cells x 8 cores x 2 threads, 32 x 1 GiB pages and 2 GPUs per cell."""
    inv.add_host(make_host("host-a", gpus_per_cell=2))
    return inv


def _ids(inv: Inventory, vm: str) -> tuple[int, int]:
    with inv._session() as s:
        row = s.scalars(select(VmRow).where(VmRow.name == vm)).one()
        return row.id, row.host_id


def _claim_rows(inv: Inventory) -> list[tuple[Any, ...]]:
    with inv._session() as s:
        cpus = s.execute(
            select(CpuClaim.vm_id, CpuClaim.cpu_id, CpuClaim.exclusive).order_by(CpuClaim.id)
        ).all()
        pages = s.execute(
            select(PageClaim.vm_id, PageClaim.cell_id, PageClaim.count).order_by(PageClaim.id)
        ).all()
        devs = s.execute(select(DeviceClaim.vm_id, DeviceClaim.address).order_by(DeviceClaim.id)).all()
    return [tuple(r) for r in (*cpus, *pages, *devs)]


def test_claim_records_the_vm_and_every_claim(hv: Inventory) -> None:
    p = placement("vm1", (2, 18), memory_gib=4, gpus=(GPU0,), emulator_pcpus=(3,))
    hv.claim(p, Isolation.CORE)
    vm_id, _ = _ids(hv, "vm1")
    assert hv.get_vm("vm1") == (p, VmState.PLACED)
    assert set(_claim_rows(hv)) == {
        (vm_id, 2, True),
        (vm_id, 3, True),
        (vm_id, 18, True),
        (vm_id, 0, 4),
        (vm_id, GPU0),
    }
    assert len(_claim_rows(hv)) == 5
    assert hv.tenant_usage("acme") == (2, 1)
    assert hv.get_tenant("acme") == Tenant("acme", Isolation.CORE)


def test_a_shared_vm_holds_its_cpus_non_exclusively(hv: Inventory) -> None:
    shared = placement("s1", (4, 5), policy=CpuPolicy.SHARED)
    hv.claim(shared, Isolation.NONE)
    hv.claim(replace(shared, vm="s2"), Isolation.NONE)
    vm_id, _ = _ids(hv, "s1")
    assert (vm_id, 4, False) in _claim_rows(hv)
    with pytest.raises(ConflictError, match=re.escape("pCPU(s) 4 are already held by VM 's1'")):
        hv.claim(placement("pinned", (4,)), Isolation.NONE)
    hv.claim(placement("pinned", (6,)), Isolation.NONE)
    with pytest.raises(ConflictError, match="already held by VM 'pinned'"):
        hv.claim(placement("s3", (6, 7), policy=CpuPolicy.SHARED), Isolation.NONE)


# --- the database itself refuses double booking ----------------------------------------------


def _two_vms(inv: Inventory) -> tuple[int, int, int]:
    inv.claim(placement("vm1", (2, 3), gpus=(GPU0,)), Isolation.CORE)
    inv.claim(placement("vm2", (4,)), Isolation.CORE)
    vm1, host = _ids(inv, "vm1")
    vm2, _ = _ids(inv, "vm2")
    return vm1, vm2, host


DOUBLE_BOOKINGS: list[tuple[str, Callable[[int, int, int], Any], str]] = [
    ("pinned-cpu", lambda vm1, vm2, h: CpuClaim(vm_id=vm2, host_id=h, cpu_id=2, exclusive=True), "cpu_id"),
    ("device", lambda vm1, vm2, h: DeviceClaim(vm_id=vm2, host_id=h, address=GPU0), "address"),
    ("same-vm-cpu", lambda vm1, vm2, h: CpuClaim(vm_id=vm1, host_id=h, cpu_id=3, exclusive=False), "cpu_id"),
    (
        "same-vm-pages",
        lambda vm1, vm2, h: PageClaim(vm_id=vm1, host_id=h, cell_id=0, page_size_kib=1048576, count=1),
        "page_size_kib",
    ),
]


@pytest.mark.parametrize(
    ("row", "column"), [d[1:] for d in DOUBLE_BOOKINGS], ids=[d[0] for d in DOUBLE_BOOKINGS]
)
def test_the_database_refuses_double_booking(
    hv: Inventory, db_path: Path, row: Callable[[int, int, int], Any], column: str
) -> None:
    ids = _two_vms(hv)
    before = dump(db_path)
    # Straight through the ORM, past every check in Python: the constraint alone must refuse.
    with Session(hv._engine) as s, s.begin(), pytest.raises(exc.IntegrityError, match=column):
        s.add(row(*ids))
        s.flush()
    with (
        pytest.raises(ConflictError, match="refused a conflicting change") as err,
        hv._session(write=True) as s,
    ):
        s.add(row(*ids))
    assert err.value.hint is not None and "run the command again" in err.value.hint
    assert dump(db_path) == before


def test_the_database_lets_shared_claims_overlap(hv: Inventory) -> None:
    vm1, vm2, host = _two_vms(hv)
    with hv._session(write=True) as s:
        s.add(CpuClaim(vm_id=vm2, host_id=host, cpu_id=7, exclusive=False))
        s.add(CpuClaim(vm_id=vm1, host_id=host, cpu_id=7, exclusive=False))
    assert (vm1, 7, False) in _claim_rows(hv) and (vm2, 7, False) in _claim_rows(hv)


def test_the_database_refuses_a_page_claim_of_zero(hv: Inventory) -> None:
    vm1, _, host = _two_vms(hv)
    with pytest.raises(ConflictError, match="count"), hv._session(write=True) as s:
        s.add(PageClaim(vm_id=vm1, host_id=host, cell_id=1, page_size_kib=2048, count=0))


@pytest.mark.parametrize(
    "clash",
    [placement("vm3", (3,)), placement("vm3", (9,), gpus=(GPU0,))],
    ids=["pinned-cpu", "device"],
)
def test_claim_without_the_python_checks_still_cannot_double_book(
    hv: Inventory, db_path: Path, monkeypatch: pytest.MonkeyPatch, clash: Placement
) -> None:
    _two_vms(hv)
    before = dump(db_path)
    monkeypatch.setattr(fleet_module, "admit", lambda *args, **kw: None)  # admission off: the indexes decide
    with pytest.raises(ConflictError, match="the inventory refused VM 'vm3'"):
        hv.claim(clash, Isolation.CORE)
    assert dump(db_path) == before


# --- refused claims write nothing -------------------------------------------------------------

REFUSALS: list[tuple[str, Placement, type[VnumaError], str]] = [
    ("vm-exists", placement("vm1", (20,)), ConflictError, "VM 'vm1' already exists"),
    ("cpu-taken", placement("vm3", (5, 2)), ConflictError, "pCPU(s) 2 are already held by VM 'vm1'"),
    ("device-taken", placement("vm3", (6,), gpus=(GPU0,)), ConflictError, f"device {GPU0} is already given"),
    ("reserved-cpu", placement("vm3", (1,)), ConflictError, "CPU(s) 1 are reserved"),
    (
        "pages-over",
        placement("vm3", (6,), memory_gib=32),
        ConflictError,
        "cell 0 has 31 free pages of 1 GiB",
    ),
    ("no-pool", placement("vm3", (6,), page_size_kib=16), ConflictError, "has 0 free pages of 16 KiB"),
    ("no-such-cell", placement("vm3", (6,), host_cell=5), ConflictError, "host 'host-a' has no NUMA cell 5"),
    ("cpu-not-in-cell", placement("vm3", (5,), host_cell=1), ConflictError, "cell 1 has no CPU(s) 5"),
    (
        "no-such-device",
        placement("vm3", (6,), gpus=("0000:99:00.0",)),
        ConflictError,
        "has no device 0000:99:00.0",
    ),
    ("no-such-emulator-cpu", placement("vm3", (6,), emulator_pcpus=(99,)), ConflictError, "has no CPU(s) 99"),
    ("pinned-twice", placement("vm3", (6, 6)), InvalidInputError, "pCPU(s) 6 pinned to more than one vCPU"),
    (
        "partial-page",
        placement("vm3", (6,), page_size_kib=PAGE_2M * 3),
        InvalidInputError,
        "not a whole number",
    ),
    (
        "no-such-host",
        placement("vm3", (6,), host="host-z"),
        NotFoundError,
        "host 'host-z' is not in the inventory",
    ),
    (
        "core-isolation",
        placement("vm3", (18,), tenant="rival"),
        ConflictError,
        "share the physical core of pCPU 18 (pCPUs 2,18) with tenant 'acme'",
    ),
]


@pytest.mark.parametrize(("p", "error", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_refused_claim_leaves_every_table_unchanged(
    hv: Inventory, db_path: Path, p: Placement, error: type[VnumaError], message: str
) -> None:
    hv.reserve_cpus("host-a", frozenset({1}))
    hv.claim(placement("vm1", (2, 3), gpus=(GPU0,)), Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(error, match=re.escape(message)):
        hv.claim(p, Isolation.CORE)
    assert dump(db_path) == before


def test_pages_fill_exactly_to_capacity(hv: Inventory) -> None:
    hv.claim(placement("big", (2,), memory_gib=30), Isolation.CORE)
    hv.claim(placement("fits", (3,), memory_gib=2), Isolation.CORE)
    with pytest.raises(ConflictError, match="cell 0 has 0 free pages"):
        hv.claim(placement("over", (4,), memory_gib=1), Isolation.CORE)
    hv.claim(placement("other-cell", (8,), host_cell=1, memory_gib=32), Isolation.CORE)
    hv.claim(placement("small-pages", (4,), memory_gib=1, page_size_kib=PAGE_4K), Isolation.CORE)


def test_two_guest_cells_on_one_host_cell_add_up(hv: Inventory) -> None:
    p = placement("wide", (2, 3), memory_gib=20)
    wide = replace(p, cells=(p.cells[0], replace(p.cells[0], guest_cell=1, vcpus=(2,), pcpus=(4,))))
    with pytest.raises(ConflictError, match="cell 0 has 32 free pages of 1 GiB, VM 'wide' needs 40"):
        hv.claim(wide, Isolation.CORE)


def test_release_frees_every_claim(hv: Inventory) -> None:
    p = placement("vm1", (2, 3), memory_gib=32, gpus=(GPU0, GPU1))
    hv.claim(p, Isolation.CORE)
    hv.release("vm1")
    assert _claim_rows(hv) == []
    assert hv.list_vms() == [] and hv.tenant_usage("acme") == (0, 0)
    hv.claim(replace(p, vm="vm2"), Isolation.CORE)
    with pytest.raises(NotFoundError, match="VM 'vm1' is not in the inventory"):
        hv.release("vm1")


# --- tenants: isolation and quotas ------------------------------------------------------------

# host-a: cell 0 holds cores 0-7 (CPUs 0-7 and their siblings 16-23), cell 1 cores 8-15.
SIBLING = r"physical core of pCPU 16 \(pCPUs 0,16\) with tenant 'a'"
ISOLATION = [
    ("none-none-sibling", Isolation.NONE, Isolation.NONE, 16, None),
    ("core-none-sibling", Isolation.CORE, Isolation.NONE, 16, SIBLING),
    ("none-core-sibling", Isolation.NONE, Isolation.CORE, 16, SIBLING),
    ("core-core-next-core", Isolation.CORE, Isolation.CORE, 1, None),
    ("cell-none-same-cell", Isolation.CELL, Isolation.NONE, 1, "NUMA cell 0"),
    ("none-cell-same-cell", Isolation.NONE, Isolation.CELL, 1, "NUMA cell 0"),
    ("cell-cell-other-cell", Isolation.CELL, Isolation.CELL, 8, None),
]


@pytest.mark.parametrize(
    ("first", "second", "cpu", "refusal"), [i[1:] for i in ISOLATION], ids=[i[0] for i in ISOLATION]
)
def test_isolation_between_tenants(
    hv: Inventory, first: Isolation, second: Isolation, cpu: int, refusal: str | None
) -> None:
    hv.add_tenant(Tenant("a", first))
    hv.add_tenant(Tenant("b", second))
    hv.claim(placement("vm-a", (0,), tenant="a"), first)
    p = placement("vm-b", (cpu,), tenant="b", host_cell=0 if cpu < 8 or cpu >= 16 else 1)
    if refusal is None:
        hv.claim(p, second)
        assert [v.vm for v in hv.placements_on(["host-a"])] == ["vm-a", "vm-b"]
    else:
        with pytest.raises(ConflictError, match=refusal):
            hv.claim(p, second)


def test_one_tenant_may_share_its_own_cores(hv: Inventory) -> None:
    hv.claim(placement("vm1", (0,)), Isolation.CELL)
    hv.claim(placement("vm2", (16,)), Isolation.CELL)


def test_the_stored_isolation_wins_over_the_argument(hv: Inventory) -> None:
    hv.add_tenant(Tenant("strict", Isolation.CORE))
    hv.claim(placement("vm1", (0,), tenant="strict"), Isolation.NONE)
    assert {n: x.isolation for n, x in hv.tenants().items()} == {"strict": Isolation.CORE}
    with pytest.raises(ConflictError, match="physical core"):
        hv.claim(placement("vm2", (16,), tenant="lax"), Isolation.NONE)


def test_quotas_are_rechecked_inside_the_claim(hv: Inventory) -> None:
    hv.add_tenant(Tenant("q", Isolation.NONE, max_vcpus=3, max_gpus=1))
    hv.claim(placement("vm1", (0, 1), tenant="q", gpus=(GPU0,)), Isolation.NONE)
    with pytest.raises(
        ConflictError, match="2 vCPUs in use \\+ 2 asked would exceed the quota of 3"
    ):
        hv.claim(placement("vm2", (2, 3), tenant="q"), Isolation.NONE)
    with pytest.raises(ConflictError, match=r"1 GPU in use \+ 1 asked would exceed the quota of 1"):
        hv.claim(placement("vm2", (2,), tenant="q", gpus=(GPU1,)), Isolation.NONE)
    hv.claim(placement("vm2", (2,), tenant="q"), Isolation.NONE)
    assert hv.tenant_usage("q") == (3, 1)


# --- reading VMs back -------------------------------------------------------------------------


def test_list_get_and_state(hv: Inventory) -> None:
    hv.add_host(make_host("host-b"))
    a = placement("vm-b", (0,), tenant="t1")
    b = placement("vm-a", (0,), tenant="t2", host="host-b")
    c = placement("vm-c", (1,), tenant="t2")
    for p in (a, b, c):
        hv.claim(p, Isolation.NONE)
    hv.set_vm_state("vm-c", "running")
    assert hv.list_vms() == [(b, VmState.PLACED), (a, VmState.PLACED), (c, VmState.RUNNING)]
    assert hv.list_vms(tenant="t2") == [(b, VmState.PLACED), (c, VmState.RUNNING)]
    assert hv.list_vms(tenant="t2", host="host-a") == [(c, VmState.RUNNING)]
    assert hv.placements_on(["host-a"]) == [a, c]
    assert hv.placements_on(None) == [a, c, b]
    assert hv.placements_on([]) == []
    assert {n: x.isolation for n, x in hv.tenants().items()} == {"t1": Isolation.NONE, "t2": Isolation.NONE}
    with pytest.raises(InvalidInputError, match="unknown state 'paused'"):
        hv.set_vm_state("vm-c", "paused")
    with pytest.raises(NotFoundError):
        hv.set_vm_state("ghost", "running")
    with pytest.raises(NotFoundError, match="VM 'ghost' is not in the inventory") as err:
        hv.get_vm("ghost")
    assert err.value.hint == "see `vnuma vm list`"


def test_unknown_host_generation_rows_are_untouched_by_reads(hv: Inventory, db_path: Path) -> None:
    hv.claim(placement("vm1", (0,)), Isolation.CORE)
    before = dump(db_path)
    hv.list_hosts(), hv.list_vms(), hv.placements_on(), hv.host_summaries(), hv.get_vm("vm1")
    assert dump(db_path) == before
    with hv._session() as s:
        assert s.scalar(select(HostRow.host_generation)) == 1


def test_without_an_isolation_the_tenant_must_exist(hv: Inventory, db_path: Path) -> None:
    before = dump(db_path)
    with pytest.raises(NotFoundError, match="tenant 'acme' is not in the inventory"):
        hv.claim(placement("vm1", (0,)))
    assert dump(db_path) == before
    hv.add_tenant(Tenant("acme", Isolation.CELL))
    hv.claim(placement("vm1", (0,)))
    with pytest.raises(ConflictError, match="NUMA cell 0"):
        hv.claim(placement("vm2", (1,), tenant="rival"), Isolation.NONE)


def test_the_claim_itself_keeps_a_replica_group_apart(hv: Inventory, db_path: Path) -> None:
    """A placement built without the engine (or against a stale snapshot) is refused inside the claim
    transaction when its group's other VM holds the host (check ``group``); a cell-scoped one on another cell
    is not."""
    from vnuma.placement.model import AntiAffinity

    first = replace(placement("r1", (2,)), group="web", anti_affinity=AntiAffinity.HOST)
    hv.claim(first, Isolation.CORE)
    before = dump(db_path)
    with pytest.raises(ConflictError, match="group 'web'"):
        hv.claim(replace(placement("r2", (4,)), group="web", anti_affinity=AntiAffinity.CELL), Isolation.CORE)
    assert dump(db_path) == before
    other = replace(placement("c1", (4,)), group="db", anti_affinity=AntiAffinity.CELL)
    hv.claim(other, Isolation.CORE)
    with pytest.raises(ConflictError, match="anti-affinity cell"):
        hv.claim(replace(placement("c2", (6,)), group="db", anti_affinity=AntiAffinity.CELL), Isolation.CORE)
    away = replace(placement("c3", (12,), host_cell=1), group="db", anti_affinity=AntiAffinity.CELL)
    hv.claim(away, Isolation.CORE)
    assert hv.get_vm("c3")[0].group == "db"


def test_the_claim_knows_where_an_affine_group_is_on_the_other_hosts(hv: Inventory, db_path: Path) -> None:
    """A claim reads its group's VMs on every host (``vms.group_name``, under the group's lock): a VM of an
    affine group decided against a stale snapshot is refused on another host than the group's, as is a move
    that would split the group; asking anti-affinity of it is a GroupModeError; nothing is written."""
    from vnuma.errors import GroupModeError
    from vnuma.inventory import placing
    from vnuma.inventory.models import ReplicaGroupRow
    from vnuma.placement.model import Affinity, AntiAffinity

    hv.add_host(make_host("host-b", gpus_per_cell=2))
    hv.claim(replace(placement("p1", (2,)), group="pair", affinity=Affinity.HOST), Isolation.CORE)
    before = dump(db_path)
    split = "group 'pair' \\(affinity host\\) has its VMs on host 'host-a'"
    with pytest.raises(ConflictError, match=split):
        hv.claim(replace(placement("p2", (2,), host="host-b"), group="pair", affinity=Affinity.HOST), Isolation.CORE)
    with pytest.raises(ConflictError, match=split):  # a VM giving only the group joins its host too
        hv.claim(replace(placement("p2", (2,), host="host-b"), group="pair"), Isolation.CORE)
    with pytest.raises(GroupModeError, match="group 'pair' keeps its VMs together"):
        hv.claim(replace(placement("q", (2,), host="host-b"), group="pair", anti_affinity=AntiAffinity.CELL))
    assert dump(db_path) == before
    hv.claim(replace(placement("p2", (4,)), group="pair", affinity=Affinity.HOST), Isolation.CORE)
    p2 = hv.get_vm("p2")[0]
    with pytest.raises(ConflictError, match=split):
        hv._write_x(lambda x: placing.move(x, "p2", p2, replace(placement("p2", (4,), host="host-b"),
                                                                 group="pair", affinity=Affinity.HOST)))
    repinned = replace(placement("p2", (6,)), group="pair", affinity=Affinity.HOST)
    hv._write_x(lambda x: placing.move(x, "p2", p2, repinned))  # on its host: stays with the group
    assert hv.get_vm("p2")[0] == repinned
    with hv._session() as s:
        assert sorted(s.execute(select(VmRow.name, VmRow.group_name))) == [("p1", "pair"), ("p2", "pair")]
        assert list(s.scalars(select(ReplicaGroupRow.name))) == ["pair"]
    hv.release("p1")
    p2 = hv.get_vm("p2")[0]
    alone = replace(placement("p2", (4,), host="host-b"), group="pair", affinity=Affinity.HOST)
    hv._write_x(lambda x: placing.move(x, "p2", p2, alone))  # the group's only VM moves, the group with it
    assert hv.get_vm("p2")[0].host == "host-b"
