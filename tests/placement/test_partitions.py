"""GPU partitions in the engine and the ledger: MIG instances at free allowed starts that never overlap, one
vGPU type per GPU, VFs never twice, a GPU never both whole and partitioned, and refusals that say why.

Hosts: the demo host (8 H100 PCIe GPUs on 4 cells) with a MIG geometry for its GPU model (a test copy of
the H100 80GB one), and a two-cell host with an SR-IOV H100 whose VFs carry two vGPU types (cell 0) and a
Tesla M60 offering two types on its physical function (cell 1). The invariants are checked from the
placements and the geometry's tables with set arithmetic, not with the engine's own helpers.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.helpers import check_fleet, request
from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, VmRequest
from vnuma.placement.partitionmodel import PartitionAsk, PartitionAssignment, PartitionKind
from vnuma.placement.partitions import partition_problem, partition_uuid
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.demo import demo_capabilities_path, demo_node_path
from vnuma.sources.migprofiles import parse_profile
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.topology import PAGE_4K, DeviceKind, Host
from vnuma.topology.partitions import with_gpu_profiles

DATA = Path(__file__).resolve().parent.parent / "data"
GEOMETRY = parse_profile((DATA / "gpu-profiles" / "demo-h100-pcie.json").read_text(), "json")
PROFILES = {p.name: p for p in GEOMETRY.profiles}


def _mig_host(name: str = "m") -> Host:
    host = parse_capabilities(demo_capabilities_path().read_bytes(), name=name)
    devices = with_parent_bridges(parse_nodedev_file_content(demo_node_path().read_bytes(), "demo"))
    return with_gpu_profiles(replace(host, devices=devices), [GEOMETRY])


def _vgpu_host(name: str = "v") -> Host:
    host = parse_capabilities((DATA / "capabilities" / "x86-2cell-smt-resctrl.xml").read_bytes(), name=name)
    devices = [
        *parse_nodedev_file_content((DATA / "nodedev" / "gpu-sriov-vfs.xml").read_bytes(), "s"),
        *parse_nodedev_file_content((DATA / "nodedev" / "gpu-mdev-types.xml").read_bytes(), "m"),
    ]
    return replace(host, devices=with_parent_bridges(devices))


MIG, VGPU = _mig_host(), _vgpu_host()
H100_SRIOV, M60 = "0000:3b:00.0", "0000:86:00.0"


def _ask(name: str, kind: PartitionKind | None = None, what: str = "", count: int = 1, **kw: object) -> VmRequest:
    partition = PartitionAsk(kind, what, count) if kind is not None else None
    return request(name, "t1", vcpus=2, memory_gib=1, page_size_kib=PAGE_4K, partition=partition, **kw)


def _placed(fleet: Fleet, req: VmRequest) -> Placement:
    chosen = place(req, fleet).chosen
    assert chosen is not None, req
    fleet.add(chosen)
    return chosen


def test_mig_instances_fill_a_partly_used_gpu_before_a_fresh_one() -> None:
    fleet = Fleet([MIG])
    a = _placed(fleet, _ask("a", PartitionKind.MIG, "3g.40gb"))
    b = _placed(fleet, _ask("b", PartitionKind.MIG, "3g.40gb"))
    (pa,), (pb,) = a.partitions, b.partitions
    assert pa.gpu == pb.gpu and {pa.start, pb.start} == {0, 4}
    home = next(d.numa_node for d in MIG.devices if d.address == pa.gpu)
    assert a.host_cells == (home,) and pa.host_cell == home and pa.guest_cell == 0
    assert pa.gpu not in fleet.free_gpus("m")  # partitioned: no whole-GPU request takes it
    c = _placed(fleet, _ask("c", PartitionKind.MIG, "1g.10gb"))
    assert c.partitions[0].gpu != pa.gpu  # 3g + 3g use 6 of 7 compute slices and all 8 memory slices


def test_a_mig_instance_leaves_the_largest_profile_creatable() -> None:
    fleet = Fleet([MIG])
    (one,) = _placed(fleet, _ask("one", PartitionKind.MIG, "1g.10gb")).partitions
    # On slices 4..7 a 1g instance keeps 4g.40gb (slices 0-3) creatable; below 4 it would not.
    assert one.start == 4
    four = _placed(fleet, _ask("four", PartitionKind.MIG, "4g.40gb")).partitions[0]
    assert (four.gpu, four.start) == (one.gpu, 0)


def test_several_partitions_of_one_vm_and_their_uuids() -> None:
    fleet = Fleet([MIG])
    p = _placed(fleet, _ask("many", PartitionKind.MIG, "2g.20gb", count=4))
    assert [a.uuid for a in p.partitions] == [partition_uuid("many", i) for i in range(4)]
    assert len({a.uuid for a in p.partitions}) == 4
    by_gpu: dict[str, list[int]] = {}
    for a in p.partitions:
        by_gpu.setdefault(a.gpu, []).append(a.start or 0)
    assert sorted(len(v) for v in by_gpu.values()) == [1, 3]  # 3 x 2g fill one GPU (6 of 7 compute)


def test_a_whole_gpu_and_partitions_exclude_each_other() -> None:
    fleet = Fleet([VGPU])
    whole = _placed(fleet, request("whole", "t1", vcpus=2, memory_gib=1, gpus=1, page_size_kib=PAGE_4K,
                                   numa_nodes=1))
    (gpu,) = [d.address for d in whole.devices if d.kind is DeviceKind.GPU]
    kind, what = (PartitionKind.VGPU, "nvidia-18") if gpu == M60 else (PartitionKind.VGPU, "nvidia-1049")
    refused = place(_ask("slice", kind, what), fleet, explain=True)
    assert refused.chosen is None
    assert any(r.check == "partitions" and "passed through whole" in r.reason for r in refused.rejections)
    fleet.remove("whole")
    again = _placed(fleet, _ask("slice", kind, what))
    assert again.partitions[0].gpu == gpu
    problem = partition_problem(fleet.state("v"), replace(whole, vm="whole2"))  # the rule admission asks
    assert problem is not None and f"GPU {gpu} holds partitions" in problem


def test_vgpu_on_vfs_is_one_type_per_gpu_and_each_vf_once() -> None:
    fleet = Fleet([VGPU])
    p = _placed(fleet, _ask("a", PartitionKind.VGPU, "nvidia-1049", count=2))
    assert {a.gpu for a in p.partitions} == {H100_SRIOV}
    vfs = [a.vf for a in p.partitions]
    assert None not in vfs and len(set(vfs)) == 2
    refused = place(_ask("b", PartitionKind.VGPU, "nvidia-1047"), fleet, explain=True)
    assert refused.chosen is None
    assert any("serves vGPU type nvidia-1049" in r.reason for r in refused.rejections)
    q = _placed(fleet, _ask("c", PartitionKind.VGPU, "nvidia-1049", count=2))
    assert not {a.vf for a in q.partitions} & set(vfs)
    full = place(_ask("d", PartitionKind.VGPU, "nvidia-1049"), fleet, explain=True)
    assert full.chosen is None and any("instances taken" in r.reason for r in full.rejections)


def test_vgpu_on_the_physical_function_counts_its_instances() -> None:
    fleet = Fleet([VGPU])
    for i in range(2):
        (a,) = _placed(fleet, _ask(f"q{i}", PartitionKind.VGPU, "nvidia-18")).partitions
        assert (a.gpu, a.vf) == (M60, None)
    refused = place(_ask("q2", PartitionKind.VGPU, "nvidia-18"), fleet, explain=True)
    assert refused.chosen is None
    fleet.remove("q0")
    assert place(_ask("q2", PartitionKind.VGPU, "nvidia-18"), fleet).chosen is not None


def test_unknown_types_and_models_without_a_geometry_are_refused_by_name() -> None:
    """A vGPU type or MIG profile no GPU of the fleet offers is bad input (exit 4), whatever host it is asked of;
    a host without it, in a fleet where another offers it, is a rejection."""
    for host, kind, what, words in (
        (VGPU, PartitionKind.VGPU, "nvidia-999", "no GPU of the fleet offers vGPU type 'nvidia-999'"),
        (VGPU, PartitionKind.MIG, "3g.40gb", "no MIG geometry kept: `vnuma gpu-profile import`"),
        (MIG, PartitionKind.MIG, "5g.50gb", "no GPU of the fleet offers MIG profile '5g.50gb'"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            place(_ask("x", kind, what), Fleet([host]), explain=True)
        assert words in str(caught.value)
    result = place(_ask("x", PartitionKind.VGPU, "nvidia-18", host=MIG.name), Fleet([MIG, VGPU]), explain=True)
    assert result.chosen is None
    assert [r.reason for r in result.rejections if r.check == "partitions"] == [
        "no GPU offers vgpu nvidia-18 (its GPUs offer no vGPU type)"]


def test_admission_refuses_an_overlapping_mig_instance() -> None:
    fleet = Fleet([MIG])
    p = _placed(fleet, _ask("a", PartitionKind.MIG, "4g.40gb"))
    (a,) = p.partitions
    clash = PartitionAssignment(PartitionKind.MIG, a.gpu, "2g.20gb", partition_uuid("b", 0), 0, a.host_cell, None, 2)
    other = place(_ask("b", PartitionKind.MIG, "2g.20gb"), fleet).chosen
    assert other is not None
    refused = fleet.admit(replace(other, partitions=(clash,)))
    assert refused is not None and refused.check == "partitions" and "does not fit" in refused.reason


# ----------------------------------------------------------------------- properties ----

ASKS = st.one_of(
    st.tuples(st.just("mig"), st.sampled_from(sorted(PROFILES)), st.integers(1, 3)),
    st.tuples(st.just("vgpu"), st.sampled_from(["nvidia-1047", "nvidia-1049", "nvidia-11", "nvidia-18"]),
              st.integers(1, 3)),
    st.tuples(st.just("whole"), st.just(""), st.integers(1, 2)),
    st.tuples(st.just("release"), st.just(""), st.integers(0, 20)),
)


def _check_partitions(hosts: list[Host], placed: list[Placement]) -> None:
    """The rule's invariants, worked out here from the placements and the tables."""
    device = {(h.name, d.address): d for h in hosts for d in h.devices}
    whole = {(p.host, d.address) for p in placed for d in p.devices if d.kind is DeviceKind.GPU}
    by_gpu: dict[tuple[str, str], list[PartitionAssignment]] = {}
    for p in placed:
        for a in p.partitions:
            by_gpu.setdefault((p.host, a.gpu), []).append(a)
    uuids = [a.uuid for parts in by_gpu.values() for a in parts]
    assert len(uuids) == len(set(uuids))
    for key, parts in by_gpu.items():
        assert key not in whole, f"GPU {key} both whole and partitioned"
        kinds = {(a.kind, a.name if a.kind is PartitionKind.VGPU else "") for a in parts}
        assert len(kinds) == 1, f"GPU {key} serves {kinds}"
        if parts[0].kind is PartitionKind.MIG:
            spans = [set(range(a.start or 0, (a.start or 0) + PROFILES[a.name].memory_slices)) for a in parts]
            assert all(a.start in PROFILES[a.name].starts for a in parts)
            assert sum(len(s) for s in spans) == len(set().union(*spans)) <= GEOMETRY.memory_slices
            assert sum(PROFILES[a.name].compute_slices for a in parts) <= GEOMETRY.compute_slices
        else:
            vfs = [a.vf for a in parts if a.vf is not None]
            assert len(vfs) == len(set(vfs))
            assert all(device[(key[0], vf)].pf == key[1] for vf in vfs)
            gpu = device[key]
            on_pf = sum(1 for a in parts if a.vf is None)
            assert on_pf <= sum(t.available for t in gpu.mdev_types if t.id == parts[0].name)


