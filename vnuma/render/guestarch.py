"""The guest's architecture: the host's, and what a libvirt domain of that architecture needs.

Pure: no I/O. One rule for every domain vnuma renders: the guest's arch is the
host's as the inventory records it (:attr:`vnuma.topology.Host.arch`) unless
the render options name one; the machine type, firmware and interrupt
controller follow the arch (an x86_64 guest is q35 with an APIC and libvirt's
default firmware; an aarch64 guest is ``virt`` with a GICv3 and UEFI, the
only firmware that boots an Arm server guest with ACPI).
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.errors import RenderError


@dataclass(frozen=True, slots=True)
class GuestArch:
    """``<os><type arch machine>``, ``<os firmware>`` ("" for libvirt's default) and the interrupt controller:
    ``apic`` (x86) or ``gic_version`` (Arm; "" for none)."""

    arch: str
    machine: str
    firmware: str
    apic: bool
    gic_version: str


_DEFAULTS = {
    "x86_64": GuestArch("x86_64", "q35", "", apic=True, gic_version=""),
    "aarch64": GuestArch("aarch64", "virt", "efi", apic=False, gic_version="3"),
}
ARCHES = tuple(_DEFAULTS)
"""The guest architectures vnuma renders."""
_HOST_ARCHES = {**_DEFAULTS, "i686": _DEFAULTS["x86_64"]}
"""Host arch -> its guests' defaults: an i686 host (libvirt's test driver reports one) gets x86_64 guests, as
every host did before vnuma followed the arch."""


def guest_arch(host_name: str, host_arch: str, arch: str | None = None, machine: str | None = None) -> GuestArch:
    """The guest's arch: ``arch`` when given, else the host's; ``machine`` when given, else the arch's.

    Raises:
        RenderError: an arch vnuma renders no domain for.
    """
    chosen = arch or host_arch
    base = _DEFAULTS.get(chosen) if arch else _HOST_ARCHES.get(chosen)
    if base is None:
        whose = "asked for" if arch else f"of host {host_name!r}"
        raise RenderError(
            f"vnuma renders {' and '.join(ARCHES)} domains, not {chosen} (the arch {whose})",
            hint="place the VM on an x86_64 or aarch64 host",
        )
    return base if machine is None else GuestArch(base.arch, machine, base.firmware, base.apic, base.gic_version)
