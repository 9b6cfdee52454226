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
``page_size_kib``.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

FORMAT = "numa-placement-trace"
VERSION = 1
PAGE_4K, PAGE_2M, PAGE_1G = 4, 2048, 1048576
MIB_PER_GIB = 1024
KIB_PER_GIB = 1024 * 1024
TENANTS = tuple(f"tenant-{i:02d}" for i in range(16))
LARGE_SHARE = (0.10, 0.50)
FIRST_PCI_BUS, PCI_BUS_STEP = 0x10, 0x08

Choices = tuple[tuple[T, float], ...]


# ---------------------------------------------------------------- hosts ----


@dataclass(frozen=True, slots=True)
class CellSpec:
    """One NUMA cell of a host shape: cores (2 threads each), GiB per page size, devices."""

    cores: int
    gib_4k: int
    gib_2m: int
    gib_1g: int
    gpus: int = 0
    nics: int = 0


@dataclass(frozen=True, slots=True)
class HostShape:
    """Every host of a scenario: its cells in id order and the SLIT distance matrix."""

    cells: tuple[CellSpec, ...]
    distances: tuple[tuple[int, ...], ...]


def _matrix(cells: int, distance: Callable[[int, int], int]) -> tuple[tuple[int, ...], ...]:
    """The distance matrix of ``cells`` cells from a pairwise rule."""
    return tuple(tuple(distance(a, b) for b in range(cells)) for a in range(cells))


def dual_socket_shape() -> HostShape:
    """2 sockets, one cell each: 16 cores x 2 threads, 256 GiB (16/48/192 in 4K/2M/1G), 2 GPUs + 1 NIC."""
    cell = CellSpec(cores=16, gib_4k=16, gib_2m=48, gib_1g=192, gpus=2, nics=1)
    return HostShape((cell, cell), _matrix(2, lambda a, b: 10 if a == b else 21))


def epyc_nps4_shape() -> HostShape:
    """2 sockets x NPS4: 8 cells of 8 cores x 2 threads, 128 GiB, 1 GPU; a NIC on each socket's first cell."""
    cells = tuple(CellSpec(8, 16, 32, 80, gpus=1, nics=int(c % 4 == 0)) for c in range(8))
    return HostShape(cells, _matrix(8, lambda a, b: 10 if a == b else 12 if a // 4 == b // 4 else 32))


def _big16_distance(a: int, b: int) -> int:
    """Cells 0..11 are 4 sockets x SNC3 (socket s = cells 3s..3s+2); CXL cell 12+s belongs to socket s."""
    if a == b:
        return 10
    cxl_a, cxl_b = a >= 12, b >= 12
    same_socket = (a - 12 if cxl_a else a // 3) == (b - 12 if cxl_b else b // 3)
    if cxl_a and cxl_b:
        return 30
    if cxl_a or cxl_b:
        return 14 if same_socket else 24
    return 12 if same_socket else 21


def big16_shape() -> HostShape:
    """4 sockets x SNC3 (12 cells of 12 cores x 2, 128 GiB, GPUs on SNC 0 and 1) + 4 CXL cells of 256 GiB."""
    cpu_cells = tuple(CellSpec(12, 16, 32, 80, gpus=int(c % 3 < 2), nics=int(c % 3 == 0)) for c in range(12))
    cxl_cells = (CellSpec(0, 32, 0, 224),) * 4
    return HostShape(cpu_cells + cxl_cells, _matrix(16, _big16_distance))


def page_pools(spec: CellSpec) -> dict[str, dict[str, int]]:
    """A cell's page pools keyed by size in KiB; the 4 KiB pool is always listed, others only when non-empty."""
    pools: dict[str, dict[str, int]] = {}
    for size_kib, gib in ((PAGE_4K, spec.gib_4k), (PAGE_2M, spec.gib_2m), (PAGE_1G, spec.gib_1g)):
        if gib or size_kib == PAGE_4K:
            total = gib * KIB_PER_GIB // size_kib
            pools[str(size_kib)] = {"total": total, "free": total}
    return pools


def _pci(bus: int) -> str:
    assert bus <= 0xFF, "a host shape with more devices than PCI buses"
    return f"0000:{bus:02x}:00.0"


def make_host(name: str, shape: HostShape) -> dict[str, Any]:
    """One host: Linux CPU numbering (core c of C has threads c and c + C), one PCI bus per device."""
    total_cores = sum(c.cores for c in shape.cells)
    first_core, bus = 0, FIRST_PCI_BUS
    cells = []
    for cid, spec in enumerate(shape.cells):
        siblings = [[c, c + total_cores] for c in range(first_core, first_core + spec.cores)]
        first_core += spec.cores
        gpus = [_pci(bus + PCI_BUS_STEP * i) for i in range(spec.gpus)]
        bus += PCI_BUS_STEP * spec.gpus
        nics = [_pci(bus + PCI_BUS_STEP * i) for i in range(spec.nics)]
        bus += PCI_BUS_STEP * spec.nics
        pools = page_pools(spec)
        cell: dict[str, Any] = {
            "id": cid,
            "cpus": sorted(cpu for pair in siblings for cpu in pair),
            "siblings": siblings,
            "memory_mib": sum(int(size) * p["total"] for size, p in pools.items()) // 1024,
            "hugepages": pools,
            "distances": {str(other): d for other, d in enumerate(shape.distances[cid])},
            "gpus": gpus,
        }
        if nics:
            cell["nics"] = nics
        cells.append(cell)
    return {"name": name, "cells": cells}


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


def make_requests(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` requests in arrival order; each tenant gets its own share of large VMs (10 %..50 %)."""
    large_share = {t: round(rng.uniform(*LARGE_SHARE), 3) for t in TENANTS}
    requests = []
    for index in range(count):
        tenant = rng.choice(TENANTS)
        kind = LARGE if rng.random() < large_share[tenant] else SMALL
        requests.append(make_request(rng, index, tenant, kind))
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
)
SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in _SCENARIOS}


def summarize(hosts: Sequence[Mapping[str, Any]], requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The informative ``summary`` key: what the fleet has and what the requests ask for."""
    cells = [c for h in hosts for c in h["cells"]]
    return {
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
    requests = make_requests(scenario_rng(name, seed), scenario.requests)
    return {
        "format": FORMAT,
        "version": VERSION,
        "scenario": name,
        "seed": seed,
        "description": scenario.description,
        "summary": summarize(hosts, requests),
        "hosts": hosts,
        "requests": requests,
    }


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