@settings(max_examples=60, deadline=None)
@given(st.lists(ASKS, min_size=1, max_size=25), st.sampled_from(["pack", "gpu-first"]))
def test_partitions_never_overlap_or_mix(asks: list[tuple[str, str, int]], strategy: str) -> None:
    from vnuma.placement.objectives import Strategy

    hosts = [_mig_host("m1"), _vgpu_host("v1")]
    fleet = Fleet(hosts)
    placed: dict[str, Placement] = {}
    for i, (kind, what, n) in enumerate(asks):
        if kind == "release":
            if placed:
                name = sorted(placed)[n % len(placed)]
                fleet.remove(name)
                del placed[name]
            continue
        if kind == "whole":
            req = request(f"w{i}", "t1", vcpus=2, memory_gib=1, gpus=n, page_size_kib=PAGE_4K, numa_nodes=1)
        else:
            req = _ask(f"p{i}", PartitionKind(kind), what, n)
        result = place(req, fleet, Strategy(strategy), explain=True)
        if result.chosen is None:
            assert result.rejections
            continue
        p = result.chosen
        assert len(p.partitions) == (n if kind != "whole" else 0)
        fleet.add(p)
        placed[p.vm] = p
        _check_partitions(hosts, list(placed.values()))
    check_fleet(hosts, list(placed.values()), {})


