"""Host use cases: discover through libvirt, import from files, refresh, list, reserve.

Every path that reads a host (``host add``, ``host import``, ``host
refresh``, their batch forms and the API) returns it as
:class:`~vnuma.topology.leftout.Imported`: the usable host and the parts
left out, which are recorded with it; ``strict`` refuses instead
(:func:`accepted`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.inventory import open_inventory
from vnuma.inventory.hostwrite import Registrar, open_registrar
from vnuma.services import Settings
from vnuma.services.files import read_input
from vnuma.services.hypervisors import connect_uri
from vnuma.services.names import check_name
from vnuma.sources.capabilities import read_capabilities
from vnuma.sources.demo import DEMO_OVERRIDE, DEMO_URI, demo_capabilities_path
from vnuma.sources.gpunodes import with_gpu_nodes
from vnuma.sources.hwloc import read_hwloc
from vnuma.sources.nodedev import NodeDevices, read_nodedevs, with_parent_bridges
from vnuma.sources.nvsmitopo import parse_topo_matrix, with_nvlinks
from vnuma.topology import DeviceKind, Host, Source, format_cpuset, format_size_kib
from vnuma.topology.leftout import Imported, LeftOut, refusal, usable
from vnuma.topology.resctrl import Resctrl

if TYPE_CHECKING:
    from vnuma.inventory.repo import Inventory


def discover(name: str, uri: str, capabilities: Path | None) -> Imported:
    """Read a host's topology and PCI devices through libvirt, and the parts left out of them.

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
    topology = read_capabilities(data, name=name, what=what, uri=uri, source=Source.LIBVIRT, no_topology_hint=hint)
    return _joined(topology, read_nodedevs((f"{uri} {n}", xml.encode()) for n, xml in (*device_xmls, *mdev_xmls)))


def _joined(topology: Imported, found: NodeDevices) -> Imported:
    """A topology with its node devices: the usable step over the whole host (a device listed twice or on a
    missing cell, a mediated device on a missing one), then the bridges of the devices whose path said none,
    and the GPU nodes the two show together (:func:`vnuma.sources.gpunodes.with_gpu_nodes`)."""
    mdevs = tuple(sorted(found.mdevs, key=lambda m: m.uuid))
    joined = usable(replace(topology.host, devices=found.devices, mdevs=mdevs), (*topology.left_out, *found.left_out))
    host = replace(joined.host, devices=with_parent_bridges(joined.host.devices))
    return replace(joined, host=with_gpu_nodes(host))


def accepted(imported: Imported, strict: bool, source: str) -> Imported:
    """The import as read, unless ``strict`` and some part of the host would be left out.

    Raises:
        InvalidInputError: ``strict``, naming the host, where it was read (``source``: a file, a URI), the
            first part left out and how many more.
    """
    where = f"host {imported.host.name!r} ({source})"
    err = refusal(imported.left_out, where, hint=_STRICT_HINT) if strict else None
    if err is not None:
        raise err
    return imported


_STRICT_HINT = (
    "--strict records nothing when a part of the host would be left out; without it the rest is recorded "
    "and every part left out is listed (and kept: vnuma host show)"
)


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
) -> Imported:
    """Build a host from capabilities XML (+ node-device XML) or hwloc XML, and the parts left out of it.

    Raises:
        InvalidInputError: neither or both of capabilities/hwloc, malformed documents.
    """
    _one_source(capabilities, nodedevs, hwloc)
    if hwloc is not None:
        return read_hwloc(hwloc[1], name=name, what=hwloc[0])
    assert capabilities is not None
    return _joined(read_capabilities(capabilities[1], name=name, what=capabilities[0]), read_nodedevs(nodedevs))


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


