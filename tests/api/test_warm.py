"""The warm ledger a serving process keeps decides exactly as a fresh snapshot would, after every kind of change
any other command makes, and reads again only the hosts whose generation moved (not those its own claims
moved)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli
from vnuma.errors import InvalidInputError, VnumaError
from vnuma.inventory.placer import open_placer
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.services import Settings
from vnuma.services.placing import Cold, place_vm
from vnuma.services.warm import WarmFleet
from vnuma.topology import KIB_PER_GIB, PAGE_1G

GEOMETRY = REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json"
PROBES = [
    VmRequest("probe-1", "tenant-a", 8, 16 * KIB_PER_GIB, page_size_kib=PAGE_1G),
    VmRequest("probe-2", "tenant-b", 16, 64 * KIB_PER_GIB, gpus=2, page_size_kib=PAGE_1G),
    VmRequest("probe-3", "tenant-a", 48, 96 * KIB_PER_GIB, numa_nodes=2, page_size_kib=PAGE_1G),
]


def _state(fleet: Fleet) -> tuple[object, ...]:
    hosts = fleet.host_names()
    return (
        fleet.placements(),
        {h: fleet.free_pcpus(h) for h in hosts},
        {h: fleet.free_gpus(h) for h in hosts},
        {t: fleet.used(t) for t in ("tenant-a", "tenant-b")},
    )


def _answer(fleet: Fleet, probe: VmRequest, strategy: Strategy) -> object:
    """The engine's explained answer, or the refusal it raises (a quota)."""
    try:
        return place(probe, fleet, strategy, explain=True)
    except VnumaError as err:
        return type(err).__name__, str(err)


def _same_as_cold(cli: Cli, warm: WarmFleet) -> None:
    with (
        open_placer(f"sqlite:///{cli.db}") as placer,
        warm.viewing(placer, attempt=0) as (kept, kept_tenants),
        Cold().viewing(placer, attempt=0) as (cold, cold_tenants),
    ):
        assert kept_tenants == cold_tenants
        assert _state(kept) == _state(cold)
        for probe in PROBES:
            for strategy in Strategy:
                assert _answer(kept, probe, strategy) == _answer(cold, probe, strategy)


