"""Host use cases: discover through libvirt, import from files, refresh, list, reserve."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.inventory.db import open_inventory
from vnuma.inventory.hostwrite import Registrar, open_registrar
from vnuma.services import Settings
from vnuma.services.files import read_input
from vnuma.services.hypervisors import connect_uri
from vnuma.services.names import check_name
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.demo import DEMO_OVERRIDE, DEMO_URI, demo_capabilities_path
from vnuma.sources.hwloc import parse_hwloc
from vnuma.sources.nodedev import (
    parse_mdevs_file_content,
    parse_nodedev,
    parse_nodedev_file_content,
    with_parent_bridges,
)
from vnuma.topology import Host, Mdev, PciDevice, Source, check_host, format_cpuset, format_size_kib
from vnuma.topology.resctrl import Resctrl

if TYPE_CHECKING:
    from vnuma.inventory.repo import Inventory


def discover(name: str, uri: str, capabilities: Path | None) -> Host:
    """Read a host's topology and PCI devices through libvirt.

    ``capabilities`` supplies the topology where the driver cannot (libvirt's
    test driver reports no NUMA cells for a custom node file); PCI devices
    always come from libvirt's node devices.

    Raises:
        HypervisorError: libvirt cannot be reached or refuses.
        InvalidInputError: the topology cannot be read.
    """
    hv = connect_uri(uri)
    try:
        caps_xml = hv.capabilities_xml() if capabilities is None else None
        device_xmls = hv.pci_device_xmls()
        mdev_xmls = hv.mdev_device_xmls()
    finally:
        hv.close()
    hint = None
    if capabilities is not None:
        data, what = read_input(capabilities, "capabilities"), str(capabilities)
    else:
        assert caps_xml is not None
        data, what = caps_xml.encode(), f"{uri} capabilities"
        if uri.startswith("test://"):
            hint = ("libvirt's test driver reports NUMA cells for test:///default (2 stock cells) and none for a "
                    "node file: give the host's topology with --capabilities FILE (`virsh capabilities` of the real "
                    "host), or add the demo host (vnuma host add NAME --demo)")
    host = parse_capabilities(data, name=name, what=what, uri=uri, source=Source.LIBVIRT, no_topology_hint=hint)
    devices = [d for n, xml in device_xmls if (d := parse_nodedev(xml.encode(), what=f"{uri} {n}"))]
    mdevs = [m for n, xml in mdev_xmls for m in parse_mdevs_file_content(xml.encode(), f"{uri} {n}")]
    return check_host(_with_devices(host, devices, mdevs))


def _with_devices(host: Host, devices: Sequence[PciDevice], mdevs: Sequence[Mdev] = ()) -> Host:
    return replace(host, devices=with_parent_bridges(devices), mdevs=tuple(sorted(mdevs, key=lambda m: m.uuid)))


Document = tuple[str, bytes]
"""An input's name in messages (its file name) and its content."""


def _one_source(capabilities: object, nodedevs: Sequence[object], hwloc: object) -> None:
    if (capabilities is None) == (hwloc is None):
        raise InvalidInputError(
            "give exactly one of --capabilities FILE or --hwloc FILE",
            hint="vnuma host import NAME --capabilities caps.xml [--nodedev dev.xml]... | --hwloc topo.xml",
        )
    if hwloc is not None and nodedevs:
        raise InvalidInputError("--nodedev goes with --capabilities; hwloc files carry their PCI devices")


