"""IOMMU groups: a GPU's audio function goes with it, and GPUs sharing a group go to one VM or none.

Hosts: the DGX-like host (GPU 0000:13:00.0 and its audio function 0000:13:00.1 in IOMMU group 104), and a
built host whose cell-0 GPUs share one group (a switch without ACS).
"""

from __future__ import annotations

from dataclasses import replace

from tests.builders import make_host
from tests.placement.helpers import check_fleet, request
from tests.placement.test_nics import DGX
from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.placement.engine import place
from vnuma.placement.iommu import companions
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.rebalance import is_movable
from vnuma.render.domain import render_domain
from vnuma.topology import DeviceKind, Host

GPU, AUDIO = "0000:13:00.0", "0000:13:00.1"


def _fleet(host: Host) -> Fleet:
    return Fleet([host], [], [Tenant("t1")])


def _with_gpu(host: Host, fleet: Fleet, address: str) -> Placement:
    """The engine's placement of a one-GPU VM that gets ``address`` (the other GPUs of its cell held first)."""
    home = next(d.numa_node for d in host.devices if d.address == address)
    others = sorted(d.address for d in host.devices if d.kind is DeviceKind.GPU and d.numa_node == home
                    and d.address < address)
    if others:
        holder = place(request("holder", vcpus=2, memory_gib=1, gpus=len(others)), fleet).chosen
        assert holder is not None and {d.address for d in holder.devices if d.kind is DeviceKind.GPU} == set(others)
        fleet.add(holder)
    chosen = place(request("vm", vcpus=2, memory_gib=1, gpus=1), fleet).chosen
    assert chosen is not None
    return chosen


def test_a_gpu_takes_its_audio_function_along_and_gives_it_back() -> None:
    assert companions({d.address: d for d in DGX.devices}, GPU) == (AUDIO,)
    fleet = _fleet(DGX)
    p = _with_gpu(DGX, fleet, GPU)
    gpu, audio = (next(d for d in p.devices if d.address == a) for a in (GPU, AUDIO))
    assert (audio.kind, audio.peer_of, audio.guest_cell, audio.host_cell) == (
        DeviceKind.OTHER, GPU, gpu.guest_cell, gpu.host_cell)
    fleet.add(p)
    assert fleet.state(DGX.name).devices_taken[AUDIO] == "vm"
    check_fleet([DGX], list(fleet.placements()), {"t1": Isolation.CORE})
    assert placement_from_dict(placement_to_dict(p)) == p
    assert is_movable(p) and move_request(p, Isolation.CORE).gpus == 1  # the companion follows, never counted
    hostdevs = render_domain(DGX, p).count("<hostdev mode='subsystem' type='pci'")
    assert hostdevs == len(p.devices) == 2
    fleet.remove("vm")
    assert AUDIO not in fleet.state(DGX.name).devices_taken


def test_a_placement_without_the_companion_splits_the_group_and_is_refused() -> None:
    fleet = _fleet(DGX)
    p = _with_gpu(DGX, fleet, GPU)
    split = replace(p, devices=tuple(d for d in p.devices if d.address != AUDIO))
    refusal = fleet.admit(split)
    assert refusal is not None and refusal.check == "iommu-group"
    assert f"gpu {GPU} goes with IOMMU group 104 member(s) {AUDIO}" in refusal.reason


def _no_acs() -> Host:
    """Two GPUs per cell; cell 0's share IOMMU group 7."""
    host = make_host("noacs", cells=2, gpus_per_cell=2, hugepages_1g_gib=0)
    gpus = sorted(d.address for d in host.devices if d.kind is DeviceKind.GPU and d.numa_node == 0)
    devices = tuple(
        replace(d, iommu_group=7, iommu_peers=tuple(g for g in gpus if g != d.address)) if d.address in gpus else d
        for d in host.devices
    )
    return replace(host, devices=devices)


def test_gpus_sharing_a_group_go_together_or_not_at_all() -> None:
    host = _no_acs()
    pair = sorted(d.address for d in host.devices if d.iommu_group == 7)
    fleet = _fleet(host)
    # A one-GPU VM passes over cell 0, whose free GPUs would only give one by splitting the group.
    alone = place(request("alone", vcpus=2, memory_gib=1, gpus=1), fleet, explain=True).chosen
    assert alone is not None and alone.host_cells == (1,) and alone.devices[0].address not in pair
    both = place(request("both", vcpus=2, memory_gib=1, gpus=2, numa_nodes=1), fleet).chosen
    assert both is not None and sorted(d.address for d in both.devices) == pair  # one VM holds the group
    fleet.add(both)
    one = place(request("one", vcpus=2, memory_gib=1, gpus=1), fleet).chosen
    assert one is not None and one.devices[0].address not in pair and one.devices[0].host_cell == 1
    fleet.add(one)
    check_fleet([host], list(fleet.placements()), {"t1": Isolation.CORE})


def test_a_cells_gpus_are_taken_in_whole_groups_where_the_count_allows() -> None:
    host = make_host("mixed", cells=1, gpus_per_cell=3, hugepages_1g_gib=0)
    gpus = sorted(d.address for d in host.devices if d.kind is DeviceKind.GPU)
    pair, solo = gpus[:2], gpus[2]
    host = replace(host, devices=tuple(
        replace(d, iommu_group=7, iommu_peers=tuple(g for g in pair if g != d.address)) if d.address in pair else d
        for d in host.devices
    ))
    for want, expected in ((1, [solo]), (2, pair), (3, gpus)):
        chosen = place(request(f"v{want}", vcpus=2, memory_gib=1, gpus=want), _fleet(host)).chosen
        assert chosen is not None and sorted(d.address for d in chosen.devices) == sorted(expected), want
    fleet = _fleet(host)
    first = place(request("first", vcpus=2, memory_gib=1, gpus=1), fleet).chosen
    assert first is not None
    fleet.add(first)  # the solo GPU: the pair is left whole for the next VM
    second = place(request("second", vcpus=2, memory_gib=1, gpus=2), fleet).chosen
    assert second is not None and sorted(d.address for d in second.devices) == pair


def test_a_host_whose_free_gpus_all_share_a_group_refuses_fewer_naming_the_group() -> None:
    host = _no_acs()
    one_cell = replace(host, cells=host.cells[:1], devices=tuple(d for d in host.devices if d.numa_node == 0))
    pair = sorted(d.address for d in one_cell.devices if d.kind is DeviceKind.GPU)
    result = place(request("alone", vcpus=2, memory_gib=1, gpus=1), _fleet(one_cell), explain=True)
    assert result.chosen is None
    (why,) = result.rejections
    assert why.check == "iommu-group"
    assert f"1 GPU(s) of the cell only by splitting the IOMMU group of {', '.join(pair)}" in why.reason
    both = place(request("both", vcpus=2, memory_gib=1, gpus=2), _fleet(one_cell)).chosen
    assert both is not None and sorted(d.address for d in both.devices) == pair

