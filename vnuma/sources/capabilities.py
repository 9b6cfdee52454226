"""libvirt host capabilities XML (``virsh capabilities``) -> :class:`Host`.

Pure: no I/O; callers pass the document's bytes. Reads
``/capabilities/host/topology/cells/cell``: memory (any libvirt unit), page
pools, SLIT distances and CPUs (socket, die, core, SMT siblings), and
``/capabilities/host/cache`` and ``/memory_bandwidth``: the resctrl cache
banks, bandwidth domains and monitors (:mod:`vnuma.topology.resctrl`), and
HMAT: ``<topology><interconnects>`` latency and bandwidth (type ``read`` or
``access`` as read figures, ``write`` apart) and each cell's memory-side
``<cache>`` (:mod:`vnuma.topology.hmat`). Everything else a real host prints
(``<cpu>`` model, ``<guest>`` sections) is accepted and ignored. Devices are not in this
document: they come from node devices (:mod:`vnuma.sources.nodedev`).

Tolerated gaps: a CPU without ``socket_id``/``die_id``/``core_id``/``siblings``
gets None for those and ``siblings = {id}``; a cell without ``<memory>``
takes the sum of its page pools (0 without pools); a cell without ``<cpus>``
or with ``<cpus num='0'/>`` is memory-only. What the host cannot use is left out
and listed (:func:`read_capabilities`, :mod:`vnuma.topology.leftout`): page
pools beyond their cell's memory (libvirt's own test files list 6144 × 1 GiB
pages on a 1 GiB cell), a memory-only cell without memory, distances and
HMAT figures naming cells the host does not have or below their floor
(negative figures, page counts and memory sizes are read for that, and left
out or read as 0).

GPU memory (a GPU's own memory as a NUMA node: POWER9 with NVLink, Grace
Hopper in NUMA mode) is not named here: libvirt writes no memory type and no
PCI address for a cell. An HMAT initiator without CPUs (a Generic Initiator:
Grace Hopper's GPU for its own memory) is read like any other; together with
the node devices it tells which cells are a GPU's
(:mod:`vnuma.sources.gpunodes`, applied where the devices join the host).
vnuma does not guess it from node numbers (POWER's 250-255): without such an
initiator a GPU's memory reads as a plain memory-only cell of kind
``unknown`` (or as HMAT rates it), and ``host import --hwloc`` (subtype
``GPUMemory``, ``PCIBusID``) is the way to have it recognised.

Limits (see :mod:`vnuma.sources.xmlsafe`): cell and CPU ids and page sizes
up to 2**31 - 1, sizes and counts up to 2**63 - 1 KiB, and a ``siblings``
list naming at most :data:`MAX_SIBLINGS` CPUs, so a short attribute such as
``siblings='0-4294967295'`` cannot make the parser build a huge set.
"""

from __future__ import annotations

import re

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.xmlsafe import (
    INT32_MAX,
    INT64_MAX,
    element_where,
    parse_xml,
    read_cpuset_attr,
    read_int,
    read_int_attr,
    read_optional_int,
    shown,
)
from vnuma.topology import Cell, Cpu, Host, MemoryCache, PagePool, Source, parse_cpuset
from vnuma.topology.hmat import Hmat
from vnuma.topology.leftout import Imported, usable
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl

_NO_TOPOLOGY_HINT = "save `virsh capabilities` from the real host and pass it with --capabilities FILE"

_UNIT = re.compile(r"^(?:(b|bytes?)|([kmgtpe])(i?b)?)$", re.IGNORECASE)
_POWERS = "kmgtpe"
# A CPU's siblings are the SMT threads of its core: 2 on x86, 8 on POWER.
MAX_SIBLINGS = 256
_SPAN = re.compile(r"(\d+)(?:\s*-\s*(\d+))?")


def unit_bytes(unit: str | None, *, default: str = "KiB") -> int | None:
    """Bytes in one libvirt scaled-integer ``unit`` (``KiB``, ``M``, ``GB``...); None if unknown.

    As in libvirt: ``KB``/``MB``... are powers of 1000; ``k``, ``KiB``, ``M``,
    ``MiB``... powers of 1024; ``b``/``bytes`` is one byte.
    """
    match = _UNIT.match((unit or default).strip())
    if not match:
        return None
    if match.group(1):
        return 1
    power = _POWERS.index(match.group(2).lower()) + 1
    decimal = (match.group(3) or "").lower() == "b"
    base: int = 1000 if decimal else 1024
    return int(base**power)


