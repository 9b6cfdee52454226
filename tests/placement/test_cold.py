"""The cold tier: a guest cell with memory and no vCPUs on a host memory-only cell of a capacity tier.

Hosts: libvirt's HMAT capabilities shape (2 CPU cells, 2 memory-only cells each rated from one CPU cell,
CXL-like by HMAT), a Knights-Landing-like host whose memory-only MCDRAM HMAT rates faster than its DRAM
(a hot tier), the hwloc SNC host with a CXL-DRAM expander, and built hosts with memory-only cells of no
known kind.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import InvalidInputError
from vnuma.placement.cold import cold_cells, eligible
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import ColdTier, Isolation, Placement, Tenant
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.hwloc import parse_hwloc
from vnuma.topology import Host
from vnuma.topology.hmat import nested

DATA = Path(__file__).resolve().parents[1] / "data"
GIB = 1024 * 1024


def _caps(name: str) -> Host:
    return parse_capabilities((DATA / "capabilities" / name).read_bytes(), name=name.split(".")[0])


def _fleet(*hosts: Host) -> Fleet:
    return Fleet(list(hosts), [], [Tenant("t1"), Tenant("t2", Isolation.CELL)])


def test_the_cold_cell_is_the_memory_only_cell_hmat_rates_best_from_the_vms_cell() -> None:
    host = _caps("x86-hmat-memonly.xml")
    fleet = _fleet(host)
    on0 = place(request("a", vcpus=4, memory_gib=4, cold_memory_kib=16 * GIB), fleet).chosen
    assert on0 is not None and on0.host_cells == (0,)
    (cold,) = on0.cold
    assert (cold.guest_cell, cold.host_cell, cold.vcpus, cold.memory_kib, cold.page_size_kib) == (1, 2, (), 16 * GIB, 4)
    fleet.add(on0)
    avoid = frozenset({(host.name, 0)})
    on1 = place(request("b", vcpus=4, memory_gib=4, cold_memory_kib=16 * GIB, avoid_cells=avoid), fleet).chosen
    assert on1 is not None and on1.host_cells == (1,) and on1.cold[0].host_cell == 3  # rated from cell 1
    fleet.add(on1)
    assert fleet.state(host.name).cold_free[(2, 4)] == (256 - 16) * GIB // 4
    fleet.remove("a")
    assert fleet.state(host.name).cold_free[(2, 4)] == 256 * GIB // 4


@pytest.mark.parametrize(("cells", "expander"), [((0,), 4), ((1,), 4), ((2,), 5), ((3,), 5), ((1, 2), 4)])
def test_on_a_2_socket_snc_host_the_sockets_own_cxl_expander_is_chosen(cells: tuple[int, ...], expander: int) -> None:
    host = _caps("x86-2socket-snc-2cxl.xml")
    avoid = frozenset((host.name, c) for c in range(4) if c not in cells)
    ask = request("a", vcpus=4 * len(cells), memory_gib=2 * len(cells), numa_nodes=len(cells),
                  cold_memory_kib=32 * GIB, avoid_cells=avoid)
    chosen = place(ask, _fleet(host)).chosen
    assert chosen is not None and set(chosen.host_cells) == set(cells)
    # Across sockets (cells 1 and 2) both expanders are 15 GiB/s from one of them: the worst figure ties,
    # then latency ties (350 ns), then SLIT (14 + 26 each): the lower id.
    assert chosen.cold[0].host_cell == expander


def test_hbm_is_a_hot_tier_and_never_serves_cold_memory() -> None:
    knl = _caps("knl-flat-mcdram.xml")
    assert [(c.id, c.kind, c.capacity) for c in cold_cells(knl)] == [(1, "hbm", False)]
    result = place(request("a", vcpus=2, memory_gib=1, cold_memory_kib=GIB), _fleet(knl))
    assert result.chosen is None
    (why,) = result.rejections
    assert why.check == "cold-memory" and "of a capacity tier (hbm is a hot tier)" in why.reason
    assert "(cell 1 hbm)" in why.reason


def test_cold_tier_cxl_takes_cells_of_kind_cxl_only() -> None:
    unknown = make_host("plain", cells=2, memory_only_cells=1)
    cxl = parse_hwloc((DATA / "hwloc" / "2pkg-snc-smt-cxl-gpu.xml").read_bytes(), name="snc")
    assert [c.kind for c in cold_cells(unknown)] == ["unknown"]
    assert [c.kind for c in cold_cells(cxl)] == ["cxl"]
    ask = request("a", vcpus=2, memory_gib=1, cold_memory_kib=4 * GIB, cold_tier=ColdTier.CXL)
    alone = place(ask, _fleet(unknown))
    assert alone.chosen is None and "no memory-only cell of kind cxl" in alone.rejections[0].reason
    both = place(ask, _fleet(unknown, cxl), explain=True)
    assert both.chosen is not None and both.chosen.host == "snc" and both.chosen.cold_tier is ColdTier.CXL
    anywhere = place(replace(ask, cold_tier=ColdTier.ANY), _fleet(unknown)).chosen
    assert anywhere is not None and anywhere.cold[0].host_cell == 2  # unknown kind: a capacity tier


def test_no_memory_only_cell_or_no_room_is_a_host_refusal_with_the_reason() -> None:
    plain = make_host("plain", cells=2)
    res = place(request("a", cold_memory_kib=GIB), _fleet(plain))
    assert res.chosen is None and res.rejections[0].reason == "no memory-only cell for 1 GiB of cold memory"
    small = make_host("small", cells=2, memory_only_cells=1, memory_only_gib=8)
    res = place(request("a", cold_memory_kib=9 * GIB), _fleet(small))
    assert "memory-only cell 2 has 8 GiB free, VM asks 9 GiB of cold memory" in res.rejections[0].reason


def test_cold_memory_must_be_whole_4k_pages() -> None:
    with pytest.raises(InvalidInputError, match="whole number of 4 KiB pages"):
        place(request("a", cold_memory_kib=6), _fleet(make_host(memory_only_cells=1)))


def test_a_cold_tier_survives_the_codec_and_every_move_keeps_it() -> None:
    host = make_host("h", cells=2, memory_only_cells=2)
    chosen = place(request("a", vcpus=4, memory_gib=2, cold_memory_kib=8 * GIB, cold_tier=ColdTier.ANY),
                   _fleet(host)).chosen
    assert chosen is not None
    doc = placement_to_dict(chosen)
    assert doc["cells"][-1] == {**doc["cells"][-1], "vcpus": [], "pcpus": [], "cold": True, "memory_kib": 8 * GIB}
    assert doc["cold_tier"] == "any" and "cold" not in doc["cells"][0]
    assert placement_from_dict(doc) == chosen
    again = move_request(chosen, Isolation.CORE)
    assert (again.cold_memory_kib, again.cold_tier) == (8 * GIB, ColdTier.ANY)
    plain = placement_to_dict(replace(chosen, cold=()))
    assert "cold_tier" not in plain and all("cold" not in c for c in plain["cells"])


HOSTS = (
    _caps("x86-hmat-memonly.xml"),
    make_host("built", cells=2, memory_only_cells=2, memory_only_gib=16, hugepages_1g_gib=0),
)


def _best(host: Host, free: dict[tuple[int, int], int], p: Placement, ask: int) -> set[int]:
    """The memory-only cells the rule may pick for ``p``: eligible, with room, of the best HMAT bandwidth
    (the worst over the VM's cells) and then latency from its cells (computed here from the host alone)."""
    bandwidth, latency = nested(host.hmat.bandwidth_kib_s), nested(host.hmat.latency_ns)
    keys = {}
    for cell in eligible(cold_cells(host), p.cold_tier):
        if not any(ask % s == 0 and free.get((cell.id, s), 0) >= ask // s for s in cell.sizes):
            continue
        bw = min(bandwidth.get(c, {}).get(cell.id, 0) for c in p.host_cells)
        lat = max(latency.get(c, {}).get(cell.id, 1 << 40) for c in p.host_cells)
        dist = sum(host.cell(c).distance_to(cell.id) or 255 for c in p.host_cells)
        keys[cell.id] = (-bw, lat, dist)
    best = min(keys.values(), default=None)
    return {cid for cid, key in keys.items() if key == best}


@settings(max_examples=60, deadline=None)
@given(
    host=st.sampled_from(HOSTS),
    asks=st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from([0, 1, 4, 8, 64]), st.sampled_from(["t1", "t2"])),
        min_size=1, max_size=12,
    ),
)
def test_cold_pages_are_never_overdrawn_and_the_best_rated_cell_with_room_is_chosen(
    host: Host, asks: list[tuple[int, int, str]]
) -> None:
    fleet = _fleet(host)
    placed: list[Placement] = []
    for i, (vcpus, cold_gib, tenant) in enumerate(asks):
        ask = cold_gib * GIB
        free = dict(fleet.state(host.name).cold_free)
        iso = Isolation.CELL if tenant == "t2" else Isolation.CORE
        chosen = place(request(f"v{i}", tenant, vcpus=vcpus, memory_gib=1, cold_memory_kib=ask, isolation=iso),
                       fleet).chosen
        if chosen is None:
            continue
        assert chosen.cold_kib == ask and bool(chosen.cold) == bool(ask)
        if ask:
            assert chosen.cold[0].host_cell in _best(host, free, chosen, ask)
        fleet.add(chosen)
        placed.append(chosen)
        check_fleet([host], placed, {"t1": Isolation.CORE, "t2": Isolation.CELL})
    for p in placed:  # releasing gives every page back
        fleet.remove(p.vm)
    assert fleet.state(host.name).cold_free == fleet.state(host.name).shape.cold_pools


