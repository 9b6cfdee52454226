"""A small placement builder for render tests: pick pCPUs, pages and GPUs from a test host.

The real engine is not used here on purpose: these placements are written
down explicitly so the renderer is tested on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    DeviceAssignment,
    MemoryMode,
    Placement,
    ThreadPolicy,
)
from vnuma.topology import KIB_PER_GIB, PAGE_2M, DeviceKind, Host


@dataclass(frozen=True)
class CellSpec:
    """One guest cell: its host cell, vCPU count, memory, page size, GPU count and memory mode."""

    host_cell: int
    vcpus: int
    memory_kib: int = 4 * KIB_PER_GIB
    page_size_kib: int = PAGE_2M
    gpus: int = 0
    memory_mode: MemoryMode = MemoryMode.STRICT


def core_ordered_cpus(host: Host, cell_id: int, threads: int) -> list[int]:
    """The cell's CPUs core by core: both siblings of each core (threads=2) or the first (threads=1)."""
    cores: dict[frozenset[int], list[int]] = {}
    for cpu in host.cell(cell_id).cpus:
        cores.setdefault(cpu.siblings, []).append(cpu.id)
    ordered = sorted((sorted(ids) for ids in cores.values()), key=lambda ids: ids[0])
    return [cpu for ids in ordered for cpu in ids[:threads]]


def make_placement(
    host: Host,
    cells: Sequence[CellSpec],
    *,
    vm: str = "vm1",
    tenant: str = "acme",
    threads: int = 1,
    cpu_policy: CpuPolicy = CpuPolicy.DEDICATED,
    thread_policy: ThreadPolicy = ThreadPolicy.PREFER,
    isolate_emulator: bool = False,
) -> Placement:
    """Guest cell i on ``cells[i].host_cell``; vCPUs numbered consecutively across cells.

    Dedicated VMs take pCPUs core by core (sibling pairs when ``threads`` is 2);
    shared VMs float over every CPU of their host cell. An isolated emulator
    takes the next free pCPU of the first cell.
    """
    assignments: list[CellAssignment] = []
    devices: list[DeviceAssignment] = []
    emulator: tuple[int, ...] = ()
    next_vcpu = 0
    for guest, spec in enumerate(cells):
        candidates = core_ordered_cpus(host, spec.host_cell, threads)
        if cpu_policy is CpuPolicy.DEDICATED:
            pcpus = tuple(candidates[: spec.vcpus])
        else:
            pcpus = tuple(sorted(host.cell(spec.host_cell).cpu_ids))
        if isolate_emulator and guest == 0:
            emulator = (candidates[spec.vcpus],)
        vcpus = tuple(range(next_vcpu, next_vcpu + spec.vcpus))
        next_vcpu += spec.vcpus
        assignments.append(
            CellAssignment(
                guest, spec.host_cell, vcpus, pcpus, spec.memory_kib, spec.page_size_kib, spec.memory_mode
            )
        )
        gpus = [d for d in host.devices_of(DeviceKind.GPU) if d.numa_node == spec.host_cell][: spec.gpus]
        devices += [DeviceAssignment(d.address, d.kind, guest, spec.host_cell) for d in gpus]
    return Placement(
        vm=vm,
        tenant=tenant,
        host=host.name,
        cells=tuple(assignments),
        emulator_pcpus=emulator,
        devices=tuple(devices),
        cpu_policy=cpu_policy,
        thread_policy=thread_policy,
        threads_per_core=threads,
    )
