"""The host shapes of the example workload traces (docs/traces.md): cells, distances, HMAT and PCIe layouts.

Pure: no I/O, no randomness (hosts do not depend on the seed). :func:`make_host` writes a shape as a trace's
host document; :mod:`vnuma.sources.tracegen` names a shape per scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PAGE_4K, PAGE_2M, PAGE_1G = 4, 2048, 1048576
KIB_PER_GIB = 1024 * 1024
FIRST_PCI_BUS, PCI_BUS_STEP = 0x10, 0x08


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
    bus per device), and keys for every GPU object (``gpu_extra``)."""

    cells: tuple[CellSpec, ...]
    distances: tuple[tuple[int, ...], ...]
    latency_ns: tuple[tuple[int, ...], ...] = ()
    bandwidth_kib_s: tuple[tuple[int, ...], ...] = ()
    pcie: tuple[CellPcie, ...] = ()
    gpu_extra: tuple[tuple[str, Any], ...] = ()
    """Keys every GPU object gets (``mig``, ``vgpu``: what it can be cut into); GPUs are then objects."""


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


SHARED_NIC_RC_BUSES = ((0x10, 0x30), (0x90, 0xB0))
"""Per socket: the first bus of each of its two root complexes (one switch of 2 GPUs and 1 NIC on each)."""


def _shared_nic_socket(buses: tuple[int, int]) -> CellPcie:
    """One socket's 4 GPUs and 2 NICs: on each of two root complexes a switch with 2 GPUs and 1 NIC (the
    GPUs PIX to their NIC, NODE to the other switch's)."""
    gpus: list[PciePlace] = []
    nics: list[PciePlace] = []
    for first in buses:
        rc, up = f"pci0000:{first:02x}", _bdf(first + 1)
        gpus += [PciePlace(_bdf(first + 2), rc, up), PciePlace(_bdf(first + 3), rc, up)]
        nics.append(PciePlace(_bdf(first + 4), rc, up))
    return tuple(gpus), tuple(nics)


def shared_nic_shape() -> HostShape:
    """An 8-GPU inference host with 4 NICs: 2 sockets, one cell each (56 cores x 2 threads, 1 TiB: 32 / 192 /
    800 GiB in 4K / 2M / 1G), per socket 4 GPUs and 2 NICs (no VFs), every 2 GPUs sharing a switch with 1 NIC
    (:func:`_shared_nic_socket`); SLIT 10 / 21."""
    pcie = tuple(_shared_nic_socket(buses) for buses in SHARED_NIC_RC_BUSES)
    cell = CellSpec(DGX_CORES, 32, 192, 800, gpus=4, nics=2)
    return HostShape((cell, cell), _matrix(2, lambda a, b: 10 if a == b else 21), pcie=pcie)


PARTITION_MODEL = "NVIDIA H100 80GB HBM3"
"""The MIG geometry the partition scenario's GPUs have (the shipped ``h100-sxm5-80gb`` profile)."""
PARTITION_VGPU = (("nvidia-h100-10c", 8), ("nvidia-h100-20c", 4), ("nvidia-h100-40c", 2))
"""Time-sliced vGPU types (and instances per GPU) the partition scenario's GPUs offer: illustrative names in
NVIDIA's style (10, 20, 40 GB of an 80 GB GPU), not a driver's list."""


def partition_shape() -> HostShape:
    """An 8-GPU H100 inference host for partitions: 2 sockets, one cell each (56 cores x 2 threads, 1 TiB:
    32 / 192 / 800 GiB in 4K / 2M / 1G), 4 GPUs per cell (bare addresses), each with the H100 80GB MIG
    geometry and three time-sliced vGPU types; SLIT 10 / 21."""
    cell = CellSpec(DGX_CORES, 32, 192, 800, gpus=4)
    extra = (("mig", PARTITION_MODEL), ("vgpu", dict(PARTITION_VGPU)))
    return HostShape((cell, cell), _matrix(2, lambda a, b: 10 if a == b else 21), gpu_extra=extra)


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
            if shape.gpu_extra:
                gpus = [{"address": a, **dict(shape.gpu_extra)} for a in gpus]
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