@pytest.mark.parametrize("solver", ["search", "cp-sat"])
def test_a_drain_moves_cold_tiers_only_where_memory_only_pages_are_left(solver: str) -> None:
    from vnuma.placement.rebalance import FleetState, Objective, plan_moves

    a = make_host("a", cells=2, memory_only_cells=1, memory_only_gib=16, hugepages_1g_gib=0)
    b = make_host("b", cells=2, memory_only_cells=1, memory_only_gib=12, hugepages_1g_gib=0)
    fleet = _fleet(a, b)
    placed = []
    for i, cold in enumerate((8, 4, 4)):
        chosen = place(request(f"v{i}", vcpus=2, memory_gib=1, cold_memory_kib=cold * GIB, host="a"), fleet).chosen
        assert chosen is not None
        fleet.add(chosen)
        placed.append(chosen)
    state = FleetState((a, b), tuple(placed), {"t1": Isolation.CORE})
    plan = plan_moves(state, Objective.DRAIN, 5, drain="a", solver=solver)
    moved = [m.placement for m in plan.moves]
    assert len(moved) == 2 and len(plan.left) == 1  # b's 12 GiB take 8 + 4 or 4 + 4, never all 16
    assert all(p.host == "b" and p.cold and p.cold[0].host_cell == 2 for p in moved)
    assert sum(p.cold_kib for p in moved) <= 12 * GIB
    check_fleet([a, b], moved, {"t1": Isolation.CORE})