@pytest.mark.parametrize("kind", [PartitionKind.MIG, PartitionKind.VGPU])
def test_a_released_vm_gives_its_gpu_back_whole(kind: PartitionKind) -> None:
    host = MIG if kind is PartitionKind.MIG else VGPU
    fleet = Fleet([host])
    before = fleet.free_gpus(host.name)
    what = "7g.80gb" if kind is PartitionKind.MIG else "nvidia-1047"
    p = _placed(fleet, _ask("a", kind, what))
    assert p.partitions[0].gpu not in fleet.free_gpus(host.name)
    fleet.remove("a")
    assert fleet.free_gpus(host.name) == before


@pytest.mark.parametrize("strategy", ["pack", "gpu-first", "first-fit"])
def test_the_partition_example_simulated_keeps_the_rule(strategy: str) -> None:
    from vnuma.placement.objectives import Strategy
    from vnuma.simulate import load_trace, run

    path = Path(__file__).resolve().parents[2] / "examples" / "traces" / "gpu-partitions.json"
    trace = load_trace(path.read_bytes(), str(path))
    report = run(trace, Strategy(strategy))
    placed = [p for p in report.placements if p is not None]
    asked = {r.name: r for r in trace.requests}
    assert report.partition_placed > 0 and report.gpus_partitioned > 0
    for p in placed:
        r = asked[p.vm]
        assert len(p.partitions) == (r.partition.count if r.partition else 0)
        assert all(a.host_cell in p.host_cells and a.name == r.partition.name for a in p.partitions)  # type: ignore[union-attr]
    _check_partitions(list(trace.hosts), placed)


