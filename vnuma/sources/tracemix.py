"""The request mix of the example traces: classes of VMs, who asks for what, drawn in a fixed order.

Pure: no I/O; standard library only. Each ``make_*_requests`` function draws a scenario's requests from the
scenario's own random stream (:func:`vnuma.sources.tracegen.scenario_rng`). The order of every draw here
is part of the generator's contract (:mod:`vnuma.sources.tracegen`): reordering two draws, or drawing for
a one-option choice, changes every trace.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from vnuma.sources.traceshapes import PAGE_1G, PAGE_2M

T = TypeVar("T")

MIB_PER_GIB = 1024
TENANTS = tuple(f"tenant-{i:02d}" for i in range(16))
LARGE_SHARE = (0.10, 0.50)

Choices = tuple[tuple[T, float], ...]


@dataclass(frozen=True, slots=True)
class VmClass:
    """A kind of VM in the request mix; each field is a weighted choice (value, weight)."""

    vcpus: Choices[int]
    gib_per_vcpu: Choices[int]
    gib_range: tuple[int, int]
    numa_nodes: int
    gpus: Choices[int]
    page_size_kib: Choices[int]
    thread_policy: Choices[str]


SMALL = VmClass(  # latency-sensitive
    vcpus=((2, 0.30), (4, 0.35), (6, 0.10), (8, 0.25)),
    gib_per_vcpu=((2, 0.5), (4, 0.5)),
    gib_range=(4, 32),
    numa_nodes=1,
    gpus=((0, 1.0),),
    page_size_kib=((PAGE_2M, 0.7), (PAGE_1G, 0.3)),
    thread_policy=(("prefer", 0.70), ("isolate", 0.20), ("require", 0.10)),
)
LARGE = VmClass(  # throughput
    vcpus=((16, 0.25), (24, 0.15), (32, 0.30), (48, 0.15), (64, 0.15)),
    gib_per_vcpu=((4, 0.5), (8, 0.5)),
    gib_range=(64, 512),
    numa_nodes=2,
    gpus=((1, 0.25), (2, 0.35), (3, 0.10), (4, 0.30)),
    page_size_kib=((PAGE_1G, 0.8), (PAGE_2M, 0.2)),
    thread_policy=(("prefer", 0.85), ("isolate", 0.05), ("require", 0.10)),
)


def pick(rng: random.Random, choices: Choices[T]) -> T:
    """A weighted choice; a single option takes no draw from ``rng``."""
    if len(choices) == 1:
        return choices[0][0]
    left = rng.random() * sum(weight for _, weight in choices)
    for value, weight in choices:
        left -= weight
        if left < 0:
            return value
    return choices[-1][0]  # float rounding left a sliver past the last weight


def make_request(rng: random.Random, index: int, tenant: str, kind: VmClass) -> dict[str, Any]:
    """One request of ``kind``; draws vCPUs, GiB per vCPU, GPUs, page size, thread policy, in that order."""
    vcpus = pick(rng, kind.vcpus)
    low, high = kind.gib_range
    memory_mib = min(high, max(low, vcpus * pick(rng, kind.gib_per_vcpu))) * MIB_PER_GIB
    gpus = pick(rng, kind.gpus)
    page = pick(rng, kind.page_size_kib)
    thread = pick(rng, kind.thread_policy)
    nodes = kind.numa_nodes
    assert vcpus % nodes == 0 and memory_mib % nodes == 0, "a VM class that does not split evenly"
    assert memory_mib // nodes * 1024 % page == 0, "a VM class whose guest nodes are not whole pages"
    return {
        "tenant": tenant,
        "name": f"{tenant}-vm-{index:06d}",
        "vcpus": vcpus,
        "memory_mib": memory_mib,
        "numa_nodes": nodes,
        "cpu_policy": "dedicated",
        "thread_policy": thread,
        "page_size_kib": page,
        "gpus": gpus,
    }


DGX_LARGE = VmClass(  # inference servers on a DGX: up to the whole host's 8 GPUs
    vcpus=((16, 0.20), (32, 0.30), (48, 0.20), (64, 0.20), (96, 0.10)),
    gib_per_vcpu=((4, 0.5), (8, 0.5)),
    gib_range=(64, 768),
    numa_nodes=2,
    gpus=((1, 0.30), (2, 0.30), (4, 0.25), (8, 0.15)),
    page_size_kib=((PAGE_1G, 0.8), (PAGE_2M, 0.2)),
    thread_policy=(("prefer", 0.85), ("isolate", 0.05), ("require", 0.10)),
)


def make_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` requests in arrival order; each tenant gets its own share of large VMs (10 %..50 %)."""
    return _requests(rng, count, cold=False)


@dataclass(frozen=True, slots=True)
class ColdMix:
    """Who asks for a cold tier (share per VM class), how much (a fraction of its memory), from which tier."""

    share: Mapping[str, float]
    fraction: Choices[tuple[int, int]]
    tier: Choices[str]


COLD = ColdMix(  # inference: KV-cache and model-weight spill for large VMs, a little for small ones
    share={"large": 0.60, "small": 0.20},
    fraction=(((1, 2), 0.4), ((1, 1), 0.4), ((2, 1), 0.2)),
    tier=(("any", 0.6), ("cxl", 0.4)),
)