# --- GPU memory as NUMA nodes: recorded with its GPU, never a cold tier ----------------------

POWER9 = DATA / "hwloc" / "upstream" / "power9-nvidia-gpu-numanodes.xml"
HOT_AND_GPU = "hbm is a hot tier, gpu is a GPU's own memory"


def _gpu_memory(host: Host, gpus: dict[int, str]) -> Host:
    """``host`` with its memory-only cells ``gpus`` turned into those GPUs' own memory."""
    cells = tuple(replace(c, gpu=gpus[c.id], subtype="GPUMemory") if c.id in gpus else c for c in host.cells)
    return replace(host, cells=cells)


def test_hwlocs_power9_snapshot_has_six_gpu_memory_cells_each_naming_its_gpu() -> None:
    host = parse_hwloc(POWER9.read_bytes(), name="p9", what=POWER9.name)
    gpu_cells = {c.id: c.gpu for c in host.cells if c.gpu_memory}
    # hwloc's own expected output (tests/hwloc/linux/nvidiagpunumanodes.kept.output) pairs them so.
    assert gpu_cells == {
        250: "0035:05:00.0", 251: "0035:04:00.0", 252: "0007:00:00.0",
        253: "0006:00:00.0", 254: "0004:06:00.0", 255: "0004:05:00.0",
    }
    gpus = {d.address: d for d in host.devices if d.kind == "gpu"}
    assert set(gpu_cells.values()) == set(gpus)
    assert all(host.cell(i).memory_only and host.cell(i).memory_kib == 15 * GIB for i in gpu_cells)
    # Each GPU is local to the CPU cell of its package, not to its own memory.
    assert {a: d.numa_node for a, d in gpus.items()} == {
        "0004:05:00.0": 0, "0004:06:00.0": 0, "0006:00:00.0": 0,
        "0007:00:00.0": 8, "0035:04:00.0": 8, "0035:05:00.0": 8,
    }
    assert [c.id for c in host.cells if c.cpus] == [0, 8]
    assert [(c.id, c.kind, c.capacity) for c in cold_cells(host)] == [(i, "gpu", False) for i in sorted(gpu_cells)]


