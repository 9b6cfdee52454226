"""Which pCPUs a placement's vCPUs, I/O threads and emulator threads run on, as the domain renders them.

Pure: no I/O. The renderer writes these pins; ``vm show`` prints them and the comparison with a domain
libvirt holds reads them back.
"""

from __future__ import annotations

from vnuma.placement.model import CpuPolicy, IoThreadPolicy, Placement, mixed_split


def vcpu_pins(p: Placement) -> dict[int, frozenset[int]]:
    """vCPU -> the pCPUs its ``<vcpupin>`` names: its own pCPU, or its cell's set when floating (shared,
    or a ``mixed`` VM's vCPU that is not dedicated)."""
    pins: dict[int, frozenset[int]] = {}
    for c in p.cells:
        if p.cpu_policy is CpuPolicy.MIXED:
            own, floats = mixed_split(c, p.dedicated_vcpus)
            pins.update((v, frozenset({own[v]}) if v in own else frozenset(floats)) for v in c.vcpus)
            continue
        for i, v in enumerate(c.vcpus):
            pins[v] = frozenset({c.pcpus[i]}) if p.cpu_policy is CpuPolicy.DEDICATED else frozenset(c.pcpus)
    return pins


def iothread_pins(p: Placement) -> frozenset[int]:
    """The I/O threads' pCPUs as rendered: the emulator's, or (``device-local``) those of the guest cell
    the VM's first device by PCI address is attached to (the emulator's when it has no device)."""
    if p.iothread_policy is IoThreadPolicy.DEVICE_LOCAL and p.devices:
        first = min(p.devices, key=lambda d: d.address)
        return frozenset(x for c in p.cells if c.guest_cell == first.guest_cell for x in c.pcpus)
    return emulator_pins(p)


def emulator_pins(p: Placement) -> frozenset[int]:
    """The emulator threads' pCPUs as rendered: the placement's own, else every vCPU pCPU."""
    return frozenset(p.emulator_pcpus or (x for c in p.cells for x in c.pcpus))
