"""Cache slices and bandwidth caps: whatever is placed and released, no cache id is over-allocated, classes
of service (host-wide: one per VM holding a slice or a cap anywhere, and the default group's) and caps stay
within the host's, and a VM that asked for a slice never lands without one.

The checker works from the host's facts and the placements alone (not the ledger's bookkeeping).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.resctrl import Classes, cell_domains, cell_room, classes, room, slices_on
from vnuma.topology import Host
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl, ResctrlPolicy

WAYS, GRANULE = 11, 2048


def rdt_host(
    name: str, *, snc: bool, default_ways: int, limit: int, rmids: int | None = None, classes: tuple[int, int] = (4, 3)
) -> Host:
    """4 cells of 4 cores x 2 threads; an 11-way L3 (2-way minimum, ``classes[0]`` classes) per cell, or per
    pair of cells (``snc``: Sub-NUMA Clustering), and an MBA domain (steps of 10, ``classes[1]`` classes)
    with it; ``rmids`` monitoring IDs."""
    host = make_host(name, cells=4, cells_per_socket=2 if snc else 1, cores_per_cell=4, memory_gib=16,
                     hugepages_1g_gib=0, hugepages_2m_gib=8)
    groups = [host.cells[0:2], host.cells[2:4]] if snc else [(c,) for c in host.cells]
    control = (CacheControl(GRANULE, 2 * GRANULE, CacheType.BOTH, classes[0]),)
    banks, nodes = [], []
    for i, cells in enumerate(groups):
        cpus = frozenset().union(*(c.cpu_ids for c in cells))
        banks.append(CacheBank(i, 3, CacheType.BOTH, WAYS * GRANULE, cpus, control))
        nodes.append(BandwidthNode(i, cpus, 10, 10, classes[1]))
    monitors = ("llc_occupancy",) if rmids is not None else ()
    return replace(host, resctrl=Resctrl(tuple(banks), tuple(nodes), monitors, (), rmids),
                   resctrl_policy=ResctrlPolicy(default_ways, limit))


def _l3(host: Host, cpus: set[int]) -> list[int]:
    return sorted(b.id for b in host.resctrl.caches if not b.cpus.isdisjoint(cpus))


def check(host: Host, placements: list[Placement], asked: dict[str, VmRequest]) -> None:
    groups = 1 + sum(1 for p in placements if p.llc or p.mem_bw)  # the default group, and one per VM
    rmids = host.resctrl.max_monitors
    assert rmids is None or groups <= rmids
    # A CLOS id is host-wide: the smallest count of any control, whichever domains the VMs use.
    closids = [c.max_allocs for b in host.resctrl.caches for c in b.controls]
    closids += [n.max_allocs for n in host.resctrl.memory_bandwidth if n.max_allocs is not None]
    assert groups <= min(closids), (groups, closids)
    ways: dict[int, int] = {}
    bw: dict[int, int] = {}
    for p in placements:
        req = asked[p.vm]
        touched = _l3(host, {x for c in p.cells for x in c.pcpus})
        if req.llc_ways is not None or req.llc_kib is not None:
            assert [i for i, _w in p.llc] == touched, p
        else:
            assert p.llc == ()
        if req.mem_bw is not None:
            assert p.mem_bw == tuple((i, req.mem_bw) for i in touched)
        else:
            assert p.mem_bw == ()
        for i, w in p.llc:
            assert w * GRANULE >= 2 * GRANULE
            ways[i] = ways.get(i, 0) + w
        for i, c in p.mem_bw:
            assert c % 10 == 0 and 10 <= c <= 100
            bw[i] = bw.get(i, 0) + c
    policy = host.resctrl_policy
    assert all(policy.llc_default_ways + w <= WAYS for w in ways.values()), ways  # type: ignore[operator]
    assert all(c <= policy.mem_bw_limit for c in bw.values()), bw


@st.composite
def asks(draw: st.DrawFn, i: int) -> VmRequest:
    size = draw(st.sampled_from(("ways", "kib", None)))
    return request(
        f"vm{i}", vcpus=draw(st.integers(1, 4)) * 2, memory_gib=1, numa_nodes=draw(st.sampled_from((None, 1, 2))),
        page_size_kib=2048,
        llc_ways=draw(st.integers(1, 6)) if size == "ways" else None,
        llc_kib=draw(st.integers(1, 12 * 1024)) if size == "kib" else None,
        mem_bw=draw(st.sampled_from((None, 10, 20, 40, 60))),
    )


@settings(max_examples=120, deadline=None)
@given(
    snc=st.booleans(), default_ways=st.integers(1, 4), limit=st.sampled_from((60, 100, 150)),
    rmids=st.sampled_from((None, 3, 6)), classes=st.sampled_from(((4, 3), (16, 16), (3, 8), (16, 6))),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 10_000)), min_size=1, max_size=14), data=st.data(),
)
def test_slices_never_overbook_a_cache_or_a_domain(
    snc: bool, default_ways: int, limit: int, rmids: int | None, classes: tuple[int, int],
    steps: list[tuple[bool, int]], data: st.DataObject,
) -> None:
    host = rdt_host("h", snc=snc, default_ways=default_ways, limit=limit, rmids=rmids, classes=classes)
    fleet = Fleet([host])
    asked: dict[str, VmRequest] = {}
    for i, (release, pick) in enumerate(steps):
        placed = fleet.placements()
        if release and placed:
            fleet.remove(placed[pick % len(placed)].vm)
            continue
        req = data.draw(asks(i))
        chosen = place(req, fleet, Strategy.PACK, explain=False).chosen
        if chosen is not None:
            assert fleet.admit(chosen) is None  # what the engine chose, admission takes
            fleet.add(chosen)
            asked[chosen.vm] = req
        check(host, list(fleet.placements()), asked)
        _remembered_fits_are_fits(host, fleet, data.draw(asks(i)))
    sliced = sum(1 for p in fleet.placements() if p.llc or p.mem_bw)
    event(f"VMs holding slices or caps at the end: {min(sliced, 5)}{'+' if sliced >= 5 else ''}")
    event(f"VMs holding slices or caps on more domains than one class count allows per domain: "
          f"{sliced + 1 > min(classes)}")


def _remembered_fits_are_fits(host: Host, fleet: Fleet, req: VmRequest) -> None:
    """What :func:`cell_room` answers from what it remembers is what :func:`room` works out afresh."""
    use = fleet.state(host.name).resctrl_use
    for ids in sorted(set(cell_domains(host).values())):
        remembered = cell_room(host, use, req, ids)
        fresh = room(host, use, req.name, *slices_on(host, req, ids))
        assert (remembered is None) == (fresh is None), (ids, remembered, fresh)


def test_a_full_cache_sends_the_next_slice_to_another_domain_then_refuses() -> None:
    host = rdt_host("h", snc=False, default_ways=3, limit=100, classes=(16, 16))
    fleet = Fleet([host])
    homes = []
    for i in range(5):
        chosen = place(request(f"v{i}", vcpus=2, memory_gib=1, llc_ways=8), fleet, Strategy.PACK).chosen
        if chosen is None:
            break
        fleet.add(chosen)
        homes.append(chosen.llc)
    assert sorted(homes) == [((0, 8),), ((1, 8),), ((2, 8),), ((3, 8),)]  # 11 - 3 = 8 ways on each cache
    refused = place(request("v9", vcpus=2, memory_gib=1, llc_ways=8), fleet, Strategy.PACK, explain=True)
    assert refused.chosen is None
    assert {r.check for r in refused.rejections} == {"resctrl"}
    assert "has 0 free ways of 11" in refused.rejections[0].reason


def test_each_vm_with_a_slice_takes_a_monitoring_id_of_the_hosts() -> None:
    host = rdt_host("h", snc=False, default_ways=1, limit=1000, rmids=3)  # the default group holds one
    fleet = Fleet([host])
    for i in range(2):
        chosen = place(request(f"v{i}", vcpus=2, memory_gib=1, mem_bw=10), fleet, Strategy.PACK).chosen
        assert chosen is not None
        fleet.add(chosen)
    refused = place(request("v9", vcpus=2, memory_gib=1, llc_ways=2), fleet, Strategy.PACK, explain=True)
    assert refused.chosen is None
    assert "no free monitoring ID (RMID): 3 of 3 in use" in refused.rejections[0].reason
    assert place(request("plain", vcpus=2, memory_gib=1), fleet, Strategy.PACK).chosen is not None


def test_a_class_of_service_is_host_wide_whatever_domains_the_vms_use() -> None:
    """4 L3 domains, 4 classes on every cache and 3 on every MBA domain: 2 VMs with slices on the host (the
    default group holds the third class), not 2 per domain; the refusal counts the host's groups."""
    host = rdt_host("h", snc=False, default_ways=1, limit=100, classes=(4, 3))
    fleet = Fleet([host])
    for name, ask in (("v0", {"llc_ways": 2}), ("v1", {"mem_bw": 10})):
        chosen = place(request(name, vcpus=8, memory_gib=1, **ask), fleet, Strategy.PACK).chosen
        assert chosen is not None
        fleet.add(chosen)
    assert {i for p in fleet.placements() for i, _v in p.llc + p.mem_bw} == {0, 1}  # one domain each
    refused = place(request("v2", vcpus=2, memory_gib=1, llc_ways=2), fleet, Strategy.PACK, explain=True)
    assert refused.chosen is None  # domains 2 and 3 are empty, the host's classes are not
    assert {r.check for r in refused.rejections} == {"resctrl"}
    assert refused.rejections[0].reason.startswith(
        "resctrl: host 'h' has no free class of service (3 of 3 in use: the default group and 2 VMs)"
    )
    state = fleet.state("h")
    assert classes(host, state.resctrl_use) == Classes(used=2, total=2)
    assert fleet.admit(replace(fleet.placements()[0], vm="copy")) is not None  # admission counts the same
    assert place(request("plain", vcpus=2, memory_gib=1), fleet, Strategy.PACK).chosen is not None
    fleet.remove("v1")
    assert place(request("v3", vcpus=2, memory_gib=1, llc_ways=2), fleet, Strategy.PACK).chosen is not None
