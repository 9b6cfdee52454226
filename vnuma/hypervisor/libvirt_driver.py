"""libvirt adapter: the only module of vnuma that imports ``libvirt``.

libvirt is imported lazily inside :func:`connect`, so everything else runs
without libvirt-python installed. Every ``libvirtError`` becomes a
:class:`HypervisorError` carrying libvirt's own message and error code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar
from xml.sax.saxutils import escape as xml_escape

from vnuma.errors import HypervisorError, InvalidInputError
from vnuma.hypervisor.base import DomainState, MdevResult
from vnuma.topology import Mdev

T = TypeVar("T")


def _libvirt() -> Any:
    try:
        import libvirt
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise HypervisorError(
            "libvirt-python is not installed", hint="install it: pip install libvirt-python"
        ) from err
    # libvirt prints every error to stderr by default; we report them ourselves.
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return libvirt


def connect(uri: str) -> LibvirtHypervisor:
    """Open ``uri`` (``test:///...``, ``qemu:///system``, ``qemu+ssh://...``).

    Raises:
        InvalidInputError: an empty URI.
        HypervisorError: libvirt cannot open it.
    """
    if not uri.strip():
        raise InvalidInputError("empty libvirt URI", hint="give a libvirt URI, e.g. qemu:///system or qemu+ssh://root@HOST/system")
    lv = _libvirt()
    try:
        conn = lv.open(uri)
    except lv.libvirtError as err:
        raise _wrap(err, f"cannot connect to {uri}") from err
    return LibvirtHypervisor(uri, conn, lv)


def _wrap(err: Any, context: str) -> HypervisorError:
    message = (err.get_error_message() or str(err)).strip().replace("\n", " ")
    code = err.get_error_code()
    return HypervisorError(f"{context}: {message} (libvirt error {code})", code=code)


class LibvirtHypervisor:
    """A libvirt connection implementing :class:`vnuma.hypervisor.base.Hypervisor`."""

    def __init__(self, uri: str, conn: Any, lv: Any) -> None:
        self.uri = uri
        self._conn = conn
        self._lv = lv

    @contextmanager
    def _calling(self, context: str) -> Iterator[None]:
        try:
            yield
        except self._lv.libvirtError as err:
            raise _wrap(err, f"{self.uri}: {context}") from err

    def _call(self, context: str, fn: Callable[[], T]) -> T:
        with self._calling(context):
            return fn()

    def capabilities_xml(self) -> str:
        """The host capabilities document."""
        return self._call("reading capabilities", self._conn.getCapabilities)

    def libvirt_version(self) -> int:
        """getLibVersion(): the libvirt on the other end of the connection (the daemon's for a remote URI, the
        library's own for the test driver)."""
        return int(self._call("reading the libvirt version", self._conn.getLibVersion))

    def pci_device_xmls(self) -> list[tuple[str, str]]:
        """(name, XML) of every PCI node device, sorted by name."""
        flag = self._lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV
        with self._calling("listing PCI node devices"):
            devices = self._conn.listAllDevices(flag)
            return sorted((dev.name(), dev.XMLDesc(0)) for dev in devices)

    def mdev_device_xmls(self) -> list[tuple[str, str]]:
        """(name, XML) of every mediated device, sorted by name."""
        flag = self._lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV
        with self._calling("listing mediated node devices"):
            devices = self._conn.listAllDevices(flag)
            return sorted((dev.name(), dev.XMLDesc(0)) for dev in devices)

    def _mdevs(self) -> dict[str, tuple[Any, Mdev]]:
        """UUID -> (node device, parsed) of every mediated device on a PCI function, defined or active."""
        from lxml import etree

        from vnuma.sources.nodedev import mdev_from_element

        flag = self._lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV
        found: dict[str, tuple[Any, Mdev]] = {}
        with self._calling("listing mediated node devices"):
            for dev in self._conn.listAllDevices(flag):
                mdev = mdev_from_element(etree.fromstring(dev.XMLDesc(0).encode()), what=self.uri)
                if mdev is not None:
                    found[mdev.uuid] = (dev, mdev)
        return found

    def has_mdev(self, uuid: str) -> bool:
        """Whether a mediated device with this UUID is defined or active."""
        return uuid.lower() in self._mdevs()

    def create_mdev(self, uuid: str, parent: str, type_id: str) -> MdevResult:
        """Define (``nodedev-define``, autostarted) and start (``nodedev-start``) the mediated device; one with
        the UUID on another parent or of another type is removed first. UNSUPPORTED where the driver has no
        node-device definitions (VIR_ERR_NO_SUPPORT: libvirt's test driver)."""
        held = self._mdevs().get(uuid.lower())
        if held is not None:
            dev, mdev = held
            if (mdev.parent, mdev.type) == (parent, type_id):
                if self._active(dev, uuid) is False:
                    self._call(f"starting mediated device {uuid}", dev.create)
                    return MdevResult.CREATED
                return MdevResult.EXISTS
            if self._drop(dev, uuid) is MdevResult.UNSUPPORTED:
                return MdevResult.UNSUPPORTED
        type_attr = xml_escape(type_id, {"'": "&apos;"})
        xml = (
            f"<device><parent>pci_{parent.replace(':', '_').replace('.', '_')}</parent>"
            f"<capability type='mdev'><type id='{type_attr}'/><uuid>{uuid}</uuid></capability></device>"
        )
        try:
            dev = self._conn.nodeDeviceDefineXML(xml, 0)
        except self._lv.libvirtError as err:
            if err.get_error_code() == self._lv.VIR_ERR_NO_SUPPORT:
                return MdevResult.UNSUPPORTED
            raise _wrap(err, f"{self.uri}: defining mediated device {uuid} ({type_id} on {parent})") from err
        with self._calling(f"starting mediated device {uuid}"):
            dev.setAutostart(1)
            dev.create()
        return MdevResult.CREATED

    def remove_mdev(self, uuid: str) -> MdevResult:
        """Stop (``nodedev-destroy``) and undefine the mediated device; ABSENT when there is none."""
        held = self._mdevs().get(uuid.lower())
        if held is None:
            return MdevResult.ABSENT
        return self._drop(held[0], uuid)

    def _active(self, dev: Any, uuid: str) -> bool | None:
        """Whether the node device runs; None where the driver keeps no such state (its devices just are)."""
        try:
            return bool(dev.isActive())
        except self._lv.libvirtError as err:
            if err.get_error_code() == self._lv.VIR_ERR_NO_SUPPORT:
                return None
            raise _wrap(err, f"{self.uri}: reading state of mediated device {uuid}") from err

    def _drop(self, dev: Any, uuid: str) -> MdevResult:
        active = self._active(dev, uuid)
        if active is None:
            return MdevResult.UNSUPPORTED
        try:
            if active:
                dev.destroy()
            if dev.isPersistent():
                dev.undefine(0)
        except self._lv.libvirtError as err:
            if err.get_error_code() == self._lv.VIR_ERR_NO_SUPPORT:
                return MdevResult.UNSUPPORTED
            raise _wrap(err, f"{self.uri}: removing mediated device {uuid}") from err
        return MdevResult.REMOVED

    def define(self, xml: str) -> None:
        """Define with libvirt's schema validation (VIR_DOMAIN_DEFINE_VALIDATE)."""
        with self._calling("defining domain"):
            self._conn.defineXMLFlags(xml, self._lv.VIR_DOMAIN_DEFINE_VALIDATE)

    def _lookup(self, name: str) -> Any:
        try:
            return self._conn.lookupByName(name)
        except self._lv.libvirtError as err:
            if err.get_error_code() == self._lv.VIR_ERR_NO_DOMAIN:
                return None
            raise _wrap(err, f"{self.uri}: looking up domain {name!r}") from err

    def _domain(self, name: str) -> Any:
        dom = self._lookup(name)
        if dom is None:
            raise HypervisorError(
                f"{self.uri}: no domain named {name!r}",
                code=self._lv.VIR_ERR_NO_DOMAIN,
                hint="run `vnuma apply VM` to define it",
            )
        return dom

    def start(self, name: str) -> None:
        """Start a defined domain."""
        dom = self._domain(name)
        self._call(f"starting {name!r}", dom.create)

    def stop(self, name: str) -> None:
        """Power off (destroy) a running domain; a no-op when it is not running."""
        dom = self._domain(name)
        if self._call(f"reading state of {name!r}", dom.isActive):
            self._call(f"stopping {name!r}", dom.destroy)

    def undefine(self, name: str) -> None:
        """Stop if running, then remove the persistent definition (and its UEFI NVRAM file).

        Drivers that know no NVRAM refuse VIR_DOMAIN_UNDEFINE_NVRAM with
        VIR_ERR_INVALID_ARG (libvirt's test driver: ``unsupported flags
        (0x4)``); they get the plain undefine, as they keep no NVRAM to remove.
        """
        dom = self._domain(name)
        if self._call(f"reading state of {name!r}", dom.isActive):
            self._call(f"stopping {name!r}", dom.destroy)
        try:
            dom.undefineFlags(self._lv.VIR_DOMAIN_UNDEFINE_NVRAM)
        except self._lv.libvirtError as err:
            if err.get_error_code() != self._lv.VIR_ERR_INVALID_ARG:
                raise _wrap(err, f"{self.uri}: undefining {name!r}") from err
            self._call(f"undefining {name!r}", lambda: dom.undefineFlags(0))

    def domain_xml(self, name: str, *, inactive: bool = False) -> str | None:
        """XML of ``name`` as libvirt holds it, None when no such domain."""
        dom = self._lookup(name)
        if dom is None:
            return None
        flags = self._lv.VIR_DOMAIN_XML_INACTIVE if inactive else 0
        return self._call(f"reading XML of {name!r}", lambda: dom.XMLDesc(flags))

    def domain_uuid(self, name: str) -> str | None:
        """UUIDString() of ``name``, None when no such domain."""
        dom = self._lookup(name)
        return None if dom is None else self._call(f"reading the UUID of {name!r}", dom.UUIDString)

    def domain_state(self, name: str) -> DomainState:
        """missing / running / stopped."""
        dom = self._lookup(name)
        if dom is None:
            return DomainState.MISSING
        active = self._call(f"reading state of {name!r}", dom.isActive)
        return DomainState.RUNNING if active else DomainState.STOPPED

    def monitor_stats(self, names: list[str]) -> dict[str, dict[str, object]]:
        """One domainListGetStats(VIR_DOMAIN_STATS_MEMORY | VIR_DOMAIN_STATS_CPU_TOTAL) over the named domains
        (resctrl memory-bandwidth and cache-occupancy monitors among them), by name; gone domains are left out."""
        doms = [dom for dom in map(self._lookup, names) if dom is not None]
        if not doms:
            return {}
        flags = self._lv.VIR_DOMAIN_STATS_MEMORY | self._lv.VIR_DOMAIN_STATS_CPU_TOTAL
        records = self._call("reading domain stats", lambda: self._conn.domainListGetStats(doms, flags))
        return {dom.name(): dict(stats) for dom, stats in records}

    def running_stats(self) -> dict[str, dict[str, object]]:
        """One getAllDomainStats(VIR_DOMAIN_STATS_MEMORY | VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_BALLOON)
        over the running domains, by name (a driver without those stats, as the test driver, gives each an empty
        dict; ``balloon.*`` keys are those the driver and guest report)."""
        lv = self._lv
        flags = lv.VIR_DOMAIN_STATS_MEMORY | lv.VIR_DOMAIN_STATS_CPU_TOTAL | lv.VIR_DOMAIN_STATS_BALLOON
        records = self._call("reading domain stats",
                             lambda: self._conn.getAllDomainStats(flags, lv.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE))
        return {dom.name(): dict(stats) for dom, stats in records}

    def free_pages(self, cells: list[int], sizes_kib: list[int]) -> dict[int, dict[int, int]]:
        """One getFreePages over the cells from the lowest to the highest of ``cells``; only ``cells`` kept."""
        if not cells or not sizes_kib:
            return {}
        first, count = min(cells), max(cells) - min(cells) + 1
        found = self._call("reading free pages", lambda: self._conn.getFreePages(sizes_kib, first, count, 0))
        return {int(c): {int(s): int(n) for s, n in pages.items()} for c, pages in found.items() if c in cells}

    def domain_names(self) -> list[str]:
        """Names of every domain, sorted."""
        with self._calling("listing domains"):
            return sorted(dom.name() for dom in self._conn.listAllDomains(0))

    def _cpumap(self, cpus: frozenset[int]) -> tuple[bool, ...]:
        size = self._call("reading the host CPU map", lambda: self._conn.getCPUMap(0))[0]
        beyond = sorted(c for c in cpus if c >= size)
        if beyond:
            raise HypervisorError(f"{self.uri}: host has {size} CPUs, cannot pin to CPU(s) {beyond}")
        return tuple(c in cpus for c in range(size))

    def pin_live(self, name: str, vcpu_pins: dict[int, frozenset[int]], emulator: frozenset[int]) -> None:
        """pinVcpuFlags/pinEmulator with VIR_DOMAIN_AFFECT_LIVE on the running domain.

        Drivers that take no flags for pinVcpuFlags (libvirt's test driver)
        get the same pins through pinVcpu, which acts on the running domain.
        """
        dom = self._domain(name)
        live = self._lv.VIR_DOMAIN_AFFECT_LIVE
        for vcpu, cpus in sorted(vcpu_pins.items()):
            cpumap = self._cpumap(cpus)
            try:
                dom.pinVcpuFlags(vcpu, cpumap, live)
            except self._lv.libvirtError as err:
                if err.get_error_code() != self._lv.VIR_ERR_INVALID_ARG:
                    raise _wrap(err, f"{self.uri}: pinning vCPU {vcpu} of {name!r}") from err
                self._call(f"pinning vCPU {vcpu} of {name!r}", lambda v=vcpu, m=cpumap: dom.pinVcpu(v, m))
        if emulator:
            cpumap = self._cpumap(emulator)
            self._call(f"pinning the emulator of {name!r}", lambda: dom.pinEmulator(cpumap, live))

    def set_memory_nodeset(self, name: str, nodeset: frozenset[int]) -> None:
        """setNumaParameters(numa_nodeset) on the running domain."""
        dom = self._domain(name)
        text = ",".join(str(n) for n in sorted(nodeset))
        live = self._lv.VIR_DOMAIN_AFFECT_LIVE
        self._call(
            f"changing the memory nodeset of {name!r} to {text}",
            lambda: dom.setNumaParameters({self._lv.VIR_DOMAIN_NUMA_NODESET: text}, live),
        )

    def migrate(self, name: str, dest_uri: str, dest_xml: str) -> None:
        """migrate3 with VIR_MIGRATE_LIVE | PERSIST_DEST | UNDEFINE_SOURCE and the destination XML."""
        dom = self._domain(name)
        dest = connect(dest_uri)
        lv = self._lv
        flags = lv.VIR_MIGRATE_LIVE | lv.VIR_MIGRATE_PERSIST_DEST | lv.VIR_MIGRATE_UNDEFINE_SOURCE
        try:
            params = {lv.VIR_MIGRATE_PARAM_DEST_XML: dest_xml, lv.VIR_MIGRATE_PARAM_PERSIST_XML: dest_xml}
            self._call(f"migrating {name!r} to {dest_uri}", lambda: dom.migrate3(dest._conn, params, flags))
        finally:
            dest.close()

    def close(self) -> None:
        """Close the connection (errors on close are ignored: nothing to undo)."""
        with suppress(self._lv.libvirtError):
            self._conn.close()