def add_host(
    settings: Settings, name: str | None, uri: str | None, capabilities: Path | None, demo: bool, *,
    strict: bool = False, nvidia_smi_topo: Document | None = None,
) -> Imported:
    """Discover a host through libvirt and record it with the parts left out (``--demo``, or its URI
    ``test:///vnuma-demo`` without ``capabilities``: the shipped demo host; ``strict``: refuse a host with
    parts left out, recording nothing; ``nvidia_smi_topo``: the NVLinks its saved text shows, as
    :func:`import_host` reads them).

    ``--demo`` and ``capabilities`` are recorded as the host's topology
    override, so that a refresh reads the topology the same way. Without a
    URI (and without ``--demo``) the configured ``libvirt_uri`` is used,
    ``{host}`` in it replaced by the host's name.

    Raises:
        InvalidInputError: no name, a bad name, no URI, --demo with --uri/--capabilities, a part left out
            when ``strict``.
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
        imported = accepted(discover(name, uri, capabilities), strict, str(capabilities or uri))
        if nvidia_smi_topo is not None:
            imported = replace(imported, host=_linked(imported.host, nvidia_smi_topo))
        registrar.add_host(imported.host, override, imported.left_out)
    return imported


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
    hwloc: Document | None, *, strict: bool = False, nvidia_smi_topo: Document | None = None,
) -> Imported:
    """Parse the documents (``host import``'s files, read by the caller) and record the host with the parts
    left out (``strict``: refuse a host with parts left out, recording nothing; see :func:`accepted`), with the
    NVLinks saved ``nvidia-smi topo -m`` text shows (:func:`vnuma.sources.nvsmitopo.with_nvlinks`: refused,
    recording nothing, when it is another host's)."""
    check_name(name, "host")
    with open_registrar(settings.db_url) as registrar:
        _ensure_absent(registrar, name)
        imported = import_documents(name, capabilities, nodedevs, hwloc)
        if nvidia_smi_topo is not None:
            imported = replace(imported, host=_linked(imported.host, nvidia_smi_topo))
        document = hwloc or capabilities
        assert document is not None  # import_documents refuses neither
        imported = accepted(imported, strict, document[0])
        registrar.add_host(imported.host, left_out=imported.left_out)
    return imported


def _linked(host: Host, nvidia_smi_topo: Document) -> Host:
    """``host`` with the NVLinks saved ``nvidia-smi topo -m`` text shows (InvalidInputError: another host's)."""
    source, text = nvidia_smi_topo[0], nvidia_smi_topo[1].decode("utf-8", "replace")
    return with_nvlinks(host, parse_topo_matrix(text, source), source)


@dataclass(frozen=True, slots=True)
class Refresh:
    """The outcome of ``host refresh``: the new host, what changed and the parts the new read left out."""

    host: Host
    changes: tuple[str, ...]
    left_out: tuple[LeftOut, ...] = ()


def refresh_host(
    settings: Settings, name: str | None, capabilities: Path | None, *, strict: bool = False,
    nvidia_smi_topo: Document | None = None,
) -> Refresh:
    """Rediscover a libvirt host and report what changed (topology and devices); ``strict``: refuse a read
    with parts left out, changing nothing.

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
        imported = accepted(discover(name, uri, source), strict, str(source or uri))
        if nvidia_smi_topo is not None:
            imported = replace(imported, host=_linked(imported.host, nvidia_smi_topo))
        return record_refresh(inventory, old, imported, override, recorded)


def record_refresh(
    inventory: Inventory, old: Host, discovered: Imported, override: str | None = None, recorded: str | None = None
) -> Refresh:
    """Store a rediscovered host when it differs from ``old``, when it was read from a new override, or
    when it leaves out other parts than the inventory says.

    ``override`` is where ``discovered`` was read, ``recorded`` the override
    the inventory held; the reserved CPUs are kept, and so are the NVLinks
    (libvirt cannot see them) unless ``discovered`` brings its own or a GPU
    they name is gone.

    Raises:
        ConflictError: the new topology drops CPUs, pages or devices that VMs hold.
    """
    gpus = {d.address for d in discovered.host.devices_of(DeviceKind.GPU)}
    kept = old.nvlinks if all(n.a in gpus and n.b in gpus for n in old.nvlinks) else ()
    fresh = replace(discovered.host, reserved_cpus=old.reserved_cpus, nvlinks=discovered.host.nvlinks or kept)
    changes = tuple(diff_hosts(old, fresh))
    if changes or override != recorded or discovered.left_out != inventory.left_out(old.name):
        inventory.replace_host(fresh, override, discovered.left_out)
    return Refresh(fresh, changes, discovered.left_out)


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
    if old.arch != new.arch:
        out.append(f"arch: {old.arch} -> {new.arch} (its VMs' domains follow it when next defined)")
    if old.nvlinks != new.nvlinks:
        out.append(f"NVLinks: {len(old.nvlinks)} -> {len(new.nvlinks)} linked GPU pairs")
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
