"""Cell choice by HMAT: where the host's HMAT rates its CPU cells, the rated bandwidth (then latency) between
the cells of a set decides before SLIT; without it, SLIT decides as before. ``--explain`` says which did."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations, product

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.objectives import Strategy
from vnuma.topology import Host
from vnuma.topology.hmat import Hmat
from vnuma.topology.hostcheck import check_host
from vnuma.topology.tiers import UNRATED_LATENCY_NS, cpu_cell_ratings

GB = 1024 * 1024  # KiB/s per GiB/s


def _with_hmat(host: Host, bandwidth: dict[tuple[int, int], int], latency: dict[tuple[int, int], int]) -> Host:
    return replace(host, hmat=Hmat(
        latency_ns=tuple(sorted((i, t, v) for (i, t), v in latency.items())),
        bandwidth_kib_s=tuple(sorted((i, t, v) for (i, t), v in bandwidth.items())),
    ))


def _snc4(bandwidth: dict[tuple[int, int], int], latency: dict[tuple[int, int], int] | None = None) -> Host:
    """One socket split in 4 cells (SLIT 10/12: every pair alike), rated by HMAT as given (every ordered pair
    of CPU cells, 100 GB/s and 100 ns unless named)."""
    host = make_host("h", cells=4, cells_per_socket=4, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8)
    pairs = list(product(range(4), repeat=2))
    bw = {p: bandwidth.get(p, bandwidth.get(p[::-1], 100 * GB)) for p in pairs}
    lat = {p: (latency or {}).get(p, (latency or {}).get(p[::-1], 100)) for p in pairs}
    return _with_hmat(host, bw, lat)


def _place(host: Host, nodes: int, **kw: object):
    return place(request("vm", vcpus=2 * nodes, memory_gib=nodes, numa_nodes=nodes, **kw), Fleet([host]),
                 Strategy.PACK, explain=True)


def test_hmat_bandwidth_picks_the_pair_slit_cannot_tell_apart() -> None:
    host = _snc4({(2, 3): 180 * GB})
    result = _place(host, 2)
    assert result.chosen is not None and sorted(result.chosen.host_cells) == [2, 3]
    assert result.cells_decided_by == "hmat-bandwidth"
    plain = _place(replace(host, hmat=Hmat()), 2)
    assert plain.chosen is not None and plain.cells_decided_by != "hmat-bandwidth"
    assert sorted(plain.chosen.host_cells) != [2, 3]  # by SLIT every pair ties: ids/preference decide


def test_latency_decides_between_equal_bandwidths() -> None:
    host = _snc4({}, {(1, 3): 60})
    result = _place(host, 2)
    assert result.chosen is not None and sorted(result.chosen.host_cells) == [1, 3]
    assert result.cells_decided_by == "hmat-latency"


def test_one_cell_goes_where_its_own_memory_is_rated_best() -> None:
    host = _snc4({(2, 2): 300 * GB})
    result = _place(host, 1)
    assert result.chosen is not None and result.chosen.host_cells == (2,)
    assert result.cells_decided_by == "hmat-local-bandwidth"


def test_bandwidth_comes_before_slit() -> None:
    """Two sockets of two cells: HMAT rates the cross-socket pair 0-2 best; it wins over SLIT's 12."""
    host = make_host("h", cells=4, cells_per_socket=2, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8)
    bw = {(i, t): (200 if {i, t} == {0, 2} or i == t else 50) * GB for i, t in product(range(4), repeat=2)}
    result = _place(_with_hmat(host, bw, {}), 2)
    assert result.chosen is not None and sorted(result.chosen.host_cells) == [0, 2]
    assert result.cells_decided_by == "hmat-bandwidth"


def test_unrated_pairs_leave_it_to_slit() -> None:
    """HMAT rating each cell's own memory only (what the kernel's access classes give libvirt): sets of two
    cells tie on HMAT, so SLIT keeps the VM on one socket."""
    host = make_host("h", cells=3, cells_per_socket=2, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8)
    own = {(c, c): 100 * GB for c in range(3)}
    result = _place(_with_hmat(host, own, {(c, c): 90 for c in range(3)}), 2)
    assert result.chosen is not None and sorted(result.chosen.host_cells) == [0, 1]
    assert result.cells_decided_by == "slit-distance"