def make_cold_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """As :func:`make_requests`, and after each request's own draws: does it ask a cold tier (share of its
    class), then what fraction of its memory (1/2, 1 or 2 x, a whole number of GiB), then which tier."""
    return _requests(rng, count, cold=True)


@dataclass(frozen=True, slots=True)
class NicMix:
    """Who asks for NICs (a share of the VMs with GPUs), how many (``per-gpu`` or a count), within which
    PCIe level of their GPUs, and whether whole NICs (``pf``) or SR-IOV virtual functions (``vf``)."""

    share: float
    count: Choices[int | str]
    affinity: Choices[str]
    function: Choices[str]


NICS = NicMix(  # GPUDirect RDMA: mostly a NIC per GPU under its switch, some anywhere NCCL still takes
    share=0.75,
    count=(("per-gpu", 0.85), (1, 0.15)),
    affinity=(("pix", 0.40), ("pxb", 0.45), ("node", 0.10), ("sys", 0.05)),
    function=(("pf", 0.85), ("vf", 0.15)),
)


def make_nic_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """As :func:`make_requests` with :data:`DGX_LARGE` for the large VMs, and after each request's own draws,
    for one with GPUs: does it ask NICs (:data:`NICS` share), then how many, within which level, PF or VF."""
    return _requests(rng, count, cold=False, large=DGX_LARGE, nics=NICS)


SHARED_NICS = NicMix(  # half the GPU VMs serve over RDMA, a NIC per GPU under its switch or on its root complex
    share=0.50,
    count=(("per-gpu", 0.90), (1, 0.10)),
    affinity=(("pix", 0.50), ("pxb", 0.50)),
    function=(("pf", 1.0),),
)


def make_shared_nic_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """As :func:`make_nic_requests` with the :data:`SHARED_NICS` mix (whole NICs only)."""
    return _requests(rng, count, cold=False, large=DGX_LARGE, nics=SHARED_NICS)


@dataclass(frozen=True, slots=True)
class PartitionMix:
    """Who asks for GPU partitions (a share of the VMs without GPUs), MIG or vGPU, which profile or type, how
    many."""

    share: float
    kind: Choices[str]
    profile: Choices[str]
    vgpu: Choices[str]
    count: Choices[int]


PARTITIONS = PartitionMix(  # small-model inference tenants: a fraction of an H100 each
    share=0.60,
    kind=(("mig", 0.60), ("vgpu", 0.40)),
    profile=(("1g.10gb", 0.40), ("2g.20gb", 0.30), ("3g.40gb", 0.20), ("4g.40gb", 0.10)),
    vgpu=(("nvidia-h100-10c", 0.50), ("nvidia-h100-20c", 0.35), ("nvidia-h100-40c", 0.15)),
    count=((1, 0.85), (2, 0.15)),
)


PARTITION_LARGE = VmClass(  # inference servers of mid-size models: half need no whole GPU
    vcpus=((8, 0.30), (16, 0.40), (32, 0.30)),
    gib_per_vcpu=((4, 0.5), (8, 0.5)),
    gib_range=(32, 256),
    numa_nodes=1,
    gpus=((0, 0.50), (1, 0.30), (2, 0.15), (4, 0.05)),
    page_size_kib=((PAGE_1G, 0.8), (PAGE_2M, 0.2)),
    thread_policy=(("prefer", 0.85), ("isolate", 0.05), ("require", 0.10)),
)


def make_partition_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """As :func:`make_requests` with :data:`PARTITION_LARGE` for the large VMs, and after each request's own
    draws, for one without GPUs: does it ask partitions (:data:`PARTITIONS` share), then MIG or vGPU, then
    which profile or type, then how many (``"NAME:COUNT"`` when more than one)."""
    return _requests(rng, count, cold=False, large=PARTITION_LARGE, partitions=PARTITIONS)


def _requests(
    rng: random.Random, count: int, *, cold: bool, large: VmClass = LARGE, nics: NicMix | None = None,
    partitions: PartitionMix | None = None,
) -> list[dict[str, Any]]:
    large_share = {t: round(rng.uniform(*LARGE_SHARE), 3) for t in TENANTS}
    requests = []
    for index in range(count):
        tenant = rng.choice(TENANTS)
        kind = large if rng.random() < large_share[tenant] else SMALL
        request = make_request(rng, index, tenant, kind)
        if cold and rng.random() < COLD.share["large" if kind is large else "small"]:
            num, den = pick(rng, COLD.fraction)
            cold_mib = request["memory_mib"] * num // den
            assert cold_mib % MIB_PER_GIB == 0, "a cold fraction that is not a whole number of GiB"
            request["cold_memory_mib"] = cold_mib
            request["cold_tier"] = pick(rng, COLD.tier)
        if nics is not None and request["gpus"] and rng.random() < nics.share:
            request["nics"] = pick(rng, nics.count)
            request["nic_affinity"] = pick(rng, nics.affinity)
            request["nic_function"] = pick(rng, nics.function)
        if partitions is not None and not request["gpus"] and rng.random() < partitions.share:
            kind = pick(rng, partitions.kind)
            name = pick(rng, partitions.profile if kind == "mig" else partitions.vgpu)
            n = pick(rng, partitions.count)
            request[kind] = name if n == 1 else f"{name}:{n}"
        requests.append(request)
    return requests
