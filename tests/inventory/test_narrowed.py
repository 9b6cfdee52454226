"""`vnuma place` reads only the hosts the engine's fast path can choose, and decides exactly as on every host.

The narrowed read (:func:`vnuma.inventory.narrowed.read_narrowed`) keeps the hosts with VMs or device states,
the hosts a request names, and the first host of each kind of the others. Each decision of ``place_vm`` (which
reads it) is compared with the engine's on a snapshot of the whole fleet taken just before, over fleets of
many alike hosts (some cordoned, some with other reservations) and random requests, some naming hosts; a
refusal is explained on every host, as before.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.strategies import TENANTS, vm_requests
from vnuma.errors import ConflictError, VnumaError
from vnuma.inventory import figures, open_inventory, upgrade
from vnuma.inventory.access import open_access
from vnuma.inventory.narrowed import read_narrowed
from vnuma.inventory.placer import Placer
from vnuma.inventory.reading import Snapshot, read_snapshot
from vnuma.placement import topk
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.kinds import kept
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.topology.devstates import AfterRelease

ALIKE = [f"a-{i:02d}" for i in range(8)]
OTHER = [f"b-{i:02d}" for i in range(3)]
CORDONED = ["a-03", "a-06"]
RESERVED = "c-00"
HOSTS = [*ALIKE, *OTHER, RESERVED]


def _inventory(directory: str) -> str:
    return _fill(f"sqlite:///{directory}/inventory.db")


def _fill(url: str) -> str:
    upgrade(url)  # a PostgreSQL database is never created implicitly
    small = dict(cells=2, cores_per_cell=2, smt=2, memory_gib=8, hugepages_2m_gib=2, hugepages_1g_gib=4)
    with open_inventory(url) as inv:
        for name in ALIKE:
            inv.add_host(make_host(name, gpus_per_cell=1, **small))  # type: ignore[arg-type]
        for name in OTHER:
            inv.add_host(make_host(name, **small))  # type: ignore[arg-type]
        inv.add_host(make_host(RESERVED, gpus_per_cell=1, reserved_cpus=frozenset({0}), **small))  # type: ignore[arg-type]
        for name in CORDONED:
            inv.set_cordoned(name, True)
        for name, isolation in TENANTS:
            inv.add_tenant(Tenant(name, isolation))
    return url


def _whole(url: str) -> Fleet:
    with open_access(url) as access, access.begin(False) as x:
        snap = read_snapshot(x)
    return Fleet(snap.hosts, snap.placements, snap.tenants.values())


@st.composite
def _requests(draw: st.DrawFn) -> list[VmRequest]:
    reqs = []
    for i in range(draw(st.integers(3, 10))):
        req = draw(vm_requests(name=f"vm{i}"))
        avoided = draw(st.sets(st.sampled_from(HOSTS), max_size=3))
        cells = draw(st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 1)), max_size=2))
        req = replace(req, avoid_hosts=frozenset(avoided), avoid_cells=frozenset(cells))
        if draw(st.integers(0, 3)) == 0:  # sized per host from its GPUs, as `place T --gpus N` asks
            req = replace(req, vcpus=None, memory_kib=None, gpus=max(1, req.gpus))
        reqs.append(req)
    return reqs


@settings(max_examples=25)
@given(reqs=_requests(), strategy=st.sampled_from(list(Strategy)), k=st.sampled_from([0, 1, 2, topk.FIRST_K]))
def test_place_decides_on_the_narrowed_read_as_on_every_host(
    reqs: list[VmRequest], strategy: Strategy, k: int
) -> None:
    """``k``: how many claimed hosts a first read decodes of those it may leave out (:mod:`vnuma.placement.topk`);
    0 and 1 leave out nearly every claimed host, so most choices are checked against hosts left out."""
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        patch.setattr(topk, "FIRST_K", k)
        url = _inventory(directory)
        for req in reqs:
            whole = _whole(url)
            try:
                expected = place(req, whole, strategy, explain=False).chosen
            except VnumaError as err:  # a quota, a group clash, or what this request cannot ask unsized
                with pytest.raises(type(err)):
                    place_vm(Settings(url), req, strategy, dry_run=False)
                continue
            got = place_vm(Settings(url), req, strategy, dry_run=False)[1].chosen
            assert got == expected, req


def test_a_refusal_is_explained_on_every_host(url: str) -> None:
    _fill(url)
    req = VmRequest("huge", "t1", 64, 8 * 1024 * 1024)
    refused = place_vm(Settings(url), req, Strategy.PACK, dry_run=True)[1]
    assert refused.chosen is None
    assert refused == place(req, _whole(url), Strategy.PACK, explain=True)
    assert {r.host for r in refused.rejections} == set(HOSTS)


def test_the_read_keeps_claimed_named_and_first_of_each_kind(url: str) -> None:
    _fill(url)
    with open_inventory(url) as inv:  # a device state makes b-01 a host of its own
        clean = AfterRelease.CLEAN
        inv.change_device_states("b-01", lambda host, _who: replace(host.device_states, after_release=clean),
                                 "host-set", {})
    place_vm(Settings(url), VmRequest("v", "t1", 1, 1024 * 1024, host="a-04"), Strategy.PACK, dry_run=False)
    with open_access(url) as access, access.begin(False) as x:
        snap = read_narrowed(x, frozenset({"a-01", "b-02"}))
    # a-00: first alike; a-01, b-02: named; a-02: first alike not named; a-03: first alike cordoned;
    # a-04: claimed; b-00: first other; b-01: device states; c-00: its reservation is its own kind.
    assert [h.name for h in snap.hosts] == ["a-00", "a-01", "a-03", "a-04", "b-00", "b-01", "b-02", "c-00"]
    # Left out: a-02, a-05, a-07 (2 GPUs each), a-06 (cordoned).
    assert (snap.gpus_elsewhere, snap.left_out) == (8, 4)
    assert len(snap.placements) == 1


@pytest.mark.parametrize(
    ("kinds", "claimed", "named", "positions", "stands_for"),
    [
        ("aaaa", "----", "----", [0], [3]),
        ("aaaa", "x---", "----", [0, 1], [0, 2]),
        ("aaaa", "----", "n---", [0, 1], [0, 2]),
        ("abab", "----", "--n-", [0, 1, 2], [0, 1, 0]),
        ("abba", "-x--", "---n", [0, 1, 2, 3], [0, 0, 0, 0]),
        ("", "", "", [], []),
    ],
)
def test_kept_positions(kinds: str, claimed: str, named: str, positions: list[int], stands_for: list[int]) -> None:
    assert kept(list(kinds), [c == "x" for c in claimed], [n == "n" for n in named]) == (positions, stands_for)


def test_a_refusal_on_a_read_that_left_nothing_out_is_explained_without_reading_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/inventory.db"
        with open_inventory(url) as inv:
            inv.add_host(make_host("only", cells=1, cores_per_cell=2, memory_gib=8))
            inv.add_tenant(Tenant("t1", TENANTS[0][1]))

        def whole_read(self: Placer) -> Snapshot:
            raise AssertionError("read every host again")

        monkeypatch.setattr(Placer, "snapshot", whole_read)
        refused = place_vm(Settings(url), VmRequest("huge", "t1", 64, 1024 * 1024), Strategy.PACK, dry_run=True)[1]
        assert refused.chosen is None and [r.host for r in refused.rejections] == ["only"]


def test_vms_on_claimed_hosts_left_out_still_name_and_count(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read that leaves every claimed host out (``FIRST_K`` 0) still knows their VMs: a new VM's default name
    skips theirs, and its tenant's quota counts what they hold."""
    _fill(url)
    with open_inventory(url) as inv:
        inv.add_tenant(Tenant("q", TENANTS[0][1], max_vcpus=3))
    monkeypatch.setattr(topk, "FIRST_K", 0)
    gib = 1024 * 1024
    first = place_vm(Settings(url), VmRequest("", "q", 2, gib), Strategy.PACK, dry_run=False)[1].chosen
    assert first is not None and first.vm == "q-vm1"
    with open_access(url) as access, access.begin(False) as x:
        snap = read_narrowed(x, frozenset(), rank=lambda names, _figures, _tenants, _alike: names)
    assert first.host not in {h.name for h in snap.hosts} and snap.vms_elsewhere == {"q-vm1"}
    assert snap.usage_elsewhere["q"].vcpus == 2
    second = place_vm(Settings(url), VmRequest("", "q", 1, gib), Strategy.PACK, dry_run=False)[1].chosen
    assert second is not None and second.vm == "q-vm2"
    with pytest.raises(ConflictError, match="quota"):
        place_vm(Settings(url), VmRequest("", "q", 1, gib), Strategy.PACK, dry_run=False)


