"""GPUs stranded for RDMA: a VM without NICs takes first the GPUs no later RDMA VM could use, and a multi-cell
VM asking NICs takes its GPUs where the NICs are, in whatever guest order its cells come.

The host is the ``shared-nics`` scenario's (per socket two switches, each with two GPUs and one NIC, on two
root complexes). Outcomes are judged with the hosts' own ``pcie_level``, never with the engine's matching.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.helpers import check_fleet, request
from vnuma.placement.engine import place
from vnuma.placement.gpus import strands_gpus
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.nicchoice import rdma_ready
from vnuma.placement.nics import within
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace
from vnuma.sources.tracegen import generate
from vnuma.topology import PAGE_4K, DeviceKind, Host, PciDevice
from vnuma.topology.pcie import Level, pcie_level

HOSTS = load_trace(generate("shared-nics", 42).encode(), "shared-nics").hosts[:2]
HOST = HOSTS[0]
DEVICE = {d.address: d for d in HOST.devices}


def _ask(name: str, gpus: int, nodes: int = 1, **kw: object) -> VmRequest:
    return request(name, "t1", vcpus=2 * nodes, memory_gib=nodes, gpus=gpus, numa_nodes=nodes,
                   page_size_kib=PAGE_4K, **kw)


def _of(p: Placement, kind: DeviceKind) -> list[PciDevice]:
    return [DEVICE[d.address] for d in p.devices if d.kind is kind]


def _nics_with_a_free_pix_gpu(host: Host, held: set[str], cell: int) -> int:
    gpus = [d for d in host.devices if d.kind is DeviceKind.GPU and d.numa_node == cell and d.address not in held]
    nics = [d for d in host.devices if d.kind is DeviceKind.NIC and d.numa_node == cell and d.address not in held]
    return sum(1 for n in nics if any(pcie_level(g, n) is Level.PIX for g in gpus))


def test_the_host_shares_each_nic_between_two_gpus() -> None:
    gpus, nics = HOST.devices_of(DeviceKind.GPU), HOST.devices_of(DeviceKind.NIC)
    assert (len(gpus), len(nics)) == (8, 4)
    assert all(sum(pcie_level(g, n) is Level.PIX for g in gpus) == 2 for n in nics)


def test_a_vm_without_nics_takes_one_gpu_of_each_switch_so_both_nics_keep_a_gpu() -> None:
    fleet = Fleet([HOST])
    p = place(_ask("plain", 2), fleet).chosen
    assert p is not None
    a, b = _of(p, DeviceKind.GPU)
    assert a.numa_node == b.numa_node and pcie_level(a, b) is Level.NODE  # not the two GPUs of one switch
    held = {d.address for d in p.devices}
    assert _nics_with_a_free_pix_gpu(HOST, held, a.numa_node) == 2
    fleet.add(p)
    for i in range(2):  # so two RDMA VMs still get a GPU and its switch's NIC on that cell
        q = place(_ask(f"rdma{i}", 1, nics_per_gpu=True, nic_affinity=Level.PIX), fleet).chosen
        assert q is not None
        fleet.add(q)
    assert not {d.address for d in HOST.devices_of(DeviceKind.GPU) if d.numa_node == a.numa_node} & set(
        fleet.free_gpus(HOST.name))


def test_a_gpu_whose_switch_nic_is_taken_is_not_ready_for_rdma() -> None:
    fleet = Fleet([HOST])
    p = place(_ask("rdma", 1, nics_per_gpu=True, nic_affinity=Level.PIX), fleet).chosen
    assert p is not None
    fleet.add(p)
    (gpu,) = _of(p, DeviceKind.GPU)
    (nic,) = _of(p, DeviceKind.NIC)
    hs = fleet.state(HOST.name)
    free = hs.cell_by_id[gpu.numa_node].gpus_free
    mate = next(a for a in free if pcie_level(DEVICE[a], nic) is Level.PIX)
    ready = rdma_ready(hs, free, Level.PIX)
    assert mate not in ready and len(ready) == 1  # the cell's other switch: one of its two GPUs
    plain = place(_ask("plain", 1), fleet).chosen
    assert plain is not None and [d.address for d in plain.devices] == [mate]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 4),
            st.sampled_from([1, 2]),
            st.sampled_from(["per-gpu", 0, 1, 2]),
            st.sampled_from([Level.PIX, Level.PXB, Level.NODE, Level.SYS]),
            st.sampled_from(list(Strategy)),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_multi_cell_vms_get_nics_within_their_level_or_a_refusal(
    asks: list[tuple[int, int, object, Level, Strategy]],
) -> None:
    fleet = Fleet(list(HOSTS))
    placed: list[Placement] = []
    for i, (gpus, nodes, nics, level, strategy) in enumerate(asks):
        req = _ask(f"v{i}", gpus, nodes, nics_per_gpu=nics == "per-gpu", nics=0 if nics == "per-gpu" else nics,
                   nic_affinity=level)
        result = place(req, fleet, strategy, explain=True)
        if result.chosen is None:
            assert result.rejections
            continue
        p = result.chosen
        gpu_list, nic_list = _of(p, DeviceKind.GPU), _of(p, DeviceKind.NIC)
        assert len(gpu_list) == gpus
        if nics == "per-gpu":
            assert len(nic_list) == gpus
            assert all(any(within(pcie_level(g, n), level) for n in nic_list) for g in gpu_list)
        else:
            assert len(nic_list) == nics
            assert all(any(within(pcie_level(g, n), level) for g in gpu_list) for n in nic_list)
        fleet.add(p)
        placed.append(p)
    check_fleet(list(HOSTS), placed, {})


def _strands(fleet: Fleet, p: Placement) -> bool:
    """Whether some cell of ``p``'s has free GPUs short of pCPUs now that ``p`` holds its share (gpu-first's
    promise to the GPU VMs to come), judged on the ledger after the add."""
    zero = [0] * len(p.host_cells)
    return strands_gpus(fleet.state(p.host), p.host_cells, zero, zero)


@settings(max_examples=25)
@given(seed=st.integers(0, 10**6), scenario=st.sampled_from(["shared-nics", "dgx-nics"]))
def test_under_gpu_first_the_gpus_a_vm_leaves_keep_their_pcpu_share_as_the_fit_judged(
    seed: int, scenario: str
) -> None:
    """The stranding test asks the builder's own GPU split (NICs asked take their GPUs where the NICs are):
    every GPU VM placed under gpu-first leaves its cells' free GPUs their share of pCPUs."""
    trace = load_trace(generate(scenario, seed).encode(), f"{scenario}:{seed}")
    fleet = Fleet(trace.hosts[:2])
    for r in trace.requests:
        p = place(r, fleet, Strategy.GPU_FIRST, explain=False).chosen
        if p is None:
            continue
        fleet.add(p)
        if r.gpus:
            assert not _strands(fleet, p), (p.vm, p.host, p.host_cells, p.devices)
