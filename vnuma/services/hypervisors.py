"""Connections to the hosts' hypervisors: the one way services open them.

A host's stored URI is first resolved (:func:`vnuma.sources.demo.libvirt_uri`:
the demo host's ``test:///vnuma-demo`` is the node file this vnuma ships).

**The embedded hypervisor.** A host whose URI is ``test:///PATH`` (a node
file, as the demo host's) runs on libvirt's test driver: real libvirt (its
XML parser, schema validation, domain lifecycle) with no daemon and no
guests. The driver keeps such a connection's domains only for the life of
that connection, so vnuma keeps them for it: each domain's
inactive XML and whether it runs, one inventory row per domain
(:mod:`vnuma.inventory.embedded`). Opening such a host restores them into the new
connection before any operation (what the node file brings is replaced by
what was kept: kept definitions defined, those that ran started); every
change made through the connection (define, start, stop, undefine, migrate)
is kept at once, as that domain's row alone (the host's first change keeps
every domain the connection holds); a command that changes nothing writes
nothing. So ``apply`` → ``vm stop`` → ``apply --start`` → ``reconcile`` →
``vm undefine`` answer as on ``qemu:///system``, and commands changing
different domains of one host at the same moment (eight ``vnuma apply`` at
once) all stay kept; two changing the same domain at once keep the last one's.
Live-only state (a live re-pin's pins, a running domain's live XML) is not
kept: a restored domain runs its inactive definition.

``test:///default`` is left as libvirt makes it: its domains are shared by
every connection of one process while one is open (programs and tests that
embed libvirt rely on that), and they are the driver's stock ones in every
new process; vnuma keeps nothing for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from vnuma.errors import HypervisorError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.hypervisor.libvirt_driver import connect
from vnuma.inventory.embedded import KeptDomain
from vnuma.render.metadata import parse_domain_xml
from vnuma.render.requirements import needed_libvirt, version_of, version_text
from vnuma.sources.demo import libvirt_uri

EMBEDDED_SCHEME = "test://"
SHARED_TEST_URI = "test:///default"


def is_embedded(uri: str) -> bool:
    """Whether ``uri`` is the embedded hypervisor: libvirt's test driver on a node file (whose
    domains vnuma keeps between connections; ``test:///default`` shares its own in the process)."""
    return uri.startswith(EMBEDDED_SCHEME) and uri.rstrip("/") != SHARED_TEST_URI


class KeptDomains(Protocol):
    """Where an embedded host's domains are kept: the inventory (its ORM repository or a reader)."""

    def embedded_domains(self, name: str) -> dict[str, KeptDomain] | None:
        """The kept domains by name (None: never kept)."""

    def keep_embedded_domain(
        self, host: str, name: str, now: KeptDomain | None, held: Sequence[KeptDomain]
    ) -> None:
        """Keep one domain as ``now`` (None: gone); ``held``: every domain, for the host's first keep."""


def same_hypervisor(host_a: str, uri_a: str | None, host_b: str, uri_b: str | None) -> bool:
    """Do two inventory hosts reach one libvirt? Two names with one URI do, except on the embedded
    hypervisor, where every host keeps its own domains (two demo hosts share a node file, not domains)."""
    if uri_a != uri_b:
        return False
    return host_a == host_b if uri_a is not None and is_embedded(uri_a) else True


_opened: list[str] = []
"""Hosts whose hypervisor this process opened (:func:`opened_any`)."""


def opened_any() -> bool:
    """Whether this process opened any host's hypervisor (a command stopped half-way may have changed it)."""
    return bool(_opened)


def connect_uri(uri: str) -> Hypervisor:
    """A connection to ``uri`` for reading the host itself (capabilities, node devices), no domains restored."""
    return connect(libvirt_uri(uri))


