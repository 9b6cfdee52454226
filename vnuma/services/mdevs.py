"""The mediated devices of a VM's GPU partitions, made to exist where its domain is defined.

A vGPU partition is a mediated device of its type on the VF that carries it
(or on the GPU itself for a type its physical function offers), named by the
partition's UUID (:func:`vnuma.placement.partitions.partition_uuid`). Before
a domain is defined on a host, each of its vGPU devices is defined there
(``nodedev-define``, autostarted) and started unless it exists; when the
domain leaves the host (``vm undefine``, ``vm release --undefine``, a move
to another host), the devices go with it. A MIG instance's device is not
created: the MIG-backed vGPU type is the NVIDIA driver's, not in the
geometry, so the GPU instance and its device are the operator's (``nvidia-smi
mig -cgi``, ``mdevctl``) and vnuma only says when the UUID is missing.

Where the driver cannot create node devices (libvirt's test driver), nothing
is created and a note says so; the domain is still defined (libvirt checks a
mediated device when the domain starts, not when it is defined).
"""

from __future__ import annotations

from vnuma.hypervisor.base import Hypervisor, MdevResult
from vnuma.placement.model import Placement
from vnuma.placement.partitionmodel import PartitionAssignment, PartitionKind


def _what(a: PartitionAssignment) -> str:
    if a.kind is PartitionKind.MIG:
        return f"MIG {a.name}@{a.start} on GPU {a.gpu}"
    return f"vGPU {a.name} on {a.vf or a.gpu}"


def create_mdevs(hv: Hypervisor, placement: Placement) -> list[str]:
    """Make ``placement``'s mediated devices exist on ``hv``; a note for each one that could not be made."""
    notes: list[str] = []
    for a in placement.partitions:
        if a.kind is PartitionKind.MIG:
            if not hv.has_mdev(a.uuid):
                notes.append(
                    f"mediated device {a.uuid} ({_what(a)}) does not exist on {placement.host}: create the MIG "
                    "instance and its vGPU device with this UUID (nvidia-smi mig -cgi, mdevctl) before starting"
                )
            continue
        if hv.create_mdev(a.uuid, a.vf or a.gpu, a.name) is MdevResult.UNSUPPORTED:
            notes.append(
                f"mediated device {a.uuid} ({_what(a)}) not created: {hv.uri} cannot create node devices; "
                f"create it there (virsh nodedev-define, nodedev-start) before starting"
            )
    return notes


def remove_mdevs(hv: Hypervisor, placement: Placement) -> list[str]:
    """Remove ``placement``'s vGPU devices from ``hv`` (MIG devices are the operator's and stay); a note for
    each one the driver cannot remove."""
    notes: list[str] = []
    for a in placement.partitions:
        if a.kind is PartitionKind.VGPU and hv.remove_mdev(a.uuid) is MdevResult.UNSUPPORTED:
            notes.append(f"mediated device {a.uuid} ({_what(a)}) not removed: {hv.uri} cannot remove node devices")
    return notes
