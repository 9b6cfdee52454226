"""Which libvirt release a rendered domain needs: the one rule that apply checks a host's libvirt against.

Pure: no I/O. A libvirt older than an element silently drops it when it
defines the domain without validation, and refuses it with validation: a
guest whose GPU memory nodes are tied to nothing, or no domain at all. The
services therefore compare the host's libvirt version with
:func:`needed_libvirt` of the XML they are about to define, before they
change anything (:func:`vnuma.services.hypervisors.require_libvirt`). The
rule reads the XML itself, so an operator template that writes the element
(or leaves it out) is judged by what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

Version = tuple[int, int, int]

ACPI_NODESET_LIBVIRT: Version = (11, 8, 0)
"""The first libvirt release whose ``<hostdev>`` takes ``<acpi nodeset>`` (libvirt's NEWS for v11.8.0, "qemu: Add
support for NUMA affinity of PCI devices": "the existing ``<acpi>`` element has been extended with a ``nodeset``
attribute")."""


@dataclass(frozen=True, slots=True)
class Needed:
    """A domain needs libvirt ``version`` or later for ``what`` (an element, as the error names it)."""

    version: Version
    what: str


def needed_libvirt(root: etree._Element) -> Needed | None:
    """The newest libvirt release a parsed ``<domain>`` needs beyond libvirt 9.0.0, None when 9.0.0 takes it."""
    tied = [h for h in root.iterfind("devices/hostdev") if (acpi := h.find("acpi")) is not None
            and acpi.get("nodeset") is not None]
    if tied:
        return Needed(ACPI_NODESET_LIBVIRT, "<acpi nodeset> on a <hostdev> (a GPU's memory nodes in the guest)")
    return None


def version_text(version: Version) -> str:
    """``11.8.0``."""
    return ".".join(map(str, version))


def version_of(number: int) -> Version:
    """libvirt's version number (``virConnectGetLibVersion``: major * 1,000,000 + minor * 1,000 + micro) as a
    tuple."""
    return number // 1_000_000, number // 1_000 % 1_000, number % 1_000