def require_libvirt(hv: Hypervisor, xml: str, host: str, vm: str) -> None:
    """Refuse ``xml`` for a host whose libvirt is older than the domain needs
    (:func:`vnuma.render.requirements.needed_libvirt`); every path that defines or migrates a domain asks this
    before it changes anything, so an older libvirt never holds half the domain (it would drop what it does
    not know).

    Raises:
        HypervisorError: the host's libvirt is too old (exit 8), naming the version needed.
    """
    needed = needed_libvirt(parse_domain_xml(xml, f"domain XML of VM {vm!r}"))
    if needed is None:
        return
    have = version_of(hv.libvirt_version())
    if have < needed.version:
        raise HypervisorError(
            f"host {host!r} runs libvirt {version_text(have)}; VM {vm!r} needs libvirt {version_text(needed.version)} "
            f"or later for {needed.what}",
            hint=f"upgrade libvirt on {host} to {version_text(needed.version)} or later (and QEMU to one with "
                 "acpi-generic-initiator), or place the VM on a host that has it",
        )


def open_hypervisor(inventory: KeptDomains, host: str, uri: str) -> Hypervisor:
    """A connection to host ``host`` at its stored ``uri``; a ``test://`` host's kept domains restored.

    Raises:
        HypervisorError: libvirt cannot be reached, or refuses a kept domain.
    """
    hv = connect(libvirt_uri(uri))
    _opened.append(host)
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
        kept = inventory.embedded_domains(host)
        self._seeded = kept is not None
        self._kept = dict(kept or {})
        if kept is not None:
            _restore(hv, kept.values())
        # Nothing is written until something changes: a command that only reads leaves the inventory as it was.

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hv, name)

    def _keep(self, name: str) -> None:
        """Keep domain ``name`` as the connection now holds it (its row alone; the first time, every domain)."""
        now = _seen(self._hv, name)
        if self._seeded and self._kept.get(name) == now:
            return
        held = () if self._seeded else _snapshot(self._hv)
        self._inventory.keep_embedded_domain(self._host, name, now, held)
        self._seeded = True
        if now is None:
            self._kept.pop(name, None)
        else:
            self._kept[name] = now

    def define(self, xml: str) -> None:
        """Define (validated), then keep."""
        self._hv.define(xml)
        self._keep(_domain_name(xml))

    def start(self, name: str) -> None:
        """Start, then keep."""
        self._hv.start(name)
        self._keep(name)

    def stop(self, name: str) -> None:
        """Stop, then keep."""
        self._hv.stop(name)
        self._keep(name)

    def undefine(self, name: str) -> None:
        """Undefine, then keep."""
        self._hv.undefine(name)
        self._keep(name)

    def pin_live(self, name: str, vcpu_pins: dict[int, frozenset[int]], emulator: frozenset[int]) -> None:
        """Re-pin the running domain (its definition, which is what is kept, does not change)."""
        self._hv.pin_live(name, vcpu_pins, emulator)

    def set_memory_nodeset(self, name: str, nodeset: frozenset[int]) -> None:
        """Change the running domain's nodeset (not kept: the definition does not change)."""
        self._hv.set_memory_nodeset(name, nodeset)

    def migrate(self, name: str, dest_uri: str, dest_xml: str) -> None:
        """Migrate away, then keep (the domain is gone from here)."""
        self._hv.migrate(name, libvirt_uri(dest_uri), dest_xml)
        self._keep(name)

    def close(self) -> None:
        """Close the connection (everything was kept as it changed)."""
        self._hv.close()


def _seen(hv: Hypervisor, name: str) -> KeptDomain | None:
    """Domain ``name`` as the connection holds it (None: no such domain)."""
    xml = hv.domain_xml(name, inactive=True)
    return None if xml is None else KeptDomain(name, xml, hv.domain_state(name) is DomainState.RUNNING)


def _snapshot(hv: Hypervisor) -> list[KeptDomain]:
    """Every domain the connection holds."""
    return [d for d in (_seen(hv, name) for name in hv.domain_names()) if d is not None]


def _domain_name(xml: str) -> str:
    """The ``<name>`` of a domain XML (libvirt accepted it: it has one)."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    name = etree.fromstring(xml.encode(), parser).findtext("name")
    assert name, "libvirt defined a domain without a name"
    return name.strip()


def _restore(hv: Hypervisor, kept: Iterable[KeptDomain]) -> None:
    """Make a fresh test-driver connection hold exactly the kept domains, in the kept states."""
    for name in hv.domain_names():
        # What the node file brings goes: a domain that was undefined since, or one to be replaced by
        # its kept definition (the driver gives a node-file domain without a UUID a new one each time).
        hv.undefine(name)
    for d in kept:
        hv.define(d.xml)
        if d.running:
            hv.start(d.name)
