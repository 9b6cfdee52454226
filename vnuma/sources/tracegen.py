"""Example workload traces (``numa-placement-trace`` version 1, docs/traces.md): the generator.

Pure: no I/O. :func:`make_trace` builds one scenario's document as a dict,
:func:`render_trace` gives its text, and :func:`generate` does both; the
caller writes the file. Standard library only (``json``, ``random``,
``zlib``).

Deterministic: a (scenario, seed) pair always gives the same bytes, on any
platform and Python 3.11+. Each scenario draws from its own stream, seeded
with ``seed * 1000003 + crc32(name)``, so adding a scenario changes no
other. With seed 42 the output is byte-identical to the example traces
shipped in ``examples/traces/`` (and to the reference files the recorded
OpenStack Nova counts of ``bench/README.md`` were measured on), so the
order of every random draw below is part of the contract: reordering two
draws, or drawing for a one-option choice, changes every trace.

Hosts do not depend on the seed; requests do. Every request satisfies what
the format promises: ``vcpus`` and ``memory_mib`` divide evenly over
``numa_nodes``, and the per-node memory is a whole number of pages of
``page_size_kib``. A scenario with a cold mix (``snc-cxl-gpu``) also gives
some requests ``cold_memory_mib`` (whole GiB) and ``cold_tier``, and its
hosts an ``hmat``; the others write neither key. A scenario with a PCIe
layout (``dgx-nics``) writes its GPUs and NICs as objects with their place
in the PCIe tree and gives some requests ``nics``, ``nic_affinity`` and
``nic_function``; the others write bare addresses and no NIC keys. The
partition scenario (``gpu-partitions``) writes the shipped H100 80GB MIG
geometry as ``gpu_profiles``, its GPUs as objects with ``mig`` and ``vgpu``,
and some requests ``mig`` or ``vgpu``.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from vnuma.sources.migprofiles import profile_document, shipped_profiles
from vnuma.sources.traceshapes import (
    PAGE_1G,
    PAGE_2M,
    HostShape,
    big16_shape,
    dgx_shape,
    dual_socket_shape,
    epyc_nps4_shape,
    make_host,
    partition_shape,
    shared_nic_shape,
    snc_cxl_shape,
)

T = TypeVar("T")

FORMAT = "numa-placement-trace"
VERSION = 1
MIB_PER_GIB = 1024
TENANTS = tuple(f"tenant-{i:02d}" for i in range(16))
LARGE_SHARE = (0.10, 0.50)

Choices = tuple[tuple[T, float], ...]


# ------------------------------------------------------------- requests ----


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


# ------------------------------------------------------------ scenarios ----


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named workload: how many hosts of which shape, how many requests."""

    name: str
    hosts: int
    shape: Callable[[], HostShape]
    requests: int
    description: str
    mix: Callable[[random.Random, int], list[dict[str, Any]]] = make_requests
    gpu_profiles: Callable[[], list[dict[str, Any]]] | None = None
    """The trace's MIG geometries (``gpu_profiles``), for a scenario whose GPUs have one."""


