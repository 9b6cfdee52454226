"""libvirt domain XML (``virsh dumpxml``) -> :class:`Domain`: what pins, binds and backs a guest.

Pure: no I/O; callers pass the document's text. Reads the name, vCPU count
(and ``<vcpu cpuset>``), memory, ``<cputune>`` vcpupin/emulatorpin cpusets,
``<numatune>`` memory mode+nodeset and memnodes, ``<memoryBacking>``
hugepages, guest ``<cpu><numa><cell>``s, the guest topology's threads,
PCI ``<hostdev>`` and ``<interface type='hostdev'>`` (SR-IOV VF) source
addresses (``dddd:bb:ss.f``, as :attr:`vnuma.topology.PciDevice.address`)
and vnuma's own ``<metadata><vnuma:placement>`` identity (tenant, VM, host,
policies). Everything else in a domain (disks, other interfaces, os,
features) is ignored.

The metadata namespace is the constant :data:`VNUMA_NS`: ``vnuma.render``
writes it and may not be imported from here (layers), so the value is
repeated and a test keeps the two equal.

Parsing is hardened as for every other document (:mod:`vnuma.sources.xmlsafe`):
no entities, no DTD, bounded numbers and cpusets. Any malformed part is an
:class:`~vnuma.errors.InvalidInputError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.capabilities import scaled_kib, unit_bytes
from vnuma.sources.nodedev import format_pci_address
from vnuma.sources.xmlsafe import (
    INT32_MAX,
    INT64_MAX,
    element_where,
    one_line,
    parse_xml,
    read_cpuset_attr,
    read_int,
    shown,
)
from vnuma.topology import MAX_CPUSET_IDS, parse_cpuset

VNUMA_NS = "https://vnuma.dev/xmlns/domain/1"
_HINT = "expected <domain> as printed by `virsh dumpxml DOMAIN`"
_PCI_FIELDS = (("domain", 0xFFFF), ("bus", 0xFF), ("slot", 0x1F), ("function", 0x7))
_MAX_TEXT_CHARS = 255


@dataclass(frozen=True, slots=True)
class GuestCell:
    """A guest NUMA cell: ``vcpus`` (empty when memory-only) and its memory."""

    id: int
    vcpus: frozenset[int]
    memory_kib: int


@dataclass(frozen=True, slots=True)
class MemNode:
    """A ``<numatune><memnode>``: guest cell ``cellid`` bound to host cells ``nodeset``."""

    cellid: int
    mode: str
    nodeset: frozenset[int]


@dataclass(frozen=True, slots=True)
class HugePages:
    """A ``<hugepages><page>``: ``guest_cells`` None means every guest cell."""

    size_kib: int
    guest_cells: frozenset[int] | None


@dataclass(frozen=True, slots=True)
class VnumaMark:
    """The identity vnuma wrote into the domain's metadata (policies and shape may be empty strings:
    ``numa_nodes`` is ``auto``, the guest cell count asked for, or empty when not recorded)."""

    tenant: str
    vm: str
    host: str
    cpu_policy: str
    thread_policy: str
    numa_nodes: str = ""
    dedicated_vcpus: frozenset[int] = frozenset()
    """A ``mixed`` VM's dedicated vCPUs (``<vnuma:dedicated vcpus>``; empty when absent)."""
    request: Mapping[str, Any] | None = None
    """The request the VM keeps, as asked (``<vnuma:request>``: an attribute per option that differs from its
    default, named with dashes, its value as text; None when absent: a domain rendered before vnuma kept
    requests, or by another tool)."""


@dataclass(frozen=True, slots=True)
class Domain:
    """The NUMA-relevant parts of one domain definition.

    ``vcpupins`` holds (vCPU, cpuset) pairs sorted by vCPU; ``vcpu_cpuset`` is
    ``<vcpu cpuset>``, the default for vCPUs without a vcpupin; None values
    mean the element is absent (the guest floats / is not bound).
    """

    name: str
    vcpus: int
    memory_kib: int
    vcpu_cpuset: frozenset[int] | None = None
    vcpupins: tuple[tuple[int, frozenset[int]], ...] = ()
    emulatorpin: frozenset[int] | None = None
    memory_mode: str | None = None
    memory_nodeset: frozenset[int] | None = None
    memnodes: tuple[MemNode, ...] = ()
    hugepages: tuple[HugePages, ...] = ()
    cells: tuple[GuestCell, ...] = ()
    threads_per_core: int | None = None
    hostdevs: tuple[str, ...] = ()
    mark: VnumaMark | None = None
    l3_kib: tuple[tuple[int, int], ...] = ()
    """``<cachetune>``: (L3 cache id, KiB allocated), sorted (the larger of a CDP code/data pair)."""
    bandwidth: tuple[tuple[int, int], ...] = ()
    """``<memorytune>``: (domain id, bandwidth), sorted."""

    def pins_of(self, vcpu: int) -> frozenset[int] | None:
        """The pCPUs vCPU ``vcpu`` may run on (its vcpupin, else ``<vcpu cpuset>``); None when unpinned."""
        for v, cpus in self.vcpupins:
            if v == vcpu:
                return cpus
        return self.vcpu_cpuset

    def page_size_of(self, guest_cell: int) -> int | None:
        """The hugepage size (KiB) backing guest cell ``guest_cell``; None for ordinary pages."""
        for page in self.hugepages:
            if page.guest_cells is None or guest_cell in page.guest_cells:
                return page.size_kib
        return None