def test_partitions_round_trip_through_the_placement_json() -> None:
    fleet = Fleet([MIG, VGPU])
    mig = _placed(fleet, _ask("a", PartitionKind.MIG, "3g.40gb", 2))
    vgpu = _placed(fleet, _ask("b", PartitionKind.VGPU, "nvidia-1049", 1, host="v"))
    assert vgpu.partitions[0].vf is not None
    for p in (mig, vgpu):
        doc = json.loads(json.dumps(placement_to_dict(p)))
        entries = [e for e in doc["devices"] if e["kind"] in ("mig", "vgpu")]
        name_key = "profile" if p is mig else "type"
        assert [set(e) for e in entries] == [
            {"kind", "gpu", "vf", name_key, "start", "uuid", "guest_cell", "host_cell"}
        ] * len(p.partitions)
        assert placement_from_dict(doc) == p
    old = {**placement_to_dict(mig), "devices": []}  # a document written before partitions were recorded
    assert placement_from_dict(old).partitions == ()


def test_a_move_asks_for_the_same_partitions() -> None:
    fleet = Fleet([MIG])
    p = _placed(fleet, _ask("a", PartitionKind.MIG, "3g.40gb", 2))
    assert move_request(p, Isolation.CORE).partition == PartitionAsk(PartitionKind.MIG, "3g.40gb", 2)
    whole = _placed(fleet, _ask("b", gpus=1))
    assert move_request(whole, Isolation.CORE).partition is None
