"""What a guest sees of its placement, and how to use it from inside: the guest view.

Pure: no I/O. Pinning on the host is wasted when the inference process in
the guest runs on the wrong guest node, so the view says, in the guest's own
terms, which node holds which vCPUs and memory, which node each
passed-through device sits on and at which guest PCI address, and gives a
launch prefix per device (``numactl`` binding to the device's node, and for
GPUs the ``CUDA_VISIBLE_DEVICES`` index to pair with it).

:func:`vnuma.render.view.build_view` builds it from the same guest cells,
distances and PCIe layout it renders, so the view cannot drift from the
domain XML. ``vnuma vm guest-view`` prints it; ``apply --guest-hints``
writes :func:`hint_string` into an SMBIOS OEM string (type 11) the guest
reads at boot (``dmidecode -t 11``, or ``/sys/firmware/dmi/tables/DMI``).

CUDA numbers GPUs fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``;
with it, a GPU's index is its rank by PCI address among the guest's GPUs,
which is what ``cuda_index`` is (every GPU the guest has is one vnuma
passed through). The launch prefix therefore sets both variables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vnuma.placement.model import CellAssignment, CpuPolicy, Placement
from vnuma.render.gpumemory import GpuNode
from vnuma.render.pcie import PcieLayout
from vnuma.topology import DeviceKind

HINT_PREFIX = "vnuma-guest-view:"
"""The OEM string's start; the rest is :func:`as_dict` as compact JSON."""


@dataclass(frozen=True, slots=True)
class GuestNode:
    """A guest NUMA node: its vCPUs (the guest's CPU numbers), memory, host page size and distances."""

    id: int
    vcpus: tuple[int, ...]
    memory_kib: int
    page_size_kib: int
    distances: tuple[tuple[int, int], ...]
    """(other node, distance) pairs, this node included; empty when the domain gives none."""
    gpu: str | None = None
    """For a GPU's memory node (:mod:`vnuma.render.gpumemory`): the GPU's host address; None for other nodes."""


@dataclass(frozen=True, slots=True)
class GuestDevice:
    """A passed-through device as the guest finds it."""

    address: str
    """The host PCI address; for a GPU partition (kind ``vgpu``/``mig``) its mediated device's UUID."""
    kind: str
    node: int | None
    """The guest node its expander bus is on; None for a device the host gives no NUMA node (the guest reads
    none either)."""
    guest_address: str
    cuda_index: int | None
    """Rank among the guest's GPUs in PCI order (None for other devices)."""
    memory_nodes: tuple[int, ...] = ()
    """A GPU's own guest NUMA nodes (its memory, and those kept for MIG), tied to it by ``<acpi nodeset>``."""


@dataclass(frozen=True, slots=True)
class GuestView:
    vm: str
    tenant: str | None
    host: str
    nodes: tuple[GuestNode, ...]
    devices: tuple[GuestDevice, ...]
    dedicated_vcpus: tuple[int, ...] = ()
    """A ``mixed`` VM's vCPUs pinned 1:1 on the host (where latency-bound threads belong); empty otherwise."""

    def node(self, node_id: int) -> GuestNode:
        return next(n for n in self.nodes if n.id == node_id)


def guest_view(
    placement: Placement, cells: Iterable[CellAssignment], distances: Mapping[int, Mapping[int, int]],
    pcie: PcieLayout, gpu_cells: tuple[GpuNode, ...] = (),
) -> GuestView:
    """The view of ``placement`` whose guest ``cells`` (and GPU nodes ``gpu_cells``) get ``distances`` and
    devices ``pcie``."""
    nodes = tuple(
        GuestNode(
            c.guest_cell, tuple(sorted(c.vcpus)), c.memory_kib, c.page_size_kib,
            tuple(sorted(distances.get(c.guest_cell, {}).items())),
        )
        for c in sorted(cells, key=lambda c: c.guest_cell)
    ) + tuple(
        GuestNode(g.guest_cell, (), 0, 0, tuple(sorted(distances.get(g.guest_cell, {}).items())), g.gpu)
        for g in gpu_cells
    )
    own = {a: tuple(g.guest_cell for g in gpu_cells if g.gpu == a) for a in {g.gpu for g in gpu_cells}}
    guest_address = {h.address: h.guest_address for h in pcie.hostdevs}
    items = [(d.address, str(d.kind), d.guest_cell if d.host_cell is not None else None, d.kind is DeviceKind.GPU)
             for d in placement.devices]
    items += [(a.uuid, a.kind.value, a.guest_cell if a.host_cell is not None else None, True)
              for a in placement.partitions]
    items.sort(key=lambda i: guest_address[i[0]])
    gpus = [address for address, _kind, _node, gpu in items if gpu]  # a partition is a GPU to the guest
    devices = tuple(
        GuestDevice(address, kind, node, guest_address[address], gpus.index(address) if gpu else None,
                    own.get(address, ()))
        for address, kind, node, gpu in items
    )
    dedicated = tuple(sorted(placement.dedicated_vcpus)) if placement.cpu_policy is CpuPolicy.MIXED else ()
    return GuestView(placement.vm, placement.tenant, placement.host, nodes, devices, dedicated)