@pytest.mark.parametrize("tier", [ColdTier.ANY, ColdTier.CXL], ids=["any", "cxl"])
def test_a_host_whose_only_memory_only_cells_are_gpu_memory_refuses_cold_memory(tier: ColdTier) -> None:
    p9 = parse_hwloc(POWER9.read_bytes(), name="p9")
    built = _gpu_memory(make_host("built", cells=2, memory_only_cells=2), {2: "0000:10:00.0", 3: "0000:20:00.0"})
    for host, seen in ((p9, ", ".join(f"cell {i} gpu" for i in range(250, 256))), (built, "cell 2 gpu, cell 3 gpu")):
        result = place(request("a", vcpus=2, memory_gib=1, cold_memory_kib=GIB, cold_tier=tier), _fleet(host))
        assert result.chosen is None
        (why,) = result.rejections
        kind = "of kind cxl" if tier is ColdTier.CXL else f"of a capacity tier ({HOT_AND_GPU})"
        assert (why.check, why.reason) == ("cold-memory", f"no memory-only cell {kind} for cold memory ({seen})")


def test_gpu_memory_is_passed_over_for_a_plain_memory_only_cell_even_when_it_would_win() -> None:
    # Cell 2 (the lower id, as near as cell 3) would win every tie: as a GPU's memory it is never chosen.
    host = _gpu_memory(make_host("h", cells=2, memory_only_cells=2, memory_only_gib=16), {2: "0000:10:00.0"})
    fleet = _fleet(host)
    for i in range(2):
        chosen = place(request(f"v{i}", vcpus=2, memory_gib=1, cold_memory_kib=8 * GIB), fleet).chosen
        assert chosen is not None and chosen.cold[0].host_cell == 3
        fleet.add(chosen)
    full = place(request("v2", vcpus=2, memory_gib=1, cold_memory_kib=8 * GIB), fleet)
    assert full.chosen is None and "memory-only cell 3 has 0 KiB free" in full.rejections[0].reason
    assert fleet.state(host.name).cold_free[(2, 4)] == 16 * GIB // 4  # untouched