@pytest.fixture
def fleet(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("host", "add", "h2", "--demo")
    cli.ok("tenant", "create", "tenant-a")
    cli.ok("tenant", "create", "tenant-b", "--isolation", "none")
    return cli


def test_the_warm_ledger_follows_every_change(fleet: Cli) -> None:
    warm = WarmFleet()
    _same_as_cold(fleet, warm)
    assert (warm.full_reads, warm.host_reads) == (1, 0)
    steps = [
        ["place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--page-size", "1G", "--name", "a1"],
        ["place", "tenant-b", "--gpus", "2", "--vcpus", "8", "--memory", "32GiB", "--name", "b1", "--host", "h2"],
        ["place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--name", "a2", "--numa-nodes", "2", "--host", "h1"],
        ["vm", "repin", "a1", "--cells", "3"],
        ["vm", "migrate", "a2", "--to", "h2"],
        ["vm", "release", "b1"],
        ["host", "reserve", "h1", "--cpus", "0-3"],
        ["host", "cordon", "h2"],
        ["host", "uncordon", "h2"],
        ["tenant", "update", "tenant-a", "--max-vcpus", "40"],
        ["tenant", "update", "tenant-b", "--isolation", "core"],
        ["device", "taint", "h2", "0000:17:00.0", "--reason", "Xid 79"],
        ["host", "set", "h1", "--after-release", "clean"],
        ["place", "tenant-a", "--gpus", "1", "--vcpus", "2", "--memory", "4GiB", "--host", "h1", "--name", "g1"],
        ["vm", "release", "g1"],
        ["device", "untaint", "h2", "0000:17:00.0"],
        ["device", "taint", "h1", "0000:27:00.0", "--reason", "ECC"],
        ["rebalance", "--apply", "--yes"],
    ]
    for args in steps:
        fleet.ok(*args)
        _same_as_cold(fleet, warm)
    assert warm.full_reads < len(steps)  # claims, releases and moves re-read hosts, not the fleet


def test_a_claim_elsewhere_rereads_one_host(fleet: Cli) -> None:
    warm = WarmFleet()
    _same_as_cold(fleet, warm)
    fleet.ok("place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--host", "h2", "--name", "x")
    _same_as_cold(fleet, warm)
    assert (warm.full_reads, warm.host_reads, warm.vm_records) == (1, 1, 1)
    _same_as_cold(fleet, warm)  # nothing moved: nothing read again
    assert (warm.full_reads, warm.host_reads, warm.vm_records) == (1, 1, 1)
    fleet.ok("place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--host", "h2", "--name", "y")
    _same_as_cold(fleet, warm)  # h2 read again; x, unchanged, stays as the ledger holds it
    assert (warm.full_reads, warm.host_reads, warm.vm_records) == (1, 2, 2)


def test_a_kept_mig_geometry_reaches_the_warm_ledger(fleet: Cli) -> None:
    """A gpu-profile change bumps no host generation: the warm ledger sees the geometries changed and reads
    the fleet again, so a MIG ask is decided as a fresh snapshot decides it (unknown before, placed after)."""
    warm = WarmFleet()
    mig = VmRequest("probe-mig", "tenant-a", 2, 4 * KIB_PER_GIB, partition=PartitionAsk(PartitionKind.MIG, "3g.40gb"))
    _same_as_cold(fleet, warm)
    fleet.ok("place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--name", "a1")
    with (open_placer(f"sqlite:///{fleet.db}") as placer, warm.viewing(placer, attempt=0) as (kept, _tenants),
          pytest.raises(InvalidInputError, match=r"no GPU of the fleet offers MIG profile '3g\.40gb'")):
        place(mig, kept, Strategy.PACK, explain=False)  # a profile no GPU offers is bad input (exit 4)
    fleet.ok("gpu-profile", "import", str(GEOMETRY))
    _same_as_cold(fleet, warm)
    assert warm.full_reads == 2
    with open_placer(f"sqlite:///{fleet.db}") as placer, warm.viewing(placer, attempt=0) as (kept, _tenants):
        chosen = place(mig, kept, Strategy.PACK, explain=False).chosen
        assert chosen is not None and [a.name for a in chosen.partitions] == ["3g.40gb"]
    fleet.ok("gpu-profile", "remove", "NVIDIA H100 PCIe (test copy)")
    _same_as_cold(fleet, warm)
    assert warm.full_reads == 3


def test_its_own_claims_are_not_read_back_but_a_change_between_is(fleet: Cli) -> None:
    """A claim through the warm ledger reports its host's mark; the ledger, which holds the claim, takes it and
    reads nothing back, unless another command changed the host between (then the mark is not the next one)."""
    warm = WarmFleet()
    settings = Settings(db_url=f"sqlite:///{fleet.db}")

    def placed(name: str, host: str) -> None:
        request = VmRequest(name, "tenant-a", 4, 8 * KIB_PER_GIB, page_size_kib=PAGE_1G, host=host)
        chosen = place_vm(settings, request, Strategy.PACK, dry_run=False, view=warm)[1].chosen
        assert chosen is not None and chosen.host == host

    placed("w1", "h1")
    placed("w2", "h1")
    placed("w3", "h2")
    _same_as_cold(fleet, warm)
    assert (warm.full_reads, warm.host_reads) == (1, 0)
    fleet.ok("place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--host", "h1", "--name", "cli")
    placed("w4", "h1")  # the refresh before it reads h1 (the CLI's claim), then w4 is h1's next mark
    _same_as_cold(fleet, warm)
    assert (warm.full_reads, warm.host_reads) == (1, 1)
    fleet.ok("vm", "release", "w3")
    _same_as_cold(fleet, warm)
    assert (warm.full_reads, warm.host_reads) == (1, 2)


def test_a_change_landing_between_its_decision_and_its_claim_is_read(fleet: Cli) -> None:
    fleet.ok("place", "tenant-b", "--vcpus", "2", "--memory", "4GiB", "--host", "h1", "--name", "old")
    warm = WarmFleet()
    request = VmRequest("w1", "tenant-a", 4, 8 * KIB_PER_GIB, page_size_kib=PAGE_1G, host="h1")
    with open_placer(f"sqlite:///{fleet.db}") as placer:
        with warm.viewing(placer, attempt=0) as (kept, _tenants):
            chosen = place(request, kept, Strategy.PACK, explain=False).chosen
            assert chosen is not None
            warm.hold(chosen)
        fleet.ok("vm", "release", "old")
        claimed = placer.claim(chosen)
        assert claimed.placement is chosen
        warm.settle(chosen, claimed)
    _same_as_cold(fleet, warm)  # "old" left the ledger: h1's mark was not the one before w1's
    assert warm.host_reads == 1


def test_claims_of_threads_at_once_are_settled_in_commit_order_and_never_read_back(fleet: Cli) -> None:
    """Each claim commits and settles under the ledger's lock: no refresh sees one of this process's own claims as
    another command's change, even with claims of several threads on one host committing at once."""
    warm = WarmFleet()
    settings = Settings(db_url=f"sqlite:///{fleet.db}")
    failures: list[BaseException] = []

    def worker(k: int) -> None:
        for i in range(8):
            request = VmRequest(f"t{k}-{i}", "tenant-b", 2, 2 * KIB_PER_GIB, page_size_kib=PAGE_1G)
            try:
                assert place_vm(settings, request, Strategy.PACK, dry_run=False, view=warm)[1].chosen is not None
            except BaseException as err:  # reported below: a thread's exception is otherwise lost
                failures.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert (warm.full_reads, warm.host_reads) == (1, 0)
    _same_as_cold(fleet, warm)