def scaled_kib(
    element: etree._Element, text: str | None, *, what: str, field: str, maximum: int = INT64_MAX,
    allow_negative: bool = False,
) -> int:
    """A libvirt scaled integer (value + ``unit`` attribute, KiB by default) in KiB, at most ``maximum``."""
    value = read_int(text, what=what, element=element, field=field, allow_negative=allow_negative)
    per_unit = unit_bytes(element.get("unit"))
    where = element_where(what, element)
    if per_unit is None:
        unit = shown(element.get("unit") or "")
        raise InvalidInputError(f"{where}: <{element.tag}> has unknown unit {unit}")
    kib = value * per_unit // 1024
    if kib > maximum:
        raise InvalidInputError(f"{where}: <{element.tag}> {field} {kib} KiB is above {maximum} KiB")
    return kib


def parse_capabilities(
    data: bytes | str,
    *,
    name: str,
    what: str = "capabilities",
    uri: str | None = None,
    source: Source = Source.CAPABILITIES,
) -> Host:
    """The usable part of ``virsh capabilities`` output (:func:`read_capabilities`), without the list of what
    was left out: for callers that tell no operator (tests, tools); an import reports it."""
    return read_capabilities(data, name=name, what=what, uri=uri, source=source).host


def read_capabilities(
    data: bytes | str,
    *,
    name: str,
    what: str = "capabilities",
    uri: str | None = None,
    source: Source = Source.CAPABILITIES,
    no_topology_hint: str | None = None,
) -> Imported:
    """Parse ``virsh capabilities`` output into a checked :class:`Host` named ``name`` and the parts left out
    (:func:`vnuma.topology.leftout.usable`: pools larger than their cell, a memory-only cell without memory,
    distances and HMAT figures naming missing cells or below their floor, negative ones included);
    ``no_topology_hint``: what to do about a document without NUMA cells, when the caller knows better than
    "pass a file".

    Raises:
        InvalidInputError: malformed XML, not a capabilities document, no NUMA
            topology, bad numbers or cpusets, or an inconsistent topology
            (duplicate CPUs, siblings that do not exist, ...).
    """
    root = parse_xml(data, what=what, root="capabilities")
    host_el = root.find("host")
    if host_el is None:
        raise InvalidInputError(f"{what}: <capabilities> has no <host> element",
                                hint=no_topology_hint or _NO_TOPOLOGY_HINT)
    cell_els = host_el.findall("topology/cells/cell")
    if not cell_els:
        raise InvalidInputError(
            f"{what}: no NUMA topology (no <host><topology><cells><cell> elements)",
            hint=no_topology_hint or _NO_TOPOLOGY_HINT,
        )
    cells = sorted((_parse_cell(el, what) for el in cell_els), key=lambda c: c.id)
    host = Host(
        name=name, cells=tuple(cells), uri=uri, source=source, resctrl=_parse_resctrl(host_el, what),
        hmat=_parse_interconnects(host_el.find("topology/interconnects"), what),
        arch=(host_el.findtext("cpu/arch") or "").strip() or "x86_64",
    )
    try:
        return usable(host)
    except InvalidInputError as err:
        raise InvalidInputError(f"{what}: {err}", hint=err.hint) from err


def _parse_cell(cell_el: etree._Element, what: str) -> Cell:
    cell_id = read_int(cell_el.get("id"), what=what, element=cell_el, field="attribute id", maximum=INT32_MAX)
    pages = _parse_pages(cell_el, what)
    memory_el = cell_el.find("memory")
    if memory_el is not None:
        memory_kib = scaled_kib(memory_el, memory_el.text, what=what, field="a size", allow_negative=True)
    else:
        memory_kib = sum(p.size_kib * p.count for p in pages)
        if memory_kib > INT64_MAX:
            where = element_where(what, cell_el)
            raise InvalidInputError(
                f"{where}: cell {cell_id} has no <memory> and its pages add up above {INT64_MAX} KiB"
            )
    cpus = tuple(sorted((_parse_cpu(el, what) for el in cell_el.findall("cpus/cpu")), key=lambda c: c.id))
    return Cell(
        id=cell_id,
        memory_kib=memory_kib,
        cpus=cpus,
        pages=pages,
        distances=_parse_distances(cell_el, what),
        caches=tuple(_parse_memory_cache(el, what) for el in cell_el.findall("cache")),
    )