def parse_domain(data: bytes | str, *, what: str = "domain XML") -> Domain:
    """Parse one ``<domain>`` document.

    Raises:
        InvalidInputError: malformed XML, entities, a root other than
            ``<domain>``, a missing name/vCPU count/memory, unreadable numbers
            or cpusets, a vCPU pinned twice or outside the vCPU count.
    """
    root = parse_xml(data, what=what, root="domain", hint=_HINT)
    name = _text(root, "name", what)
    vcpu_el = _required(root, "vcpu", what)
    vcpus = read_int(vcpu_el.text, what=what, element=vcpu_el, field="a vCPU count", maximum=MAX_CPUSET_IDS)
    memory_el = _required(root, "memory", what)
    cputune = root.find("cputune")
    emulator_el = cputune.find("emulatorpin") if cputune is not None else None
    memory_el_tune = root.find("numatune/memory")
    threads_el = root.find("cpu/topology")
    return Domain(
        name=name,
        vcpus=vcpus,
        memory_kib=scaled_kib(memory_el, memory_el.text, what=what, field="memory"),
        vcpu_cpuset=read_cpuset_attr(vcpu_el, "cpuset", what, optional=True),
        vcpupins=_vcpupins(cputune, vcpus, what),
        emulatorpin=read_cpuset_attr(emulator_el, "cpuset", what) if emulator_el is not None else None,
        memory_mode=memory_el_tune.get("mode", "strict") if memory_el_tune is not None else None,
        memory_nodeset=read_cpuset_attr(memory_el_tune, "nodeset", what, optional=True)
        if memory_el_tune is not None
        else None,
        memnodes=_memnodes(root, what),
        hugepages=_hugepages(root, what),
        cells=_cells(root, what),
        threads_per_core=_optional_int(threads_el, "threads", what) if threads_el is not None else None,
        hostdevs=_hostdevs(root, what),
        mark=_mark(root, what),
        l3_kib=_cachetune(root, what),
        bandwidth=_memorytune(root, what),
    )


def _required(root: etree._Element, tag: str, what: str) -> etree._Element:
    element = root.find(tag)
    if element is None:
        raise InvalidInputError(f"{element_where(what, root)}: <domain> has no <{tag}>", hint=_HINT)
    return element


def _text(root: etree._Element, tag: str, what: str) -> str:
    text = one_line(_required(root, tag, what).text or "")
    if not text or len(text) > _MAX_TEXT_CHARS:
        raise InvalidInputError(f"{what}: <{tag}> {shown(text)} is empty or longer than {_MAX_TEXT_CHARS}")
    return text


def _int_attr(element: etree._Element, attr: str, what: str, maximum: int = INT32_MAX) -> int:
    return read_int(element.get(attr), what=what, element=element, field=f"attribute {attr}", maximum=maximum)


def _optional_int(element: etree._Element, attr: str, what: str) -> int | None:
    return None if element.get(attr) is None else _int_attr(element, attr, what)


def _vcpupins(cputune: etree._Element | None, vcpus: int, what: str) -> tuple[tuple[int, frozenset[int]], ...]:
    if cputune is None:
        return ()
    pins: dict[int, frozenset[int]] = {}
    for pin in cputune.iterfind("vcpupin"):
        vcpu = _int_attr(pin, "vcpu", what)
        where = element_where(what, pin)
        if vcpu >= vcpus:
            raise InvalidInputError(f"{where}: <vcpupin> vCPU {vcpu} is beyond the domain's {vcpus} vCPUs")
        if vcpu in pins:
            raise InvalidInputError(f"{where}: vCPU {vcpu} has two <vcpupin>s")
        cpus = read_cpuset_attr(pin, "cpuset", what)
        assert cpus is not None
        pins[vcpu] = cpus
    return tuple(sorted(pins.items()))


def _memnodes(root: etree._Element, what: str) -> tuple[MemNode, ...]:
    nodes: dict[int, MemNode] = {}
    for el in root.iterfind("numatune/memnode"):
        cellid = _int_attr(el, "cellid", what)
        if cellid in nodes:
            raise InvalidInputError(f"{element_where(what, el)}: guest cell {cellid} has two <memnode>s")
        nodeset = read_cpuset_attr(el, "nodeset", what)
        assert nodeset is not None
        nodes[cellid] = MemNode(cellid, el.get("mode", "strict"), nodeset)
    return tuple(nodes[c] for c in sorted(nodes))


