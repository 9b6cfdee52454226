"""Where PCI devices sit in the host's PCIe tree, and how far apart two of them are (NVIDIA's levels).

Pure: no I/O. A device's **root complex** is the first component of its
sysfs path (``pci0000:16``; hwloc: the host bridge above it) and its
**bridges** are the PCI bridges above it, nearest first, up to and including
the root port. The level of a pair is read at their lowest common ancestor,
as ``nvidia-smi topo -m`` prints it:

* ``PIX``: both hang directly below one bridge or one switch (each side has
  at most one bridge below the deepest bridge they share);
* ``PXB``: they share a bridge but more bridges lie between them;
* ``PHB``: one root complex, different root ports (through the host bridge);
* ``NODE``: different root complexes on one NUMA node;
* ``SYS``: different NUMA nodes (across the socket interconnect; two SNC/NPS
  cells of one socket are different nodes, as NVIDIA reports them).

A pair whose root complexes are unknown and share no bridge, on one NUMA
node, has no level (None): it may be ``PHB`` or ``NODE``. Two cells of one
socket are not merged: ``SYS`` is what the kernel's NUMA nodes say.
"""

from __future__ import annotations

from enum import StrEnum

from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.nvlink import nvlink_count


class Level(StrEnum):
    """NVIDIA's GPU-NIC levels, best first (NVML numbers them 10..50)."""

    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"


def pcie_level(a: PciDevice, b: PciDevice) -> Level | None:
    """The level between two distinct devices, or None when the facts cannot tell."""
    down_a, down_b = a.bridges[::-1], b.bridges[::-1]  # root port first
    known_rc = a.root_complex is not None and b.root_complex is not None
    if not known_rc or a.root_complex == b.root_complex:
        shared = 0
        for x, y in zip(down_a, down_b, strict=False):
            if x != y:
                break
            shared += 1
        if shared:
            return Level.PIX if len(down_a) - shared <= 1 and len(down_b) - shared <= 1 else Level.PXB
        if known_rc:
            return Level.PHB
    if a.numa_node is None or b.numa_node is None:
        return None
    if a.numa_node != b.numa_node:
        return Level.SYS
    return Level.NODE if known_rc else None


def gpu_matrix(host: Host) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The host's GPUs (by address) and the GPU x GPU matrix ``nvidia-smi topo -m`` prints: ``X`` on the
    diagonal, ``NV#`` where the GPUs are NVLinked (:attr:`Host.nvlinks`), else their PCIe level (``?`` where the
    facts cannot tell). GPUs in address order, as NVML numbers them."""
    gpus = host.devices_of(DeviceKind.GPU)
    rows = tuple(
        tuple("X" if a is b else (f"NV{n}" if (n := nvlink_count(host.nvlinks, a.address, b.address))
                                  else str(pcie_level(a, b) or "?")) for b in gpus)
        for a in gpus
    )
    return tuple(g.address for g in gpus), rows
