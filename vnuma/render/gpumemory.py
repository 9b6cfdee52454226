"""A Grace-class GPU's memory nodes in the guest: CPU-less guest NUMA nodes tied to the GPU's hostdev.

Pure: no I/O. On Grace Hopper (GH200) and Grace Blackwell (GB200) in NUMA
mode each GPU's memory is a host NUMA node of its own, and the host keeps
more CPU-less nodes for the GPU (eight per GPU on GH200, for MIG). The
inventory records them with the GPU (:attr:`vnuma.topology.Cell.gpu`). A
guest only gets the GPU's memory right when it has such nodes too, tied to
the GPU by an ACPI Generic Initiator affinity: QEMU's
``acpi-generic-initiator``, libvirt's ``<acpi nodeset='…'/>`` on the
``<hostdev>`` (libvirt 11.8.0 and later: :mod:`vnuma.render.requirements`).

**The rule** (:func:`gpu_nodes`, used by the view, the guest view and the
semantic checks alike): every whole GPU the VM has gets one guest node per
host node recorded with it, none for a GPU without such nodes. They come
after the VM's other guest cells (its CPU cells, then its cold cell), GPU
by GPU in host PCI address order, each GPU's in host node order. Such a
node has no vCPUs and ``memory='0'`` (the GPU's memory reaches the guest
through the GPU, never as guest RAM), no ``<memnode>`` (nothing to bind),
and its distances mirror the host's SLIT like every other guest cell.
GPU partitions (vGPU, MIG as mediated devices) get none: the GPU is not
the guest's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vnuma.placement.model import Placement
from vnuma.render.pcie import PcieLayout
from vnuma.topology import DeviceKind, Host, format_cpuset


@dataclass(frozen=True, slots=True)
class GpuNode:
    """A guest NUMA node of a GPU: guest cell ``guest_cell`` stands for host node ``host_cell`` of GPU ``gpu``
    (its host PCI address)."""

    guest_cell: int
    host_cell: int
    gpu: str


def gpu_nodes(host: Host, placement: Placement) -> tuple[GpuNode, ...]:
    """The guest nodes of ``placement``'s GPUs on ``host`` (see the module doc for the rule)."""
    taken = [c.guest_cell for c in (*placement.cells, *placement.cold)]
    next_id = max(taken, default=-1) + 1
    found: list[GpuNode] = []
    for dev in sorted(placement.devices, key=lambda d: d.address):
        if dev.kind is not DeviceKind.GPU:
            continue
        for cell in host.cells:  # cells are in id order
            if cell.gpu == dev.address:
                found.append(GpuNode(next_id, cell.id, dev.address))
                next_id += 1
    return tuple(found)


def nodesets(nodes: tuple[GpuNode, ...]) -> dict[str, str]:
    """Host GPU address -> the ``<acpi nodeset>`` of its guest nodes."""
    by_gpu: dict[str, list[int]] = {}
    for node in nodes:
        by_gpu.setdefault(node.gpu, []).append(node.guest_cell)
    return {gpu: format_cpuset(ids) for gpu, ids in by_gpu.items()}


def tied(layout: PcieLayout, nodes: tuple[GpuNode, ...]) -> PcieLayout:
    """``layout`` with each GPU's hostdev carrying its guest nodes (``<acpi nodeset>``)."""
    sets = nodesets(nodes)
    if not sets:
        return layout
    hostdevs = tuple(replace(h, acpi_nodeset=sets.get(h.address, "")) if not h.mdev else h for h in layout.hostdevs)
    return replace(layout, hostdevs=hostdevs)