def import_documents(
    name: str, capabilities: Document | None, nodedevs: Sequence[Document], hwloc: Document | None
) -> Host:
    """Build a host from capabilities XML (+ node-device XML) or hwloc XML.

    Raises:
        InvalidInputError: neither or both of capabilities/hwloc, malformed documents, a device given twice.
    """
    _one_source(capabilities, nodedevs, hwloc)
    if hwloc is not None:
        return parse_hwloc(hwloc[1], name=name, what=hwloc[0])
    assert capabilities is not None
    host = parse_capabilities(capabilities[1], name=name, what=capabilities[0])
    devices: list[PciDevice] = []
    mdevs: list[Mdev] = []
    for what, content in nodedevs:
        devices.extend(parse_nodedev_file_content(content, what))
        mdevs.extend(parse_mdevs_file_content(content, what))
    seen: set[str] = set()
    for dev in devices:
        if dev.address in seen:
            raise InvalidInputError(f"PCI device {dev.address} is given twice in the --nodedev files")
        seen.add(dev.address)
    return check_host(_with_devices(host, devices, mdevs))


def read_documents(
    capabilities: Path | None, nodedevs: Sequence[Path], hwloc: Path | None
) -> tuple[Document | None, list[Document], Document | None]:
    """The files ``host import`` names, read (each named by its path).

    Raises:
        InvalidInputError: neither or both of capabilities/hwloc; a missing, unreadable or oversized file.
    """
    _one_source(capabilities, nodedevs, hwloc)
    return (
        (str(capabilities), read_input(capabilities, "capabilities")) if capabilities is not None else None,
        [(str(p), read_input(p, "node device")) for p in nodedevs],
        (str(hwloc), read_input(hwloc, "hwloc")) if hwloc is not None else None,
    )


def import_files(
    name: str, capabilities: Path | None, nodedevs: Sequence[Path], hwloc: Path | None
) -> Host:
    """Build a host from a capabilities file (+ node-device files) or an hwloc XML file (see
    :func:`import_documents`)."""
    return import_documents(name, *read_documents(capabilities, nodedevs, hwloc))


def add_host(settings: Settings, name: str | None, uri: str | None, capabilities: Path | None, demo: bool) -> Host:
    """Discover a host through libvirt and record it (``--demo``, or its URI ``test:///vnuma-demo`` without
    ``capabilities``: the shipped demo host).

    ``--demo`` and ``capabilities`` are recorded as the host's topology
    override, so that a refresh reads the topology the same way. Without a
    URI (and without ``--demo``) the configured ``libvirt_uri`` is used,
    ``{host}`` in it replaced by the host's name.

    Raises:
        InvalidInputError: no name, a bad name, no URI, or --demo with --uri/--capabilities.
        ConflictError: the name is already in the inventory (checked before libvirt is contacted).
        HypervisorError: libvirt cannot be reached or refuses.
    """
    if name is None:
        raise InvalidInputError(
            "a host NAME is needed", hint="vnuma host add NAME --uri URI, or vnuma host add --from-file FILE"
        )
    check_name(name, "host")
    override = _file_override(capabilities)
    if demo and (uri or capabilities):
        raise InvalidInputError("--demo brings its own URI and capabilities; drop --uri/--capabilities")
    if demo or is_demo(uri, capabilities):
        uri, capabilities, override = DEMO_URI, demo_capabilities_path(), DEMO_OVERRIDE
    if not uri and settings.libvirt_uri:
        uri = settings.libvirt_uri.replace("{host}", name)
    if not uri:
        raise InvalidInputError(
            "a libvirt URI is needed",
            hint="vnuma host add NAME --uri qemu:///system (or set libvirt_uri in the configuration file)",
        )
    with open_registrar(settings.db_url) as registrar:
        _ensure_absent(registrar, name)
        host = discover(name, uri, capabilities)
        registrar.add_host(host, override)
    return host


def is_demo(uri: str | None, capabilities: Path | None) -> bool:
    """A host added with the demo host's URI and no capabilities file is the demo host (as with ``--demo``):
    the test driver reports no NUMA cells for its node file, the demo's capabilities document does."""
    return uri == DEMO_URI and capabilities is None


def _file_override(capabilities: Path | None) -> str | None:
    """The override recorded for ``--capabilities FILE``: its absolute path (a symlink stays one, to repoint)."""
    return None if capabilities is None else os.path.abspath(capabilities)


