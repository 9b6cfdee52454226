"""What a GPU can be cut into: its vGPU (mediated-device) types and how many of each it holds.

Pure: no I/O. A GPU offers types itself (time-sliced vGPU on a physical
function), or through its SR-IOV virtual functions (Ampere and later: each
VF carries the types and hosts one instance), or both. The capacity of a
type on the physical GPU is the number of its VFs that offer it; for a type
the physical function offers itself, the driver's available instances
(the only figure there is until vnuma claims partitions: then vnuma counts
its own claims rather than a count that drops as instances are created).
Free equals total while vnuma places no partitions.

MIG: a GPU whose PCI ``vendor:device`` a kept geometry lists
(:func:`vnuma.topology.mig.geometry_for`, over :attr:`Host.gpu_profiles`) can
hold instances of each of its profiles; a profile's total is how many
instances of it alone fit on the empty GPU (:func:`vnuma.topology.mig.free_counts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from vnuma.topology import DeviceKind, Host
from vnuma.topology.mig import MigGeometry, free_counts, geometry_for


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


@dataclass(frozen=True, slots=True)
class GpuUse:
    """What one GPU is doing now, from vnuma's claims: ``mode`` ``whole`` (passed through), ``vgpu`` or
    ``mig`` (holds partitions), None (unclaimed); ``free``: per vGPU type id or MIG profile name, how many
    more instances of it alone the GPU takes now; ``layout``: the partitions it holds, as
    :meth:`HeldPartition.label` says, each with its VM (MIG instances by start)."""

    mode: str | None
    free: Mapping[str, int]
    layout: tuple[HeldPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class HeldPartition:
    """One partition a GPU holds: its VM, vGPU type or MIG profile ``name``, MIG ``start`` or the ``vf``
    carrying a vGPU instance (both None: a vGPU instance on the physical function)."""

    vm: str
    name: str
    start: int | None = None
    vf: str | None = None

    def label(self) -> str:
        """``3g.40gb@4``, ``nvidia-1049 on 0000:3b:00.4``, or the bare type."""
        if self.start is not None:
            return f"{self.name}@{self.start}"
        return f"{self.name} on {self.vf}" if self.vf else self.name


@dataclass(frozen=True, slots=True)
class MigPartition:
    """One MIG profile a GPU offers, and how many instances of it alone the GPU holds."""

    profile: str
    total: int


def _gpus(host: Host) -> list[tuple[str, str, str]]:
    """(address, vendor id, product id) of the host's GPUs (physical functions)."""
    return [(d.address, d.vendor_id, d.product_id) for d in host.devices if d.kind is DeviceKind.GPU and d.pf is None]


def with_gpu_profiles(host: Host, geometries: Iterable[MigGeometry]) -> Host:
    """``host`` carrying the geometries (of ``geometries``) that match one of its GPUs."""
    geometries = tuple(geometries)
    wanted = {id(g): g for _a, v, p in _gpus(host) if (g := geometry_for(geometries, v, p)) is not None}
    kept = tuple(sorted(wanted.values(), key=lambda g: g.model))
    return host if kept == host.gpu_profiles else replace(host, gpu_profiles=kept)


def mig_geometry(host: Host) -> dict[str, MigGeometry]:
    """GPU address -> the MIG geometry of its model (GPUs of a model without a kept geometry are absent)."""
    return {a: g for a, v, p in _gpus(host) if (g := geometry_for(host.gpu_profiles, v, p)) is not None}


def mig_partitions(host: Host) -> dict[str, tuple[MigPartition, ...]]:
    """GPU address -> the MIG profiles it offers, in the geometry's order."""
    out: dict[str, tuple[MigPartition, ...]] = {}
    for address, g in mig_geometry(host).items():
        counts = free_counts(g, ())
        out[address] = tuple(MigPartition(p.name, counts[p.name]) for p in g.profiles)
    return out
