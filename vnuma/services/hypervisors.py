"""Connections to the hosts' hypervisors: the one way services open them.

A host's stored URI is first resolved (:func:`vnuma.sources.demo.libvirt_uri`:
the demo host's ``test:///vnuma-demo`` is the node file this vnuma ships).

**The embedded hypervisor.** A host whose URI is ``test:///PATH`` (a node
file, as the demo host's) runs on libvirt's test driver: real libvirt (its
XML parser, schema validation, domain lifecycle) with no daemon and no
guests. The driver keeps such a connection's domains only for the life of
that connection, so vnuma keeps them for it: each domain's
inactive XML and whether it runs, in the inventory beside the host
(``hosts.embedded_domains``). Opening such a host restores them into the new
connection before any operation (what the node file brings is replaced by
what was kept: kept definitions defined, those that ran started); every
change made through the connection (define, start, stop, undefine, migrate)
is kept at once, with every domain the connection then holds; a command that
changes nothing writes nothing. So ``apply`` → ``vm stop`` → ``apply
--start`` → ``reconcile`` → ``vm undefine`` answer as on ``qemu:///system``.
Live-only state (a live re-pin's pins, a running domain's live XML) is not
kept: a restored domain runs its inactive definition. Two commands changing
one ``test://`` host at the same moment keep the last one's view.

``test:///default`` is left as libvirt makes it: its domains are shared by
every connection of one process while one is open (programs and tests that
embed libvirt rely on that), and they are the driver's stock ones in every
new process; vnuma keeps nothing for it.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from vnuma.errors import InventoryError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.hypervisor.libvirt_driver import connect
from vnuma.sources.demo import libvirt_uri

EMBEDDED_SCHEME = "test://"
SHARED_TEST_URI = "test:///default"


def is_embedded(uri: str) -> bool:
    """Whether ``uri`` is the embedded hypervisor: libvirt's test driver on a node file (whose
    domains vnuma keeps between connections; ``test:///default`` shares its own in the process)."""
    return uri.startswith(EMBEDDED_SCHEME) and uri.rstrip("/") != SHARED_TEST_URI


class KeptDomains(Protocol):
    """Where an embedded host's domains are kept: the inventory (its ORM repository or a reader)."""

    def embedded_domains(self, name: str) -> str | None:
        """The kept document (None: never kept)."""

    def keep_embedded_domains(self, name: str, document: str) -> None:
        """Replace the kept document."""


def same_hypervisor(host_a: str, uri_a: str | None, host_b: str, uri_b: str | None) -> bool:
    """Do two inventory hosts reach one libvirt? Two names with one URI do, except on the embedded
    hypervisor, where every host keeps its own domains (two demo hosts share a node file, not domains)."""
    if uri_a != uri_b:
        return False
    return host_a == host_b if uri_a is not None and is_embedded(uri_a) else True


def connect_uri(uri: str) -> Hypervisor:
    """A connection to ``uri`` for reading the host itself (capabilities, node devices), no domains restored."""
    return connect(libvirt_uri(uri))


def open_hypervisor(inventory: KeptDomains, host: str, uri: str) -> Hypervisor:
    """A connection to host ``host`` at its stored ``uri``; a ``test://`` host's kept domains restored.

    Raises:
        HypervisorError: libvirt cannot be reached, or refuses a kept domain.
        InventoryError: the kept domains cannot be read back.
    """
    hv = connect(libvirt_uri(uri))
    if not is_embedded(uri):
        return hv
    try:
        return _Embedded(hv, inventory, host)
    except BaseException:
        hv.close()
        raise


class _Embedded:
    """A test-driver connection that restores the host's kept domains and keeps every change it makes.

    Reads go straight to the connection; the changes below are made there, then kept (a change
    libvirt refuses changed nothing, and nothing is written).
    """

    def __init__(self, hv: Hypervisor, inventory: KeptDomains, host: str) -> None:
        self._hv, self._inventory, self._host = hv, inventory, host
        self.uri = hv.uri
        self._kept = inventory.embedded_domains(host)
        if self._kept is not None:
            _restore(hv, _decode(self._kept, host))
        # Nothing is written until something changes: a command that only reads leaves the inventory as it was.

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hv, name)

    def _keep(self) -> None:
        document = json.dumps(_snapshot(self._hv), sort_keys=True)
        if document != self._kept:
            self._inventory.keep_embedded_domains(self._host, document)
            self._kept = document

    def define(self, xml: str) -> None:
        """Define (validated), then keep."""
        self._hv.define(xml)
        self._keep()

    def start(self, name: str) -> None:
        """Start, then keep."""
        self._hv.start(name)
        self._keep()

    def stop(self, name: str) -> None:
        """Stop, then keep."""
        self._hv.stop(name)
        self._keep()

    def undefine(self, name: str) -> None:
        """Undefine, then keep."""
        self._hv.undefine(name)
        self._keep()

    def pin_live(self, name: str, vcpu_pins: dict[int, frozenset[int]], emulator: frozenset[int]) -> None:
        """Re-pin the running domain (its definition, which is what is kept, does not change)."""
        self._hv.pin_live(name, vcpu_pins, emulator)

    def set_memory_nodeset(self, name: str, nodeset: frozenset[int]) -> None:
        """Change the running domain's nodeset (not kept: the definition does not change)."""
        self._hv.set_memory_nodeset(name, nodeset)

    def migrate(self, name: str, dest_uri: str, dest_xml: str) -> None:
        """Migrate away, then keep (the domain is gone from here)."""
        self._hv.migrate(name, libvirt_uri(dest_uri), dest_xml)
        self._keep()

    def close(self) -> None:
        """Close the connection (everything was kept as it changed)."""
        self._hv.close()


def _snapshot(hv: Hypervisor) -> list[dict[str, Any]]:
    """Every domain the connection holds: name, inactive XML, running."""
    found = []
    for name in hv.domain_names():
        xml = hv.domain_xml(name, inactive=True)
        if xml is not None:
            found.append({"name": name, "xml": xml, "running": hv.domain_state(name) is DomainState.RUNNING})
    return found


def _decode(document: str, host: str) -> list[dict[str, Any]]:
    try:
        kept = json.loads(document)
        if isinstance(kept, list) and all(
            isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("xml"), str)
            and isinstance(d.get("running"), bool)
            for d in kept
        ):
            return kept
    except ValueError:
        pass
    raise InventoryError(
        f"host {host!r}: the embedded hypervisor's kept domains are unreadable",
        hint=f"remove the host and add it again (vnuma host remove {host})",
    )


def _restore(hv: Hypervisor, kept: list[dict[str, Any]]) -> None:
    """Make a fresh test-driver connection hold exactly the kept domains, in the kept states."""
    for name in hv.domain_names():
        # What the node file brings goes: a domain that was undefined since, or one to be replaced by
        # its kept definition (the driver gives a node-file domain without a UUID a new one each time).
        hv.undefine(name)
    for d in kept:
        hv.define(d["xml"])
        if d["running"]:
            hv.start(d["name"])