def _parse_memory_cache(el: etree._Element, what: str) -> MemoryCache:
    size, line = el.find("size"), el.find("line")
    if size is None or line is None:
        raise InvalidInputError(f"{element_where(what, el)}: a cell's <cache> needs <size> and <line>")
    line_value = read_int(line.get("value"), what=what, element=line, field="attribute value", maximum=INT32_MAX)
    per_unit = unit_bytes(line.get("unit"), default="B")
    if per_unit is None:
        raise InvalidInputError(f"{element_where(what, line)}: <line> has unknown unit {shown(line.get('unit') or '')}")
    return MemoryCache(
        level=read_int(el.get("level"), what=what, element=el, field="attribute level", maximum=INT32_MAX),
        size_kib=scaled_kib(size, size.get("value"), what=what, field="attribute value"),
        line_bytes=line_value * per_unit,
        associativity=el.get("associativity") or "unknown",
        policy=el.get("policy") or "unknown",
    )


_READ_TYPES = ("read", "access")


def _parse_interconnects(el: etree._Element | None, what: str) -> Hmat:
    if el is None:
        return Hmat()
    figures: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    for entry in el:
        if entry.tag not in ("latency", "bandwidth"):
            continue
        kind = entry.get("type") or "access"
        if kind not in (*_READ_TYPES, "write"):
            continue
        pair = tuple(
            read_int(entry.get(a), what=what, element=entry, field=f"attribute {a}", maximum=INT32_MAX)
            for a in ("initiator", "target")
        )
        # A negative figure is read, and left out by the usable step (said so), as one naming a missing cell.
        if entry.tag == "latency":
            value = read_int(entry.get("value"), what=what, element=entry, field="attribute value",
                             allow_negative=True)
        else:
            value = scaled_kib(entry, entry.get("value"), what=what, field="attribute value", allow_negative=True)
        key = f"{'write_' if kind == 'write' else ''}{entry.tag}"
        rank = 0 if kind in ("read", "write") else 1  # an explicit read figure wins over 'access'
        held = figures.setdefault(key, {}).get(pair)
        if held is None or rank < held[1]:
            figures[key][pair] = (value, rank)

    def matrix(key: str) -> tuple[tuple[int, int, int], ...]:
        return tuple(sorted((i, t, v) for (i, t), (v, _r) in figures.get(key, {}).items()))

    return Hmat(matrix("latency"), matrix("bandwidth"), matrix("write_latency"), matrix("write_bandwidth"))


def _parse_pages(cell_el: etree._Element, what: str) -> tuple[PagePool, ...]:
    pools: dict[int, PagePool] = {}
    for page_el in cell_el.findall("pages"):
        size = page_el.get("size")
        size_kib = scaled_kib(page_el, size, what=what, field="attribute size", maximum=INT32_MAX)
        count = read_int(page_el.text, what=what, element=page_el, field="a page count", allow_negative=True)
        if size_kib <= 0:
            raise InvalidInputError(f"{element_where(what, page_el)}: <pages> size is below 1 KiB")
        if size_kib in pools:
            where = element_where(what, page_el)
            raise InvalidInputError(f"{where}: <pages> size {size_kib} KiB listed twice")
        pools[size_kib] = PagePool(size_kib=size_kib, count=count)
    return tuple(pools[size] for size in sorted(pools))


def _parse_distances(cell_el: etree._Element, what: str) -> tuple[tuple[int, int], ...]:
    found: dict[int, int] = {}
    for sib in cell_el.findall("distances/sibling"):
        other = read_int(sib.get("id"), what=what, element=sib, field="attribute id", maximum=INT32_MAX)
        value = read_int(sib.get("value"), what=what, element=sib, field="attribute value", allow_negative=True)
        if other in found:
            raise InvalidInputError(f"{element_where(what, sib)}: distance to cell {other} listed twice")
        found[other] = value
    return tuple(sorted(found.items()))


def _parse_cpu(cpu_el: etree._Element, what: str) -> Cpu:
    cpu_id = read_int(cpu_el.get("id"), what=what, element=cpu_el, field="attribute id", maximum=INT32_MAX)
    siblings = _siblings(cpu_el, cpu_id, what)

    def optional(attr: str) -> int | None:
        return read_optional_int(cpu_el.get(attr), what=what, element=cpu_el, field=f"attribute {attr}")

    return Cpu(
        id=cpu_id,
        socket=optional("socket_id"),
        die=optional("die_id"),
        core=optional("core_id"),
        siblings=siblings,
    )