def _hugepages(root: etree._Element, what: str) -> tuple[HugePages, ...]:
    pages = []
    for el in root.iterfind("memoryBacking/hugepages/page"):
        size = scaled_kib(el, el.get("size"), what=what, field="attribute size", maximum=INT32_MAX)
        pages.append(HugePages(size, read_cpuset_attr(el, "nodeset", what, optional=True)))
    # A page without nodeset is libvirt's default for every other cell: look it up last.
    return tuple(sorted(pages, key=lambda p: (p.guest_cells is None, p.size_kib)))


def _cachetune(root: etree._Element, what: str) -> tuple[tuple[int, int], ...]:
    """Level-3 ``<cache id size unit>`` of every ``<cachetune>`` (size in bytes unless a unit says)."""
    sizes: dict[int, int] = {}
    for el in root.iterfind("cputune/cachetune/cache"):
        if el.get("level") != "3":
            continue
        per_unit = unit_bytes(el.get("unit"), default="B")
        if per_unit is None:
            unit = shown(el.get("unit") or "")
            raise InvalidInputError(f"{element_where(what, el)}: <cache> has unknown unit {unit}")
        kib = _int_attr(el, "size", what, maximum=INT64_MAX) * per_unit // 1024
        cache = _int_attr(el, "id", what)
        sizes[cache] = max(sizes.get(cache, 0), kib)
    return tuple(sorted(sizes.items()))


def _memorytune(root: etree._Element, what: str) -> tuple[tuple[int, int], ...]:
    """``<node id bandwidth>`` of every ``<memorytune>``."""
    return tuple(sorted(
        (_int_attr(el, "id", what), _int_attr(el, "bandwidth", what))
        for el in root.iterfind("cputune/memorytune/node")
    ))


def _cells(root: etree._Element, what: str) -> tuple[GuestCell, ...]:
    cells: dict[int, GuestCell] = {}
    for el in root.iterfind("cpu/numa/cell"):
        cell_id = _int_attr(el, "id", what) if el.get("id") is not None else len(cells)
        if cell_id in cells:
            raise InvalidInputError(f"{element_where(what, el)}: guest cell {cell_id} is defined twice")
        vcpus = read_cpuset_attr(el, "cpus", what, optional=True) or frozenset()
        memory = scaled_kib(el, el.get("memory"), what=what, field="attribute memory")
        cells[cell_id] = GuestCell(cell_id, vcpus, memory)
    return tuple(cells[c] for c in sorted(cells))


def _hostdevs(root: etree._Element, what: str) -> tuple[str, ...]:
    """PCI functions passed through: ``<hostdev type='pci'>`` and ``<interface type='hostdev'>`` (an SR-IOV VF)."""
    found: list[str] = []
    elements = [el for el in root.iterfind("devices/hostdev") if el.get("type") == "pci"]
    elements += root.iterfind("devices/interface[@type='hostdev']")
    for el in elements:
        address = el.find("source/address")
        if address is None:
            raise InvalidInputError(f"{element_where(what, el)}: PCI <{el.tag}> has no <source><address>")
        fields = [
            _int_attr(address, f, what, maximum=top) if address.get(f) is not None or f != "domain" else 0
            for f, top in _PCI_FIELDS
        ]
        found.append(format_pci_address(*fields))
    return tuple(sorted(found))


def _mark(root: etree._Element, what: str) -> VnumaMark | None:
    found = root.find(f"metadata/{{{VNUMA_NS}}}placement")
    if found is None:
        return None

    def text(tag: str, required: bool = True) -> str:
        child = found.find(f"{{{VNUMA_NS}}}{tag}")
        value = one_line(child.text or "") if child is not None else ""
        if (required and not value) or len(value) > _MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"{element_where(what, found)}: vnuma metadata <vnuma:{tag}> is missing, empty or too long"
            )
        return value

    dedicated = found.find(f"{{{VNUMA_NS}}}dedicated")
    try:
        ids = parse_cpuset(dedicated.get("vcpus", "")) if dedicated is not None else frozenset()
    except InvalidInputError as err:
        raise InvalidInputError(f"{element_where(what, found)}: vnuma metadata <vnuma:dedicated>: {err}") from err
    return VnumaMark(
        text("tenant"), text("vm"), text("host"), text("cpu-policy", False), text("thread-policy", False),
        text("numa-nodes", False),
        ids, _request(found, what),
    )


def _request(found: etree._Element, what: str) -> Mapping[str, Any] | None:
    """``<vnuma:request>``: the options vnuma wrote there, by name (read when a move asks them)."""
    child = found.find(f"{{{VNUMA_NS}}}request")
    if child is None:
        return None
    options = {str(k).replace("-", "_"): one_line(str(v)) for k, v in child.attrib.items()}
    if any(len(v) > _MAX_TEXT_CHARS for v in options.values()):
        raise InvalidInputError(f"{element_where(what, child)}: vnuma metadata <vnuma:request> holds a value longer "
                                f"than {_MAX_TEXT_CHARS} characters")
    return options
