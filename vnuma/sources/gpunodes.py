"""A GPU's own NUMA nodes on a host read from libvirt (capabilities and node devices).

Pure: no I/O. hwloc names a GPU's memory node itself (subtype ``GPUMemory`` and
``PCIBusID``, :mod:`vnuma.sources.hwloc`); libvirt writes neither a memory type
nor a PCI address for a cell. What it does write is HMAT (``<interconnects>``),
and on Grace Hopper and Grace Blackwell in NUMA mode HMAT names the GPU, an
ACPI *Generic Initiator* without CPUs, as the initiator of its memory's node.
:func:`with_gpu_nodes` reads that, and nothing weaker, as follows.

* **A device's memory.** A memory-only cell with memory is a device's own when
  HMAT rates it best from a cell without CPUs: a higher read bandwidth than from
  any CPU cell (without bandwidth figures for it: a lower read latency), or from
  no CPU cell at all. A tie with a CPU cell is not enough. Such a cell is GPU
  memory (:attr:`vnuma.topology.Cell.gpu_memory`, kind ``gpu``): never guest
  memory, never a cold tier.
* **Which GPU.** The one GPU whose node device names one of those initiators'
  cells or the memory's own cell (a device in its own proximity domain). With
  none there: the one GPU on the CPU cell nearest the initiator (the lowest
  id of those rated best: its smallest SLIT distance, held by one CPU cell;
  else the memory cell's). Two GPUs there, or
  none: the GPU is not known, and the cell is GPU memory all the same (hwloc's
  subtype ``GPUMemory``, no address). A GPU may own several nodes (NVIDIA keeps
  eight per Grace Hopper GPU).
* **The initiator.** Each CPU-less initiator that rates such memory best and
  has no memory of its own (Grace Hopper's nodes kept for MIG) is recorded with
  the same GPU (or as an unknown GPU's node); one rating the memory of two
  different GPUs best is left as it is.
* **The GPU's place.** A GPU whose node device names one of these CPU-less
  cells is local to the CPU cell nearest that cell (SLIT, one cell; else no
  cell), as hwloc makes a GPU local to its CPUs rather than to its own memory:
  its vCPUs need CPUs.

Nothing else counts: not node numbers (POWER's 250-255), not a memory-only
cell's size, not a GPU alone beside a memory-only cell. Without an HMAT
initiator without CPUs the host is returned as it is, and so is a host whose
cells already name GPU memory (hwloc).
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.topology import GPU_MEMORY_SUBTYPE, Cell, DeviceKind, Host, PciDevice

_UNKNOWN = ""
"""The GPU of a device's memory when the node devices do not say which (kept as the subtype only)."""


def with_gpu_nodes(host: Host) -> Host:
    """``host`` with the CPU-less cells HMAT shows to be a GPU's recorded as that GPU's (see the module doc)."""
    cpu_cells = frozenset(c.id for c in host.cells if c.cpus)
    initiators = {i for m in host.hmat.matrices().values() for i, _t, _v in m} - cpu_cells
    if not initiators or any(c.gpu_memory for c in host.cells):
        return host
    gpus = host.devices_of(DeviceKind.GPU)  # a GPU's virtual functions are not GPUs of their own
    owner: dict[int, str] = {}
    rated_by: dict[int, set[str]] = {}
    for cell in host.cells:
        if not cell.memory_only or cell.memory_kib <= 0:
            continue
        best = _best_initiators(host, cell.id)
        if not best or not best.isdisjoint(cpu_cells):
            continue
        gpu = _gpu_of(host, gpus, best, cell.id, cpu_cells)
        owner[cell.id] = gpu
        for initiator in best:
            rated_by.setdefault(initiator, set()).add(gpu)
    for initiator, named in rated_by.items():
        if initiator not in owner and len(named) == 1 and host.cell(initiator).memory_kib == 0:
            owner[initiator] = next(iter(named))
    if not owner:
        return host
    cells = tuple(_owned(c, owner[c.id]) if c.id in owner else c for c in host.cells)
    devices = tuple(_placed(host, d, frozenset(owner), cpu_cells) for d in host.devices)
    return replace(host, cells=cells, devices=devices)


def _best_initiators(host: Host, target: int) -> frozenset[int]:
    """The initiators HMAT rates best for ``target``: highest read bandwidth, else lowest read latency."""
    for matrix, sign in ((host.hmat.bandwidth_kib_s, 1), (host.hmat.latency_ns, -1)):
        rated = {i: sign * v for i, t, v in matrix if t == target}
        if rated:
            top = max(rated.values())
            return frozenset(i for i, v in rated.items() if v == top)
    return frozenset()


def _gpu_of(
    host: Host, gpus: tuple[PciDevice, ...], initiators: frozenset[int], memory: int, cpu_cells: frozenset[int]
) -> str:
    """The address of the GPU whose memory ``memory`` is (rated best from ``initiators``), or :data:`_UNKNOWN`."""
    there = [g.address for g in gpus if g.numa_node in initiators | {memory}]
    if not there:
        near = _nearest_cpu_cell(host, min(initiators), cpu_cells)
        near = near if near is not None else _nearest_cpu_cell(host, memory, cpu_cells)
        there = [g.address for g in gpus if near is not None and g.numa_node == near]
    return there[0] if len(there) == 1 else _UNKNOWN


def _nearest_cpu_cell(host: Host, cell_id: int, cpu_cells: frozenset[int]) -> int | None:
    """The CPU cell at the smallest SLIT distance from ``cell_id``; None without distances or on a tie."""
    found = {other: d for other, d in host.cell(cell_id).distances if other in cpu_cells}
    if not found:
        return None
    least = min(found.values())
    nearest = [other for other, d in found.items() if d == least]
    return nearest[0] if len(nearest) == 1 else None


def _owned(cell: Cell, gpu: str) -> Cell:
    if gpu == _UNKNOWN:
        return replace(cell, subtype=GPU_MEMORY_SUBTYPE)
    return replace(cell, gpu=gpu, subtype=GPU_MEMORY_SUBTYPE)


def _placed(host: Host, dev: PciDevice, gpu_cells: frozenset[int], cpu_cells: frozenset[int]) -> PciDevice:
    """A GPU on one of the GPU's own (CPU-less) cells moved to the CPU cell nearest it (see the module doc)."""
    node = dev.numa_node
    if dev.kind is not DeviceKind.GPU or node is None or node not in gpu_cells:
        return dev
    return replace(dev, numa_node=_nearest_cpu_cell(host, node, cpu_cells))
