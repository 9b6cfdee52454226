"""First placements of an affine replica group racing from separate processes end on one host, on SQLite and
PostgreSQL: the claim locks the group and reads its VMs on every host (:mod:`vnuma.inventory.placing`)."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.grouping import group_worker
from tests.concurrency.racing import make_fleet, recorded_vms
from vnuma.placement.model import Affinity, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G

Job = tuple[str, str, int, str]


def _race(url: str, jobs: list[list[Job]], *, hold: bool) -> list[tuple[str, str | None, str | None, str | None]]:
    """Each list of jobs in a spawned worker, all started together; every job's report."""
    ctx = multiprocessing.get_context("spawn")
    start, decided, queue = ctx.Barrier(len(jobs)), ctx.Barrier(len(jobs)), ctx.Queue()
    procs = [ctx.Process(target=group_worker, args=(url, mine, start, decided, hold, queue)) for mine in jobs]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=300) for mine in jobs for _job in mine]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, f"worker pid {p.pid} exited with {p.exitcode}"
    return sorted(reports)


def _request(vm: str, tenant: str, vcpus: int, **kw: Any) -> VmRequest:
    return VmRequest(vm, tenant, vcpus, 2 * KIB_PER_GIB, page_size_kib=PAGE_1G, **kw)


@pytest.mark.slow
def test_two_first_vms_of_an_affine_group_decided_on_two_hosts_end_on_one(url: str) -> None:
    """VM a fits best on host-1 (partly used), VM b only on host-0 or host-2 (host-1 has 8 pCPUs left);
    tenants differ, so only the group's lock orders their claims. Each decides on a snapshot showing
    neither, then both claim at once: the second claim sees the first VM on the other host and is refused;
    decided again it joins the first, or fits nowhere."""
    make_fleet(url)
    settings = Settings(db_url=url)
    place_vm(settings, _request("filler", "acme", 24, host="host-1"), Strategy.PACK, dry_run=False)
    alone = {
        vm: place_vm(settings, _request(vm, tenant, vcpus), Strategy.PACK, dry_run=True)[1].chosen
        for vm, tenant, vcpus in (("a", "acme", 2), ("b", "beta", 16))
    }
    assert {vm: p.host for vm, p in alone.items() if p is not None} == {"a": "host-1", "b": "host-0"}

    reports = _race(url, [[("a", "acme", 2, "pair")], [("b", "beta", 16, "pair")]], hold=True)

    assert [error for *_rest, error in reports] == [None, None], reports
    assert {vm: first for vm, _host, first, _error in reports} == {"a": "host-1", "b": "host-0"}
    placed = {vm: host for vm, host, _first, _error in reports if host is not None}
    assert placed in ({"a": "host-1"}, {"a": "host-0", "b": "host-0"}), reports
    recorded = recorded_vms(url)
    assert {vm: doc["host"] for vm, doc in recorded.items() if vm != "filler"} == placed
    assert all(recorded[vm]["group"] == {"name": "pair", "anti_affinity": None, "affinity": "host"} for vm in placed)
    assert inconsistencies(url) == []


@pytest.mark.slow
def test_racing_placements_of_affine_groups_never_split_one(url: str) -> None:
    """Four processes each place one VM into each of five affine groups at once (two tenants, mixed sizes):
    every group ends on one host, nothing is held twice, every VM row is whole."""
    make_fleet(url)
    sizes = (1, 2, 2, 4)
    jobs = [
        [(f"g{g}-w{w}", ("acme", "beta")[(g + w) % 2], sizes[(g + w) % 4], f"g{g}") for g in range(5)]
        for w in range(4)
    ]
    reports = _race(url, jobs, hold=False)

    for vm, _host, _first, error in reports:
        assert error is None or "inventory busy" in error or "locked" in error, (vm, error)
    placed = {vm: host for vm, host, _first, _error in reports if host is not None}
    assert placed, reports
    by_group: dict[str, set[str]] = {}
    for vm, host in placed.items():
        by_group.setdefault(vm.split("-")[0], set()).add(host)
    assert all(len(hosts) == 1 for hosts in by_group.values()), by_group
    assert {vm: doc["host"] for vm, doc in recorded_vms(url).items()} == placed
    assert inconsistencies(url) == []


def test_a_group_lost_to_a_committed_vm_is_decided_again_in_the_same_command(url: str) -> None:
    """Sequential and in one process: the second VM's snapshot shows the first, so it joins it at once."""
    make_fleet(url)
    settings = Settings(db_url=url)
    first = place_vm(settings, _request("p1", "acme", 2, group="duo", affinity=Affinity.HOST), Strategy.PACK,
                     dry_run=False)[1].chosen
    second = place_vm(settings, _request("p2", "beta", 2, group="duo", affinity=Affinity.HOST, avoid_hosts=frozenset()),
                      Strategy.FIRST_FIT, dry_run=False)[1].chosen
    assert first is not None and second is not None and first.host == second.host
    assert inconsistencies(url) == []