def launch_prefix(view: GuestView, node_id: int | None, devices: Iterable[GuestDevice] = ()) -> str:
    """The command prefix that runs a process on guest node ``node_id`` with ``devices``' GPUs visible.

    The node's binding is :func:`numactl_words`. A device on no node (None) binds
    nothing: the prefix only makes its GPU visible ("" for another device).
    """
    cuda = [str(d.cuda_index) for d in devices if d.cuda_index is not None]
    words = [f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={','.join(cuda)}"] if cuda else []
    if node_id is None:
        return " ".join(words)
    return " ".join(words + numactl_words(view, node_id))


def numactl_words(view: GuestView, node_id: int) -> list[str]:
    """``numactl`` binding a process to guest node ``node_id``: its CPUs when it has vCPUs (a memory-only node
    has none to run on), and its memory — ``--membind`` there, except that a process on a CPU node of a VM
    with memory-only nodes (its cold tier, or CPU-less cells) gets ``--preferred``: the node's memory first,
    the kernel then spilling into the memory-only nodes rather than failing (``--membind`` would forbid
    them)."""
    node = view.node(node_id)
    words = ["numactl"]
    if node.vcpus:
        words.append(f"--cpunodebind={node_id}")
    spill = node.vcpus and any(not n.vcpus and n.memory_kib for n in view.nodes)
    words.append(f"--preferred={node_id}" if spill else f"--membind={node_id}")
    return words


def as_dict(view: GuestView) -> dict[str, object]:
    """The ``vm guest-view --json`` object (keys are only ever added; a ``mixed`` VM's adds
    ``"cpu_policy"`` and ``"dedicated_vcpus"``, also per node; a GPU's memory node adds ``"gpu"``, the GPU's
    guest address, and that GPU ``"memory_nodes"``)."""
    dedicated = frozenset(view.dedicated_vcpus)
    mixed: dict[str, object] = {}
    if dedicated:
        mixed = {"cpu_policy": "mixed", "dedicated_vcpus": list(view.dedicated_vcpus)}
    return {
        "vm": view.vm,
        "tenant": view.tenant,
        "host": view.host,
        **mixed,
        "nodes": [
            {
                "id": n.id,
                "vcpus": list(n.vcpus),
                **({"dedicated_vcpus": [v for v in n.vcpus if v in dedicated]} if dedicated else {}),
                "memory_kib": n.memory_kib,
                "page_size_kib": n.page_size_kib,
                "distances": {str(other): value for other, value in n.distances},
                "devices": [d.guest_address for d in view.devices if d.node == n.id],
                "launch": launch_prefix(view, n.id, [d for d in view.devices if d.node == n.id]),
                **({"gpu": _guest_address(view, n.gpu)} if n.gpu else {}),
            }
            for n in view.nodes
        ],
        "devices": [
            {
                "address": d.address,
                "kind": d.kind,
                "node": d.node,
                "guest_address": d.guest_address,
                "cuda_index": d.cuda_index,
                "launch": launch_prefix(view, d.node, [d]),
                **({"memory_nodes": list(d.memory_nodes)} if d.memory_nodes else {}),
            }
            for d in view.devices
        ],
    }


def _guest_address(view: GuestView, address: str) -> str:
    """Where the guest finds host device ``address``."""
    return next(d.guest_address for d in view.devices if d.address == address)


def hint_string(view: GuestView) -> str:
    """The SMBIOS OEM string ``apply --guest-hints`` gives the guest: the prefix and compact JSON."""
    return HINT_PREFIX + json.dumps(as_dict(view), separators=(",", ":"), sort_keys=True)