_SCENARIOS = (
    Scenario(
        name="dual-socket-2cell",
        hosts=10,
        shape=dual_socket_shape,
        requests=240,
        description="10 dual-socket hosts, 1 NUMA cell per socket, 32 pCPUs (16 cores x 2 HT) and 256 GiB per cell, "
        "2 GPUs per cell, 2M and 1G hugepages",
    ),
    Scenario(
        name="epyc-nps4-8cell",
        hosts=10,
        shape=epyc_nps4_shape,
        requests=400,
        description="10 dual-socket EPYC-like hosts in NPS4 (8 cells), 16 pCPUs (8 cores x 2 HT) and 128 GiB per cell, "
        "1 GPU per cell",
    ),
    Scenario(
        name="big-16cell",
        hosts=4,
        shape=big16_shape,
        requests=400,
        description="4 hosts: 4 sockets x SNC3 (12 CPU cells, 24 pCPUs and 128 GiB each, GPUs on SNC 0 and 1) "
        "plus 4 CXL memory-only cells (cpus=[], 256 GiB each)",
    ),
    Scenario(
        name="fleet-1000",
        hosts=1000,
        shape=dual_socket_shape,
        requests=20000,
        description="1000 hosts of the dual-socket-2cell kind, 20000 requests",
    ),
    Scenario(
        name="snc-cxl-gpu",
        hosts=8,
        shape=snc_cxl_shape,
        requests=400,
        description="8 hosts: 2 sockets x SNC2 (4 CPU cells, 32 pCPUs, 256 GiB and 1 GPU each) plus 2 CXL memory "
        "expanders (memory-only cells, cpus=[], 512 GiB each, one per socket) rated by HMAT: read latency / "
        "bandwidth from a CPU cell 90 ns / 100 GiB/s local, 110 / 90 SNC neighbour, 140 / 50 other socket, "
        "250 / 30 own socket's CXL, 350 / 15 other socket's CXL (plausible magnitudes of published "
        "Sapphire-Rapids-class and CXL 1.1 expander figures, not measurements); inference mix, 60 % of large "
        "and 20 % of small VMs ask cold_memory_mib (1/2, 1 or 2 x their memory), 40 % of those cold_tier cxl",
        mix=make_cold_requests,
    ),
    Scenario(
        name="dgx-nics",
        hosts=12,
        shape=dgx_shape,
        requests=400,
        description="12 DGX-H100-like hosts: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 HT, 1 TiB), "
        "8 GPUs and 8 NICs (8 SR-IOV VFs each) per host, every GPU paired with a NIC under a PCIe switch (PIX); "
        "per socket 2 root complexes: one with a top switch over two leaf switches (pairs PXB to each other), "
        "one with a switch on each of two root ports (PHB to each other); a layout after public descriptions "
        "of such systems, not measurements; inference mix with VMs of 1/2/4/8 GPUs, 75 % of the VMs with GPUs "
        "ask NICs: per-gpu (85 %) or 1, within pix/pxb/node/sys (40/45/10/5 %), virtual functions for 15 %",
        mix=make_nic_requests,
    ),
    Scenario(
        name="shared-nics",
        hosts=12,
        shape=shared_nic_shape,
        requests=300,
        description="12 8-GPU inference hosts with 4 NICs: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 "
        "HT, 1 TiB), per socket 2 root complexes each with one PCIe switch holding 2 GPUs and 1 NIC (no VFs), so "
        "every NIC is PIX to two GPUs and only one of them can have it; inference mix with VMs of 1/2/4/8 GPUs, "
        "half of the VMs with GPUs ask whole NICs: per-gpu (90 %) or 1, within pix/pxb (50/50 %)",
        mix=make_shared_nic_requests,
    ),
    Scenario(
        name="gpu-partitions",
        hosts=8,
        shape=partition_shape,
        requests=400,
        description="8 8-GPU H100 inference hosts: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 HT, "
        "1 TiB), 4 GPUs per cell, each with the H100 80GB MIG geometry (gpu_profiles: the shipped profile) and "
        "three time-sliced vGPU types (10/20/40 GB: 8/4/2 instances); inference mix whose large VMs (8/16/32 "
        "vCPUs, one node) take 0/1/2/4 whole GPUs (50/30/15/5 %), and 60 % of the VMs without GPUs ask "
        "partitions: MIG (60 %: 1g.10gb/2g.20gb/3g.40gb/"
        "4g.40gb 40/30/20/10 %) or vGPU (40 %: 10c/20c/40c 50/35/15 %), 1 (85 %) or 2 each",
        mix=make_partition_requests,
        gpu_profiles=lambda: [profile_document(shipped_profiles()["h100-sxm5-80gb"])],
    ),
)
SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in _SCENARIOS}