def _siblings(cpu_el: etree._Element, cpu_id: int, what: str) -> frozenset[int]:
    text = cpu_el.get("siblings")
    if text is None:
        return frozenset({cpu_id})
    where = f"{element_where(what, cpu_el)}: CPU {cpu_id} siblings"
    # Count before expanding: parse_cpuset builds every id of a range.
    named = 0
    for lo, hi in _SPAN.findall(text):
        if max(len(lo), len(hi)) > len(str(INT32_MAX)):
            raise InvalidInputError(f"{where} {shown(text)} name a CPU id above {INT32_MAX}")
        named += abs(int(hi) - int(lo)) + 1 if hi else 1
    if named > MAX_SIBLINGS:
        raise InvalidInputError(f"{where} {shown(text)} name more than {MAX_SIBLINGS} CPUs")
    try:
        return parse_cpuset(text) | {cpu_id}
    except InvalidInputError as err:
        raise InvalidInputError(f"{where}: {err}") from err


def _parse_resctrl(host_el: etree._Element, what: str) -> Resctrl:
    banks = tuple(_parse_bank(el, what) for el in host_el.findall("cache/bank"))
    nodes = tuple(_parse_bandwidth_node(el, what) for el in host_el.findall("memory_bandwidth/node"))
    cache_monitor, bandwidth_monitor = host_el.find("cache/monitor"), host_el.find("memory_bandwidth/monitor")
    counts = [
        read_int_attr(m, "maxMonitors", what=what) for m in (cache_monitor, bandwidth_monitor) if m is not None
    ]
    return Resctrl(
        caches=tuple(sorted(banks, key=lambda b: (b.level, b.id))),
        memory_bandwidth=tuple(sorted(nodes, key=lambda n: n.id)),
        cache_monitors=_features(cache_monitor),
        bandwidth_monitors=_features(bandwidth_monitor),
        # Cache and bandwidth monitors draw on the same RMIDs: the smaller count bounds both.
        max_monitors=min(counts) if counts else None,
    )


def _features(monitor: etree._Element | None) -> tuple[str, ...]:
    if monitor is None:
        return ()
    return tuple(name for f in monitor.findall("feature") if (name := (f.get("name") or "").strip()))


def _cache_type(el: etree._Element, what: str) -> CacheType:
    value = el.get("type")
    if value is None:
        raise InvalidInputError(f"{element_where(what, el)}: <{el.tag}> has no type attribute")
    try:
        return CacheType(value)
    except ValueError:
        raise InvalidInputError(
            f"{element_where(what, el)}: <{el.tag}> type {shown(value)} is not both, code or data"
        ) from None


def _parse_bank(el: etree._Element, what: str) -> CacheBank:
    size = el.get("size")
    if size is None:
        raise InvalidInputError(f"{element_where(what, el)}: <bank> has no size attribute")
    controls = []
    for control in el.findall("control"):
        for attr in ("granularity", "maxAllocs", "type"):
            if control.get(attr) is None:
                raise InvalidInputError(
                    f"{element_where(what, control)}: <control> has no {attr} attribute",
                    hint="a cache <control> gives granularity, type and maxAllocs (min and unit are optional)",
                )
        granule = scaled_kib(control, control.get("granularity"), what=what, field="attribute granularity")
        minimum = control.get("min")
        controls.append(
            CacheControl(
                granularity_kib=granule,
                min_kib=granule if minimum is None else scaled_kib(control, minimum, what=what, field="attribute min"),
                type=_cache_type(control, what),
                max_allocs=read_int_attr(control, "maxAllocs", what=what),
            )
        )
    return CacheBank(
        id=read_int_attr(el, "id", what=what),
        level=read_int_attr(el, "level", what=what),
        type=_cache_type(el, what),
        size_kib=scaled_kib(el, size, what=what, field="attribute size"),
        cpus=_cpus(el, what),
        controls=tuple(sorted(controls, key=lambda c: c.type)),
    )


def _parse_bandwidth_node(el: etree._Element, what: str) -> BandwidthNode:
    control = el.find("control")
    values: dict[str, int | None] = {"granularity": None, "min": None, "maxAllocs": None}
    if control is not None:
        for attr in ("granularity", "maxAllocs"):
            values[attr] = read_int_attr(control, attr, what=what)
        minimum = control.get("min")
        values["min"] = (
            values["granularity"] if minimum is None
            else read_int(minimum, what=what, element=control, field="attribute min", maximum=INT32_MAX)
        )
    return BandwidthNode(
        id=read_int_attr(el, "id", what=what),
        cpus=_cpus(el, what),
        granularity=values["granularity"],
        min=values["min"],
        max_allocs=values["maxAllocs"],
    )


def _cpus(el: etree._Element, what: str) -> frozenset[int]:
    cpus = read_cpuset_attr(el, "cpus", what)
    assert cpus is not None  # not optional
    return cpus