def refresh_source(name: str, uri: str, override: str | None) -> tuple[str, Path | None]:
    """The libvirt URI and capabilities file a refresh reads for a host with this topology override.

    ``demo`` is the demo host of this vnuma's package: its capabilities and
    its test-driver URI (resolved when connecting), whatever the inventory recorded at ``add``.

    Raises:
        InvalidInputError: the recorded capabilities file is missing or not a file.
    """
    if override is None:
        return uri, None
    if override == DEMO_OVERRIDE:
        return DEMO_URI, demo_capabilities_path()
    path = Path(override)
    if not (path.is_absolute() and path.is_file()):
        state = "not a file" if path.exists() else "missing"
        raise InvalidInputError(
            f"host {name!r} is refreshed from the capabilities file {override}, which is {state}",
            hint=f"put the file back, or refresh from another: vnuma host refresh {name} --capabilities FILE",
        )
    return uri, path


def import_host(
    settings: Settings, name: str, capabilities: Document | None, nodedevs: Sequence[Document],
    hwloc: Document | None,
) -> Host:
    """Parse the documents (``host import``'s files, read by the caller) and record the host."""
    check_name(name, "host")
    with open_registrar(settings.db_url) as registrar:
        _ensure_absent(registrar, name)
        host = import_documents(name, capabilities, nodedevs, hwloc)
        registrar.add_host(host)
    return host


@dataclass(frozen=True, slots=True)
class Refresh:
    """The outcome of ``host refresh``: the new host and what changed."""

    host: Host
    changes: tuple[str, ...]


def refresh_host(settings: Settings, name: str | None, capabilities: Path | None) -> Refresh:
    """Rediscover a libvirt host and report what changed (topology and devices).

    The topology is read as recorded (``--demo``, ``--capabilities FILE``, or
    libvirt's capabilities); ``capabilities`` given here wins and is recorded.

    Raises:
        InvalidInputError: no name, the host was imported from files (no URI to read),
            or its recorded capabilities file is missing.
        NotFoundError: no such host.
        HypervisorError: libvirt cannot be reached or refuses.
    """
    if name is None:
        raise InvalidInputError("a host NAME is needed", hint="vnuma host refresh NAME, or vnuma host refresh --all")
    with open_inventory(settings.db_url) as inventory:
        old = inventory.get_host(name)
        if old.uri is None:
            raise InvalidInputError(
                f"host {name!r} was imported from files and has no libvirt URI",
                hint=f"vnuma host remove {name} and import it again",
            )
        recorded = inventory.topology_override(name)
        if capabilities is None:
            override = recorded
            uri, source = refresh_source(name, old.uri, recorded)
        else:
            override = _file_override(capabilities)
            uri, source = old.uri, capabilities
        return record_refresh(inventory, old, discover(name, uri, source), override, recorded)


def record_refresh(
    inventory: Inventory, old: Host, discovered: Host, override: str | None = None, recorded: str | None = None
) -> Refresh:
    """Store a rediscovered host when it differs from ``old``, or when it was read from a new override.

    ``override`` is where ``discovered`` was read, ``recorded`` the override
    the inventory held; the reserved CPUs are kept.

    Raises:
        ConflictError: the new topology drops CPUs, pages or devices that VMs hold.
    """
    fresh = replace(discovered, reserved_cpus=old.reserved_cpus)
    changes = tuple(diff_hosts(old, fresh))
    if changes or override != recorded:
        inventory.replace_host(fresh, override)
    return Refresh(fresh, changes)


