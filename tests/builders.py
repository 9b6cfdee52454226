"""Builders for test hosts: a realistic topology in one call, no object literals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vnuma.placement.model import Placement, VmRequest
from vnuma.topology import (
    KIB_PER_GIB,
    PAGE_1G,
    PAGE_2M,
    PAGE_4K,
    Cell,
    Cpu,
    DeviceKind,
    Host,
    PagePool,
    PciDevice,
    Source,
)


def make_host(
    name: str = "host-a",
    *,
    cells: int = 2,
    cores_per_cell: int = 8,
    smt: int = 2,
    cells_per_socket: int = 1,
    memory_gib: int = 64,
    hugepages_2m_gib: int = 16,
    hugepages_1g_gib: int = 32,
    gpus_per_cell: int = 0,
    nics_per_cell: int = 0,
    memory_only_cells: int = 0,
    memory_only_gib: int = 128,
    reserved_cpus: frozenset[int] = frozenset(),
    uri: str | None = None,
) -> Host:
    """A host with Linux CPU numbering: thread t of core c is CPU ``c + t * total_cores``.

    Distances: 10 local, 12 same socket, 21 other socket; memory-only cells
    (numbered after the CPU cells) are 14 from their socket's cells, 24 from
    others' and 30 from each other. Each CPU cell's memory is split into
    1 GiB pages, 2 MiB pages and 4 KiB pages for the rest.
    """
    total_cores = cells * cores_per_cell
    n_cells = cells + memory_only_cells

    def socket_of(cell_id: int) -> int:
        if cell_id < cells:
            return cell_id // cells_per_socket
        return (cell_id - cells) % max(1, cells // cells_per_socket)

    def distance(a: int, b: int) -> int:
        if a == b:
            return 10
        a_mem, b_mem = a >= cells, b >= cells
        if a_mem and b_mem:
            return 30
        same = socket_of(a) == socket_of(b)
        if a_mem or b_mem:
            return 14 if same else 24
        return 12 if same else 21

    built: list[Cell] = []
    for cid in range(n_cells):
        dists = tuple((other, distance(cid, other)) for other in range(n_cells))
        if cid >= cells:
            kib = memory_only_gib * KIB_PER_GIB
            built.append(Cell(cid, kib, (), (PagePool(PAGE_4K, kib // PAGE_4K),), dists))
            continue
        cpus = []
        for core_in_cell in range(cores_per_cell):
            core = cid * cores_per_cell + core_in_cell
            ids = frozenset(core + t * total_cores for t in range(smt))
            for t in range(smt):
                cpus.append(Cpu(core + t * total_cores, socket_of(cid), 0, core, ids))
        kib = memory_gib * KIB_PER_GIB
        rest = kib - (hugepages_2m_gib + hugepages_1g_gib) * KIB_PER_GIB
        pages = (
            PagePool(PAGE_4K, rest // PAGE_4K),
            PagePool(PAGE_2M, hugepages_2m_gib * KIB_PER_GIB // PAGE_2M),
            PagePool(PAGE_1G, hugepages_1g_gib),
        )
        built.append(Cell(cid, kib, tuple(sorted(cpus, key=lambda c: c.id)), pages, dists))

    devices: list[PciDevice] = []
    for cid in range(cells):
        for g in range(gpus_per_cell):
            devices.append(PciDevice(f"0000:{0x10 + cid * 16 + g:02x}:00.0", DeviceKind.GPU, "0x10de", "0x2330", cid))
        for n in range(nics_per_cell):
            devices.append(
                PciDevice(f"0000:{0x18 + cid * 16 + n:02x}:00.0", DeviceKind.NIC, "0x15b3", "0x101d", cid)
            )
    return Host(
        name=name,
        cells=tuple(built),
        devices=tuple(sorted(devices, key=lambda d: d.address)),
        uri=uri,
        source=Source.CAPABILITIES,
        reserved_cpus=reserved_cpus,
    )


def kept(p: Placement, **asked: Any) -> Placement:
    """``p`` keeping the request a VM of its shape asks (placements built by hand keep none): its size, its
    cell count as the placement records it, its page size, policies and GPUs; ``asked`` changes any of it."""
    gpus = sum(1 for d in p.devices if d.kind is DeviceKind.GPU)
    req = VmRequest(
        p.vm, p.tenant, p.vcpus, p.memory_kib, gpus=gpus, numa_nodes=p.numa_nodes,
        page_size_kib=p.cells[0].page_size_kib if p.cells else None, cpu_policy=p.cpu_policy,
        thread_policy=p.thread_policy, group=p.group, anti_affinity=p.anti_affinity, affinity=p.affinity,
    )
    return replace(p, request=replace(req, **asked))
