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
``nic_function``; the others write bare addresses and no NIC keys.
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
class PciePlace:
    """A GPU or NIC where it sits in the PCIe tree, as a trace writes it (docs/traces.md): its root complex,
    the upstream bridge of the switch it hangs below, the bridges above it when the switch alone does not
    say its levels (nearest first, up to the root port), and a NIC's SR-IOV virtual function count."""

    address: str
    root_complex: str
    switch: str
    bridges: tuple[str, ...] = ()
    vfs: int = 0

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"address": self.address, "root_complex": self.root_complex, "switch": self.switch}
        if self.bridges:
            doc["bridges"] = list(self.bridges)
        if self.vfs:
            doc["vfs"] = self.vfs
        return doc


CellPcie = tuple[tuple[PciePlace, ...], tuple[PciePlace, ...]]
"""One cell's (GPUs, NICs) with their PCIe places."""


@dataclass(frozen=True, slots=True)
class HostShape:
    """Every host of a scenario: its cells in id order and the SLIT distance matrix; optionally HMAT read
    latency (ns) and bandwidth (KiB/s) matrices ``[initiator][target]``, rows of memory-only cells unused;
    optionally each cell's GPUs and NICs with their PCIe places (``pcie``; empty: bare addresses, one PCI
    bus per device)."""

    cells: tuple[CellSpec, ...]
    distances: tuple[tuple[int, ...], ...]
    latency_ns: tuple[tuple[int, ...], ...] = ()
    bandwidth_kib_s: tuple[tuple[int, ...], ...] = ()
    pcie: tuple[CellPcie, ...] = ()


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


SNC_CXL_CELLS = 6
"""Cells 0..3: 2 sockets x SNC2 (socket s = cells 2s, 2s+1); cells 4 and 5: socket 0's and 1's CXL expander."""
KIB_S_PER_GIB_S = 1024 * 1024
# Rated read figures, (latency ns, bandwidth GiB/s), by where the target cell is from a CPU cell.
SNC_CXL_HMAT = {
    "local": (90, 100),  # the SNC cell's own DRAM channels
    "snc": (110, 90),  # the other SNC cell of the same socket, across the mesh
    "remote": (140, 50),  # the other socket's DRAM, over UPI
    "cxl": (250, 30),  # the socket's own CXL expander (a PCIe 5 x8 link, DDR5 behind it)
    "cxl-remote": (350, 15),  # the other socket's CXL expander, over UPI then CXL
}


