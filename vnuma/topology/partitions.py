"""What a GPU can be cut into: its vGPU (mediated-device) types and how many of each it holds.

Pure: no I/O. A GPU offers types itself (time-sliced vGPU on a physical
function), or through its SR-IOV virtual functions (Ampere and later: each
VF carries the types and hosts one instance), or both. The capacity of a
type on the physical GPU is the number of its VFs that offer it; for a type
the physical function offers itself, the driver's available instances
(the only figure there is until vnuma claims partitions: then vnuma counts
its own claims rather than a count that drops as instances are created).
Free equals total while vnuma places no partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.topology import DeviceKind, Host


@dataclass(frozen=True, slots=True)
class Partition:
    """One vGPU type a GPU offers, and how many instances of it the GPU holds."""

    type: str
    name: str
    total: int


def vgpu_partitions(host: Host) -> dict[str, tuple[Partition, ...]]:
    """GPU address -> the vGPU types it offers (itself or through its VFs), by type id."""
    by_address = {d.address: d for d in host.devices}
    out: dict[str, tuple[Partition, ...]] = {}
    for gpu in host.devices:
        if gpu.kind is not DeviceKind.GPU or gpu.pf is not None:
            continue
        names: dict[str, str] = {}
        counts: dict[str, int] = {}
        for t in gpu.mdev_types:
            names.setdefault(t.id, t.name)
            counts[t.id] = counts.get(t.id, 0) + t.available
        for vf in (by_address[a] for a in gpu.vfs if a in by_address):
            for t in vf.mdev_types:
                names.setdefault(t.id, t.name)
                counts[t.id] = counts.get(t.id, 0) + 1
        if counts:
            out[gpu.address] = tuple(Partition(i, names[i], counts[i]) for i in sorted(counts))
    return out
