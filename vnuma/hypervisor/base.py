"""The hypervisor protocol: what services need from a host's hypervisor.

Only ``libvirt_driver`` implements it (and is the only importer of libvirt).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol


class DomainState(StrEnum):
    """Coarse domain states as the inventory records them."""

    MISSING = "missing"
    DEFINED = "defined"
    RUNNING = "running"
    STOPPED = "stopped"


class MdevResult(StrEnum):
    """What a mediated-device request did: ``created`` / ``removed``; ``exists`` / ``absent``: there was
    nothing to do; ``unsupported``: the driver cannot create or remove node devices (libvirt's test driver)."""

    CREATED = "created"
    EXISTS = "exists"
    REMOVED = "removed"
    ABSENT = "absent"
    UNSUPPORTED = "unsupported"


class Hypervisor(Protocol):
    """One open connection to a host's hypervisor."""

    uri: str

    def capabilities_xml(self) -> str:
        """The host capabilities document (``virsh capabilities``)."""
        ...

    def libvirt_version(self) -> int:
        """The version of the libvirt the host runs (``virsh version``'s library one, as
        ``virConnectGetLibVersion`` gives it: major * 1,000,000 + minor * 1,000 + micro)."""
        ...

    def pci_device_xmls(self) -> list[tuple[str, str]]:
        """(node device name, XML) for every PCI node device."""
        ...

    def mdev_device_xmls(self) -> list[tuple[str, str]]:
        """(node device name, XML) for every mediated device (``mdev`` capability)."""
        ...

    def has_mdev(self, uuid: str) -> bool:
        """Whether a mediated device with this UUID is known to the host (defined or active)."""
        ...

    def create_mdev(self, uuid: str, parent: str, type_id: str) -> MdevResult:
        """Make the mediated device ``uuid`` of ``type_id`` on PCI function ``parent`` exist and run: defined
        (persistent, autostarted) and started; one with that UUID on another parent or of another type is
        replaced."""
        ...

    def remove_mdev(self, uuid: str) -> MdevResult:
        """Stop and undefine the mediated device ``uuid``, if there is one."""
        ...

    def define(self, xml: str) -> None:
        """Define (or redefine) a persistent domain, validating against libvirt's schema."""
        ...

    def start(self, name: str) -> None:
        """Start a defined domain."""
        ...

    def stop(self, name: str) -> None:
        """Power a running domain off."""
        ...

    def undefine(self, name: str) -> None:
        """Remove a domain's persistent definition (stopping it first if running)."""
        ...

    def domain_xml(self, name: str, *, inactive: bool = False) -> str | None:
        """The XML libvirt holds for ``name`` (None when no such domain)."""
        ...

    def domain_uuid(self, name: str) -> str | None:
        """The UUID libvirt holds for ``name`` (None when no such domain)."""
        ...

    def domain_state(self, name: str) -> DomainState:
        """Where the domain is: missing, running or stopped (defined, not running)."""
        ...

    def monitor_stats(self, names: list[str]) -> dict[str, dict[str, object]]:
        """The named domains' ``VIR_DOMAIN_STATS_MEMORY`` and ``CPU_TOTAL`` stats (memory-bandwidth and
        cache-occupancy monitors among them), read in one call, by name; domains that are gone are left out."""
        ...

    def running_stats(self) -> dict[str, dict[str, object]]:
        """Every running domain's ``VIR_DOMAIN_STATS_MEMORY``, ``CPU_TOTAL`` and ``BALLOON`` stats, read in one
        call, by name (what ``vnuma watch`` reads of a host each round)."""
        ...

    def free_pages(self, cells: list[int], sizes_kib: list[int]) -> dict[int, dict[int, int]]:
        """Free pages of each page size (KiB) on each host cell, read in one call (``getFreePages``; the
        system page size's count is the cell's free memory)."""
        ...

    def domain_names(self) -> list[str]:
        """Names of every domain libvirt holds (persistent or transient, running or not), sorted."""
        ...

    def pin_live(self, name: str, vcpu_pins: dict[int, frozenset[int]], emulator: frozenset[int]) -> None:
        """Re-pin a running domain's vCPU threads and emulator threads now (its definition is not changed)."""
        ...

    def set_memory_nodeset(self, name: str, nodeset: frozenset[int]) -> None:
        """Change a running domain's memory nodeset now (libvirt allows it for ``restrictive`` numatune)."""
        ...

    def migrate(self, name: str, dest_uri: str, dest_xml: str) -> None:
        """Live-migrate a running domain to ``dest_uri`` with ``dest_xml`` as its definition there
        (persistent on the destination, undefined on the source)."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...