def summarize(hosts: Sequence[Mapping[str, Any]], requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The informative ``summary`` key: what the fleet has and what the requests ask for."""
    cells = [c for h in hosts for c in h["cells"]]
    out = {
        "hosts": len(hosts),
        "cells_per_host": sorted({len(h["cells"]) for h in hosts}),
        "pcpus_total": sum(len(c["cpus"]) for c in cells),
        "gpus_total": sum(len(c["gpus"]) for c in cells),
        "memory_mib_total": sum(c["memory_mib"] for c in cells),
        "requests": len(requests),
        "requested_vcpus": sum(r["vcpus"] for r in requests),
        "requested_gpus": sum(r["gpus"] for r in requests),
        "requested_memory_mib": sum(r["memory_mib"] for r in requests),
        "requests_multi_node": sum(1 for r in requests if (r["numa_nodes"] or 1) > 1),
    }
    nics = [r for r in requests if "nics" in r]
    if nics:  # only then, as the cold keys
        placed = [d for c in cells for d in c.get("nics", ())]
        out["nics_total"] = len(placed)
        out["nic_vfs_total"] = sum(d.get("vfs", 0) for d in placed if isinstance(d, dict))
        out["requests_nics"] = len(nics)
        out["requests_nics_per_gpu"] = sum(1 for r in nics if r["nics"] == "per-gpu")
        out["requests_nics_vf"] = sum(1 for r in nics if r["nic_function"] == "vf")
    parts = [r for r in requests if "mig" in r or "vgpu" in r]
    if parts:  # only then, as for cold tiers below
        out["requests_mig"] = sum(1 for r in parts if "mig" in r)
        out["requests_vgpu"] = sum(1 for r in parts if "vgpu" in r)
    cold = [r for r in requests if r.get("cold_memory_mib")]
    if cold:  # only then: the other scenarios' bytes stay as they were
        out["requests_cold"] = len(cold)
        out["requests_cold_cxl"] = sum(1 for r in cold if r.get("cold_tier") == "cxl")
        out["requested_cold_memory_mib"] = sum(r["cold_memory_mib"] for r in cold)
    return out


def scenario_rng(name: str, seed: int) -> random.Random:
    """The scenario's own random stream: independent of the other scenarios, stable across releases."""
    return random.Random(seed * 1000003 + zlib.crc32(name.encode()))


def make_trace(name: str, seed: int) -> dict[str, Any]:
    """The trace document of scenario ``name`` made with ``seed``.

    Raises:
        KeyError: ``name`` is not in :data:`SCENARIOS` (callers check first).
    """
    scenario = SCENARIOS[name]
    shape = scenario.shape()
    hosts = [make_host(f"host-{i:04d}", shape) for i in range(scenario.hosts)]
    requests = scenario.mix(scenario_rng(name, seed), scenario.requests)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "scenario": name,
        "seed": seed,
        "description": scenario.description,
        "summary": summarize(hosts, requests),
    }
    if scenario.gpu_profiles is not None:
        doc["gpu_profiles"] = scenario.gpu_profiles()
    return {**doc, "hosts": hosts, "requests": requests}


def render_trace(doc: Mapping[str, Any]) -> str:
    """The document as text: compact JSON, one top-level key per line and each list item on its own line."""
    lines = ["{"]
    for n, (key, value) in enumerate(doc.items()):
        comma = "," if n + 1 < len(doc) else ""
        if isinstance(value, list):
            # one host or request per line keeps diffs between two traces readable
            items = [f"  {_compact(item)}" + ("," if i + 1 < len(value) else "") for i, item in enumerate(value)]
            lines += [f" {json.dumps(key)}: [", *items, f" ]{comma}"]
        else:
            lines.append(f" {json.dumps(key)}: {_compact(value)}{comma}")
    return "\n".join([*lines, "}", ""])


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def generate(name: str, seed: int) -> str:
    """The text of scenario ``name`` made with ``seed`` (what ``vnuma trace generate`` prints).

    Raises:
        KeyError: ``name`` is not in :data:`SCENARIOS`.
    """
    return render_trace(make_trace(name, seed))
