"""The host's PCIe layout as text: a device tree (``lspci -t`` limited to GPUs and NICs) and a GPU x NIC
matrix of NVIDIA's levels (``nvidia-smi topo -m``).

Pure: no I/O. Only GPUs and NICs and the bridges above them are drawn;
virtual functions are counted on their physical function, not listed, and
stay out of the matrix. A device whose root complex is unknown (its node
device had no sysfs path) hangs under ``(root complex unknown)``. A GPU
whose own memory is a NUMA node (:attr:`vnuma.topology.Cell.gpu`) says so
on its line: ``memory: node 255, 15 GiB``.
"""

from __future__ import annotations

from collections.abc import Iterable

from vnuma.topology import DeviceKind, Host, PciDevice, format_cpuset, format_size_kib
from vnuma.topology.pcie import pcie_level

UNKNOWN_ROOT = "(root complex unknown)"
_SHOWN = (DeviceKind.GPU, DeviceKind.NIC)

Trie = dict[str, "Trie"]


def shown_devices(host: Host) -> list[PciDevice]:
    """GPUs and NICs that are not virtual functions, in address order."""
    return shown(host.devices)


def shown(devices: Iterable[PciDevice]) -> list[PciDevice]:
    """Of ``devices``, the GPUs and NICs that are not virtual functions, in address order."""
    return sorted((d for d in devices if d.kind in _SHOWN and d.pf is None), key=lambda d: d.address)


def tree_lines(host: Host) -> list[str]:
    """The tree, one line per root complex, bridge and device; empty when the host has no GPU or NIC."""
    devices = {d.address: d for d in shown_devices(host)}
    roots: Trie = {}
    for dev in devices.values():
        node = roots.setdefault(dev.root_complex or UNKNOWN_ROOT, {})
        for hop in (*reversed(dev.bridges), dev.address):
            node = node.setdefault(hop, {})
    cells = {}
    for dev in devices.values():
        if dev.root_complex is not None and dev.numa_node is not None:
            cells.setdefault(dev.root_complex, set()).add(dev.numa_node)
    lines: list[str] = []
    memory = gpu_memory_texts(host)
    for root in sorted(roots, key=lambda r: (r == UNKNOWN_ROOT, r)):
        nodes = cells.get(root)
        lines.append(root + (f" (cell {','.join(map(str, sorted(nodes)))})" if nodes else ""))
        _walk(roots[root], "", devices, memory, lines)
    return lines


def gpu_memory_texts(host: Host) -> dict[str, str]:
    """``memory: node 255, 15 GiB`` (``nodes 250-251, 30 GiB``) by the address of the GPU those nodes belong to."""
    nodes: dict[str, list[tuple[int, int]]] = {}
    for cell in host.cells:
        if cell.gpu is not None:
            nodes.setdefault(cell.gpu, []).append((cell.id, cell.memory_kib))
    return {
        gpu: f"memory: node{'s' if len(held) > 1 else ''} {format_cpuset(i for i, _k in held)}, "
        f"{format_size_kib(sum(k for _i, k in held))}"
        for gpu, held in nodes.items()
    }


def _walk(node: Trie, prefix: str, devices: dict[str, PciDevice], memory: dict[str, str], lines: list[str]) -> None:
    keys = sorted(node)
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        dev = devices.get(key)
        lines.append(f"{prefix}{'└─ ' if last else '├─ '}{key}{_describe(dev, memory.get(key)) if dev else ''}")
        _walk(node[key], prefix + ("   " if last else "│  "), devices, memory, lines)


def _describe(dev: PciDevice, memory: str | None) -> str:
    cell = "-" if dev.numa_node is None else dev.numa_node
    parts = [f"  {dev.kind} {dev.vendor_id}:{dev.product_id}", f"cell {cell}"]
    if memory is not None:
        parts.append(memory)
    if dev.link is not None:
        link = dev.link
        parts.append(f"x{link.width} {link.speed_gts:g} GT/s")
        if link.downtrained:
            parts.append(f"DOWNTRAINED (can do x{link.max_width} {link.max_speed_gts:g} GT/s)")
    if dev.vfs or dev.vf_max:
        parts.append(f"{len(dev.vfs)} VFs" + (f" of {dev.vf_max}" if dev.vf_max is not None else ""))
    if dev.iommu_group is not None:
        peers = f" with {', '.join(dev.iommu_peers)}" if dev.iommu_peers else ""
        parts.append(f"iommu group {dev.iommu_group}{peers}")
    return "  ".join(parts)


def level_table(host: Host) -> tuple[list[str], list[tuple[str, ...]]] | None:
    """Columns and rows of the GPU x NIC matrix (``?`` where the facts cannot tell); None without both."""
    shown = shown_devices(host)
    gpus = [d for d in shown if d.kind is DeviceKind.GPU]
    nics = [d for d in shown if d.kind is DeviceKind.NIC]
    if not gpus or not nics:
        return None
    columns = ["GPU", "CELL", *(n.address for n in nics)]
    rows = [
        (g.address, "-" if g.numa_node is None else str(g.numa_node),
         *(str(pcie_level(g, n) or "?") for n in nics))
        for g in gpus
    ]
    return columns, rows