def test_a_release_clears_the_kept_figures_and_the_next_claim_keeps_the_ledgers(url: str) -> None:
    _fill(url)
    for i in range(2):
        place_vm(Settings(url), VmRequest(f"v{i}", "t1", 2, 1024 * 1024, host="a-01"), Strategy.PACK, dry_run=False)
    assert _kept(url) == {"a-01": _figures(url, "a-01")}
    with open_inventory(url) as inv:
        inv.release("v0")
    assert _kept(url) == {}
    place_vm(Settings(url), VmRequest("v2", "t1", 1, 1024 * 1024, host="a-01"), Strategy.PACK, dry_run=False)
    assert _kept(url) == {"a-01": _figures(url, "a-01")}


def test_an_isolation_change_clears_the_kept_figures_of_its_tenants_hosts(url: str) -> None:
    _fill(url)
    for host in ("a-01", "a-02"):
        place_vm(Settings(url), VmRequest(f"v-{host}", "t3" if host == "a-01" else "t1", 2, 1024 * 1024, host=host),
                 Strategy.PACK, dry_run=False)
    with open_inventory(url) as inv:
        inv.update_tenant(Tenant("t3", Isolation.CORE))
    assert _kept(url) == {"a-02": _figures(url, "a-02")}


def _kept(url: str) -> dict[str, tuple[int, ...]]:
    with open_access(url) as access, access.begin(False) as x:
        return {str(r[0]): tuple(int(v) for v in r[1:]) for r in x.rows(figures.KEPT)}


def _figures(url: str, host: str) -> tuple[int, ...]:
    whole = _whole(url)
    return whole.arrays.figures(whole.state(host).index)