def diff_hosts(old: Host, new: Host) -> list[str]:
    """Human-readable differences between two versions of a host."""
    out: list[str] = []
    if old.uri != new.uri:
        out.append(f"uri {old.uri or '-'} -> {new.uri or '-'}")
    old_cells = {c.id: c for c in old.cells}
    new_cells = {c.id: c for c in new.cells}
    for cid in sorted(old_cells.keys() - new_cells.keys()):
        out.append(f"cell {cid} removed")
    for cid in sorted(new_cells.keys() - old_cells.keys()):
        out.append(f"cell {cid} added")
    for cid in sorted(old_cells.keys() & new_cells.keys()):
        a, b = old_cells[cid], new_cells[cid]
        if a.cpu_ids != b.cpu_ids:
            out.append(f"cell {cid}: CPUs {format_cpuset(a.cpu_ids) or '-'} -> {format_cpuset(b.cpu_ids) or '-'}")
        elif a.cpus != b.cpus:
            out.append(f"cell {cid}: CPU topology (socket/die/core/siblings) changed")
        if a.memory_kib != b.memory_kib:
            out.append(f"cell {cid}: memory {format_size_kib(a.memory_kib)} -> {format_size_kib(b.memory_kib)}")
        for size in sorted({p.size_kib for p in a.pages} | {p.size_kib for p in b.pages}):
            if a.pages_of(size) != b.pages_of(size):
                out.append(f"cell {cid}: {size} KiB pages {a.pages_of(size)} -> {b.pages_of(size)}")
        if a.distances != b.distances:
            out.append(f"cell {cid}: distances changed")
    old_devs = {d.address: d for d in old.devices}
    new_devs = {d.address: d for d in new.devices}
    for addr in sorted(old_devs.keys() - new_devs.keys()):
        out.append(f"device {addr} ({old_devs[addr].kind}) removed")
    for addr in sorted(new_devs.keys() - old_devs.keys()):
        out.append(f"device {addr} ({new_devs[addr].kind}) added")
    for addr in sorted(old_devs.keys() & new_devs.keys()):
        if old_devs[addr] != new_devs[addr]:
            out.append(f"device {addr} changed")
    for cid in sorted(old_cells.keys() & new_cells.keys()):
        a, b = old_cells[cid], new_cells[cid]
        if (a.subtype, a.caches) != (b.subtype, b.caches):
            out.append(f"cell {cid}: memory kind or memory-side caches changed")
        if a.gpu != b.gpu:
            out.append(f"cell {cid}: GPU memory of {a.gpu or '-'} -> {b.gpu or '-'}")
    if old.hmat != new.hmat:
        out.append("HMAT latency/bandwidth figures changed")
    out.extend(_resctrl_changes(old.resctrl, new.resctrl))
    return out


def _resctrl_changes(old: Resctrl, new: Resctrl) -> list[str]:
    """What changed in resctrl, per cache (level, id) and bandwidth domain, then the monitors."""
    out: list[str] = []
    banks = ({(b.level, b.id): b for b in old.caches}, {(b.level, b.id): b for b in new.caches})
    for key in sorted(banks[0].keys() | banks[1].keys()):
        a, b = banks[0].get(key), banks[1].get(key)
        if a != b:
            what = "added" if a is None else "removed" if b is None else "changed"
            out.append(f"resctrl L{key[0]} cache id {key[1]} {what}")
    nodes = ({n.id: n for n in old.memory_bandwidth}, {n.id: n for n in new.memory_bandwidth})
    for key in sorted(nodes[0].keys() | nodes[1].keys()):
        a2, b2 = nodes[0].get(key), nodes[1].get(key)
        if a2 != b2:
            what = "added" if a2 is None else "removed" if b2 is None else "changed"
            out.append(f"resctrl memory bandwidth domain {key} {what}")
    monitors = ("cache_monitors", "bandwidth_monitors", "max_monitors")
    if any(getattr(old, m) != getattr(new, m) for m in monitors):
        out.append("resctrl monitors changed")
    return out


def _ensure_absent(registrar: Registrar, name: str) -> None:
    """Refuse a duplicate name before any slow discovery work."""
    if not registrar.has_host(name):
        return
    raise ConflictError(
        f"host {name!r} is already in the inventory",
        hint=f"vnuma host refresh {name} to rediscover it, or vnuma host remove {name}",
    )