def test_without_hmat_slit_decides() -> None:
    host = make_host("h", cells=3, cells_per_socket=2, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8)
    result = _place(host, 2)
    assert result.chosen is not None and sorted(result.chosen.host_cells) == [0, 1]
    assert result.cells_decided_by == "slit-distance"
    twins = _place(make_host("h", cells=4, cells_per_socket=2, cores_per_cell=4, memory_gib=16), 2)
    assert twins.chosen is not None and sorted(twins.chosen.host_cells) == [0, 1]
    assert twins.cells_decided_by == "cell-ids"  # the other socket's pair is as close
    alone = _place(make_host("h", cells=1, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8), 1)
    assert alone.cells_decided_by == "only-choice"


def test_cpu_cells_are_ranked_by_cpu_initiators_only() -> None:
    """A Grace-Blackwell-like host: two CPU cells and each GPU's memory (cells 2 and 3, no CPUs), HMAT naming
    the GPUs as initiators too. The GPUs read cell 0's memory far faster than the CPUs read either cell's:
    counted, that would pull the VM to cell 0; the CPUs rate cell 1 best, and there it goes."""
    built = make_host("h", cells=2, cores_per_cell=4, memory_gib=16, hugepages_1g_gib=8, memory_only_cells=2,
                      memory_only_gib=16, gpus_per_cell=1)
    gpus = [d.address for d in built.devices]
    cells = tuple(replace(c, gpu=gpus[c.id - 2], subtype="GPUMemory") if c.id >= 2 else c for c in built.cells)
    cpu = {(0, 0): 100 * GB, (1, 1): 150 * GB, (0, 1): 40 * GB, (1, 0): 40 * GB}
    by_gpus = {(2, 0): 900 * GB, (3, 0): 900 * GB, (2, 2): 4000 * GB, (3, 3): 4000 * GB, (2, 1): 10 * GB}
    host = check_host(_with_hmat(replace(built, cells=cells), cpu | by_gpus, {}))
    assert host_from_dict(host_to_dict(host)) == host  # a valid host, stored and read back
    assert cpu_cell_ratings(host) == {p: (v, UNRATED_LATENCY_NS) for p, v in cpu.items()}
    result = _place(host, 1)
    assert result.chosen is not None and result.chosen.host_cells == (1,)
    assert result.cells_decided_by == "hmat-local-bandwidth"
    assert _place(host, 2).chosen is not None


@st.composite
def rated_hosts(draw: st.DrawFn) -> Host:
    """2-6 CPU cells on 1 or 2 sockets, HMAT rating every ordered pair with figures from a few levels."""
    cells = draw(st.integers(2, 6))
    per_socket = draw(st.sampled_from((cells, max(1, cells // 2))))
    host = make_host("h", cells=cells, cells_per_socket=per_socket, cores_per_cell=2, memory_gib=8,
                     hugepages_1g_gib=4)
    pairs = list(product(range(cells), repeat=2))
    levels = st.sampled_from((50, 80, 100, 150, 200))
    bw = {p: draw(levels) * GB for p in pairs}
    lat = {p: draw(st.sampled_from((70, 90, 120, 200))) for p in pairs}
    return _with_hmat(host, bw, lat)


def _rating(host: Host, cells: tuple[int, ...]) -> tuple[int, int]:
    """A set's (lowest bandwidth, highest latency) over the ordered pairs of two of its cells (one cell: its
    own memory's), read from the host's HMAT here."""
    bw = {(i, t): v for i, t, v in host.hmat.bandwidth_kib_s}
    lat = {(i, t): v for i, t, v in host.hmat.latency_ns}
    pairs = [(a, b) for a in cells for b in cells if a != b] or [(cells[0], cells[0])]
    return min(bw[p] for p in pairs), max(lat[p] for p in pairs)


@settings(max_examples=150, deadline=None)
@given(host=rated_hosts(), data=st.data())
def test_no_feasible_set_of_as_many_cells_is_rated_better(host: Host, data: st.DataObject) -> None:
    cells = len(host.cells)
    nodes = data.draw(st.integers(1, min(3, cells)), label="numa_nodes")
    result = _place(host, nodes)
    assert result.chosen is not None
    chosen = tuple(sorted(result.chosen.host_cells))
    assert len(chosen) == nodes
    bandwidth, latency = _rating(host, chosen)
    for other in combinations(range(cells), nodes):  # on an empty host every set of cells can take the VM
        other_bw, other_lat = _rating(host, other)
        assert other_bw <= bandwidth, f"{other} rated {other_bw} > {chosen} {bandwidth}"
        if other_bw == bandwidth:
            assert other_lat >= latency, f"{other} latency {other_lat} < {chosen} {latency}"