def _snc_cxl_place(cell: int) -> tuple[int, bool]:
    """(socket, is CXL) of a cell of :func:`snc_cxl_shape`."""
    return (cell - 4, True) if cell >= 4 else (cell // 2, False)


def _snc_cxl_relation(a: int, b: int) -> str:
    """Where cell ``b`` is from cell ``a``: a key of :data:`SNC_CXL_HMAT` (``a`` a CPU cell), or ``cxl-cxl``."""
    (sa, cxl_a), (sb, cxl_b) = _snc_cxl_place(a), _snc_cxl_place(b)
    if cxl_a and cxl_b:
        return "local" if a == b else "cxl-cxl"
    if cxl_a or cxl_b:
        return "cxl" if sa == sb else "cxl-remote"
    return "local" if a == b else "snc" if sa == sb else "remote"


def _snc_cxl_distance(a: int, b: int) -> int:
    """SLIT: local 10, SNC neighbour 12, other socket 21, own CXL 14, other socket's CXL 24, CXL to CXL 30."""
    return {"local": 10, "snc": 12, "remote": 21, "cxl": 14, "cxl-remote": 24, "cxl-cxl": 30}[_snc_cxl_relation(a, b)]


def snc_cxl_shape() -> HostShape:
    """2 sockets x SNC2 (4 cells of 16 cores x 2 threads, 256 GiB, 1 GPU each; a NIC on each socket's first
    cell) + 2 CXL memory expanders (memory-only cells of 512 GiB: 32 / 0 / 480 in 4K / 2M / 1G), rated by HMAT."""
    cpu_cells = tuple(CellSpec(16, 16, 48, 192, gpus=1, nics=int(c % 2 == 0)) for c in range(4))
    cxl_cells = (CellSpec(0, 32, 0, 480),) * 2
    cells = range(SNC_CXL_CELLS)

    def rated(index: int, scale: int) -> tuple[tuple[int, ...], ...]:
        return tuple(
            tuple(SNC_CXL_HMAT[_snc_cxl_relation(a, b)][index] * scale for b in cells) if a < 4 else ()
            for a in cells
        )

    return HostShape(
        cpu_cells + cxl_cells,
        _matrix(SNC_CXL_CELLS, _snc_cxl_distance),
        latency_ns=rated(0, 1),
        bandwidth_kib_s=rated(1, KIB_S_PER_GIB_S),
    )


DGX_CORES, DGX_VFS = 56, 8
DGX_RC_BUSES = ((0x10, 0x30), (0x90, 0xB0))
"""Per socket: the first bus of the root complex with the two-level switch, and of the one with two root
ports."""


def _bdf(bus: int, slot: int = 0, function: int = 0) -> str:
    return f"0000:{bus:02x}:{slot:02x}.{function}"


def _dgx_socket(cascaded: int, split: int) -> CellPcie:
    """One socket's 4 GPU-NIC pairs, each pair below a switch of its own (PIX): two leaf switches under a
    top switch on one root port of root complex ``pci0000:<cascaded>`` (the pairs PXB to each other), and
    two switches on two root ports of root complex ``pci0000:<split>`` (PHB to each other)."""
    rc = f"pci0000:{cascaded:02x}"
    root_port, top_up = _bdf(cascaded, 1), _bdf(cascaded + 1)
    gpus: list[PciePlace] = []
    nics: list[PciePlace] = []
    for leaf in range(2):
        top_down = _bdf(cascaded + 2, leaf)
        base = cascaded + 3 + 4 * leaf  # the leaf's upstream bridge; its downstream ports one bus below
        up, down = _bdf(base), base + 1
        above = (up, top_down, top_up, root_port)
        gpus.append(PciePlace(_bdf(base + 2), rc, up, (_bdf(down, 0), *above)))
        nics.append(PciePlace(_bdf(base + 3), rc, up, (_bdf(down, 1), *above), vfs=DGX_VFS))
    rc = f"pci0000:{split:02x}"
    for port in range(2):
        base = split + 1 + 8 * port  # the switch's upstream bridge (below root port <split>:0{1+2*port}.0)
        gpus.append(PciePlace(_bdf(base + 2), rc, _bdf(base)))
        nics.append(PciePlace(_bdf(base + 3), rc, _bdf(base), vfs=DGX_VFS))
    return tuple(gpus), tuple(nics)


def dgx_shape() -> HostShape:
    """A DGX-H100-like host: 2 sockets, one cell each (56 cores x 2 threads, 1 TiB: 32 / 192 / 800 GiB in
    4K / 2M / 1G), 4 GPUs and 4 NICs (8 VFs each) per socket, each GPU paired with a NIC under a switch
    (:func:`_dgx_socket`); SLIT 10 / 21."""
    pcie = tuple(_dgx_socket(*buses) for buses in DGX_RC_BUSES)
    cell = CellSpec(DGX_CORES, 32, 192, 800, gpus=4, nics=4)
    return HostShape((cell, cell), _matrix(2, lambda a, b: 10 if a == b else 21), pcie=pcie)


def hmat_of(shape: HostShape) -> dict[str, dict[str, dict[str, int]]]:
    """The host's ``hmat`` key (the shape ``host show --json`` uses): every CPU cell to every cell."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, matrix in (("latency_ns", shape.latency_ns), ("bandwidth_kib_s", shape.bandwidth_kib_s)):
        rows = {
            str(a): {str(b): v for b, v in enumerate(row)}
            for a, row in enumerate(matrix)
            if row and shape.cells[a].cores
        }
        if rows:
            out[name] = rows
    return out


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
        gpus: list[Any]
        nics: list[Any]
        if shape.pcie:
            placed_gpus, placed_nics = shape.pcie[cid]
            assert (len(placed_gpus), len(placed_nics)) == (spec.gpus, spec.nics), "a PCIe layout of other counts"
            gpus = [d.to_json() for d in sorted(placed_gpus, key=lambda d: d.address)]
            nics = [d.to_json() for d in sorted(placed_nics, key=lambda d: d.address)]
        else:
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
    host: dict[str, Any] = {"name": name, "cells": cells}
    hmat = hmat_of(shape)
    if hmat:
        host["hmat"] = hmat
    return host


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


def _requests(
    rng: random.Random, count: int, *, cold: bool, large: VmClass = LARGE, nics: NicMix | None = None
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
