"""hwloc XML (``lstopo --of xml``, format 2.x; 3.x reads the same) -> :class:`Host`.

Pure: no I/O; callers pass the document's bytes.

How the tree maps to cells. In hwloc 2 a NUMANode is a *memory child* of a
normal object (Machine, Package, Die, Group, L3...), possibly behind
MemCache objects. A PU belongs to the NUMA node attached to its nearest
ancestor that has one, as Linux puts each CPU in exactly one node. When
several nodes hang off the same object (DDR next to HBM or CXL memory), the
CPUs go to the lowest-numbered plain one (no subtype, or ``DRAM``); the
others, and every node whose ``cpuset`` is empty or absent, become
memory-only cells. A node of subtype ``GPUMemory`` (a GPU's own memory:
POWER9 with NVLink when ``HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1``, Grace Hopper
in NUMA mode) never owns CPUs, though hwloc gives it its GPU's local CPUs as
``cpuset``; its ``<info name="PCIBusID">`` names the GPU (:attr:`Cell.gpu`,
in the devices' ``dddd:bb:ss.f`` form; None when absent). Sizes:
``local_memory`` and ``<page_type size>`` are bytes. Socket, die and core
ids are the ``os_index`` of the enclosing Package, Die (or a ``Group`` of
subtype ``Die``) and Core; SMT siblings are the PUs of one Core.

Devices: every ``PCIDev`` and every ``Bridge`` with a ``pci_busid``; the
class and ids come from ``pci_type`` (``"0302 [10de:2330] [10de:16c1] a1"``),
the NUMA node from the nearest ancestor's ``nodeset`` when it holds exactly
one node with CPUs (a device is local to its CPUs' node, not to memory-only
nodes beside it: a GPU's own memory, HBM, CXL memory on the same package),
else, when it holds none with CPUs, exactly one node besides GPU-memory
nodes; the parent from the nearest upstream bridge with an
address, the bridges from every upstream bridge with an address (nearest
first), and the root complex from the host bridge above them
(``bridge_type="0-1"``, ``bridge_pci="0000:[16-17]"`` is ``pci0000:16``;
unknown without one). hwloc gives a link's bandwidth only
(``pci_link_speed``, GB/s), not its speed and width: the link stays unknown.
Distances: the ``<distances2 type="NUMANode">`` latency matrix (``os`` or
``gp`` indexing). HMAT: memory attributes with cpuset initiators; one whose
initiator is an object (``initiator_obj_type``: a GPU as the initiator of its
own memory) is not read, as ``PCIBusID`` already names the GPU and Linux's
backend writes cpuset initiators only.

hwloc 1.x files (``<topology>`` without ``version``) are refused with an
InvalidInputError: their NUMA nodes are normal parents and their distance
matrices are relative to arbitrary depths; hwloc 2's ``lstopo`` converts
them (``lstopo --input OLD.xml --of xml NEW.xml``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.nodedev import format_pci_address
from vnuma.sources.xmlsafe import INT32_MAX, INT64_MAX, element_where, parse_xml, read_int
from vnuma.topology import (
    GPU_MEMORY_SUBTYPE,
    Cell,
    Cpu,
    Host,
    PagePool,
    PciDevice,
    Source,
    check_host,
    device_kind_for_class,
)
from vnuma.topology.hmat import Hmat

_V1_HINT = "convert it with hwloc 2: `lstopo --input OLD.xml --of xml NEW.xml`"
_WORD = re.compile(r"^0x[0-9a-f]{1,8}$", re.IGNORECASE)
_BUSID = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", re.IGNORECASE)
# class [vendor:device] [subvendor:subdevice] revision [prog-if, hwloc >= 2.11]
_PCI_TYPE = re.compile(
    r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[[0-9a-f]{4}:[0-9a-f]{4}\] [0-9a-f]{2}"
    r"(?: ([0-9a-f]{2}))?",
    re.IGNORECASE,
)
_BUS_RANGE = re.compile(r"^([0-9a-f]{4}):\[([0-9a-f]{2})-[0-9a-f]{2}\]$", re.IGNORECASE)
_PLAIN_MEMORY = ("", "DRAM")
_KIND_MEANS_LATENCY = 4
_KIND = re.compile(r"^[0-9]{1,9}$")


def parse_hwloc_bitmap(text: str | None, *, what: str = "hwloc bitmap") -> frozenset[int]:
    """Parse an hwloc bitmap (``"0x000000ff,0xffffffff"``: 32-bit words, most significant first).

    An infinite prefix (``0xf...f``) is dropped: only the listed words count.

    Raises:
        InvalidInputError: a word that is not ``0x`` plus 1-8 hex digits.
    """
    if text is None or not text.strip():
        return frozenset()
    words = [w.strip() for w in text.strip().split(",")]
    if words and words[0].lower() == "0xf...f":
        words = words[1:]
    bits: set[int] = set()
    for position, word in enumerate(reversed(words)):
        if not word:
            continue
        if not _WORD.match(word):
            raise InvalidInputError(f"{what}: bad bitmap {text!r}: cannot read {word!r}")
        value = int(word, 16)
        bits.update(position * 32 + bit for bit in range(32) if value >> bit & 1)
    return frozenset(bits)


def parse_hwloc(data: bytes | str, *, name: str, what: str = "hwloc") -> Host:
    """Parse ``lstopo --of xml`` output (hwloc 2.x/3.x) into a checked :class:`Host`.

    Raises:
        InvalidInputError: malformed XML, a v1 or unknown format version, no
            NUMA nodes, PUs outside every node, bad numbers, or an
            inconsistent topology.
    """
    root = parse_xml(data, what=what, root="topology")
    _check_version(root, what)
    objects = list(root.iter("object"))
    nodes = [o for o in objects if o.get("type") == "NUMANode"]
    if not nodes:
        raise InvalidInputError(f"{what}: no NUMANode objects in the topology")
    owners = _cpu_owners(nodes, what)
    cpus_by_node: dict[int, list[Cpu]] = {}
    core_pus: dict[etree._Element, frozenset[int]] = {}
    for pu in (o for o in objects if o.get("type") == "PU"):
        node_id = _owner_of(pu, owners, what)
        cpus_by_node.setdefault(node_id, []).append(_cpu(pu, core_pus, what))
    distances = _distances(root, nodes, what)
    cells = []
    for node in nodes:
        node_id = _os_index(node, what)
        cells.append(
            Cell(
                id=node_id,
                memory_kib=_bytes_to_kib(node, "local_memory", what),
                cpus=tuple(sorted(cpus_by_node.get(node_id, ()), key=lambda c: c.id)),
                pages=_pages(node, what),
                distances=distances.get(node_id, ()),
                subtype=(node.get("subtype") or "").strip() or None,
                gpu=_gpu_of(node, what),
            )
        )
    gpu_nodes = frozenset(c.id for c in cells if c.gpu_memory)
    cpu_nodes = frozenset(c.id for c in cells if c.cpus)
    devices = _unique_devices(_devices(objects, gpu_nodes, cpu_nodes, what), what)
    cells = sorted(cells, key=lambda c: c.id)
    host = Host(
        name=name, cells=tuple(cells), devices=devices, source=Source.HWLOC,
        hmat=_memattrs(root, nodes, cells, what),
    )
    try:
        return check_host(host)
    except InvalidInputError as err:
        raise InvalidInputError(f"{what}: {err}", hint=err.hint) from err


# hwloc memory attribute -> (Hmat field, multiplier to ns or KiB/s, 0 for a generic and 1 for an explicit read)
_MEMATTRS = {
    "Latency": ("latency_ns", 1, 1), "ReadLatency": ("latency_ns", 1, 0), "WriteLatency": ("write_latency_ns", 1, 0),
    "Bandwidth": ("bandwidth_kib_s", 1024, 1), "ReadBandwidth": ("bandwidth_kib_s", 1024, 0),
    "WriteBandwidth": ("write_bandwidth_kib_s", 1024, 0),
}


def _memattrs(root: etree._Element, nodes: list[etree._Element], cells: list[Cell], what: str) -> Hmat:
    """HMAT figures from hwloc's memory attributes: targets by NUMA node ``gp_index``, initiators (cpusets)
    mapped to the cells whose CPUs they cover entirely; initiators that cover none are kept as ignored."""
    by_gp = {
        read_int(n.get("gp_index"), what=what, element=n, field="attribute gp_index"): _os_index(n, what)
        for n in nodes if n.get("gp_index") is not None
    }
    cpu_cells = [c for c in cells if c.cpus]
    found: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    ignored: list[str] = []
    for attr in root.findall("memattr"):
        spec = _MEMATTRS.get(attr.get("name") or "")
        if spec is None:
            continue
        field, scale, rank = spec
        for value_el in attr.findall("memattr_value"):
            if value_el.get("target_obj_type") != "NUMANode" or value_el.get("initiator_cpuset") is None:
                continue
            gp = read_int(value_el.get("target_obj_gp_index"), what=what, element=value_el, field="target_obj_gp_index")
            target = by_gp.get(gp)
            if target is None:
                raise InvalidInputError(
                    f"{element_where(what, value_el)}: memory attribute names NUMA node gp_index {gp}, "
                    "which is not in the topology"
                )
            text = value_el.get("initiator_cpuset") or ""
            initiator = parse_hwloc_bitmap(text, what=element_where(what, value_el))
            covered = [c.id for c in cpu_cells if c.cpu_ids <= initiator]
            if not covered:
                if text not in ignored:
                    ignored.append(text)
                continue
            value = read_int(value_el.get("value"), what=what, element=value_el, field="attribute value") * scale
            for cell in covered:
                held = found.setdefault(field, {}).get((cell, target))
                if held is None or rank < held[1]:
                    found[field][(cell, target)] = (value, rank)

    def matrix(field: str) -> tuple[tuple[int, int, int], ...]:
        return tuple(sorted((i, t, v) for (i, t), (v, _r) in found.get(field, {}).items()))

    return Hmat(
        matrix("latency_ns"), matrix("bandwidth_kib_s"), matrix("write_latency_ns"), matrix("write_bandwidth_kib_s"),
        tuple(ignored),
    )


def _check_version(root: etree._Element, what: str) -> None:
    version = (root.get("version") or "").strip()
    if not version or version.startswith("1."):
        raise InvalidInputError(f'{what}: hwloc 1.x XML is not supported (no version="2.x")', hint=_V1_HINT)
    if version.split(".")[0] not in ("2", "3"):
        raise InvalidInputError(
            f"{what}: unsupported hwloc XML version {version!r}", hint="expected hwloc 2.x or 3.x XML"
        )


def _os_index(obj: etree._Element, what: str, maximum: int = INT32_MAX) -> int:
    return read_int(obj.get("os_index"), what=what, element=obj, field="attribute os_index", maximum=maximum)


def _attachment(node: etree._Element) -> etree._Element | None:
    """The normal object a NUMA node hangs off (skipping memory-side caches)."""
    for ancestor in node.iterancestors("object"):
        if ancestor.get("type") != "MemCache":
            return ancestor
    return None


def _cpu_owners(nodes: list[etree._Element], what: str) -> dict[etree._Element, int]:
    """Map each object with NUMA memory children to the node that owns its CPUs (never a GPU's memory)."""
    by_parent: dict[etree._Element, list[etree._Element]] = {}
    for node in nodes:
        parent = _attachment(node)
        gpu_memory = (node.get("subtype") or "").strip() == GPU_MEMORY_SUBTYPE
        if parent is not None and not gpu_memory and parse_hwloc_bitmap(node.get("cpuset"), what=what):
            by_parent.setdefault(parent, []).append(node)
    owners: dict[etree._Element, int] = {}
    for parent, candidates in by_parent.items():
        candidates.sort(key=lambda n: _os_index(n, what))
        plain = [n for n in candidates if (n.get("subtype") or "") in _PLAIN_MEMORY]
        owners[parent] = _os_index((plain or candidates)[0], what)
    return owners


def _owner_of(pu: etree._Element, owners: dict[etree._Element, int], what: str) -> int:
    for ancestor in pu.iterancestors("object"):
        if ancestor in owners:
            return owners[ancestor]
    raise InvalidInputError(f"{element_where(what, pu)}: PU {_os_index(pu, what)} is under no NUMA node")


def _cpu(pu: etree._Element, core_pus: dict[etree._Element, frozenset[int]], what: str) -> Cpu:
    """The Cpu of one PU; ``core_pus`` caches each Core's PU ids (a core's PUs are read once, not per PU)."""
    cpu_id = _os_index(pu, what)
    socket = die = core = None
    siblings = frozenset({cpu_id})
    for ancestor in pu.iterancestors("object"):
        kind = ancestor.get("type")
        if kind == "Core" and core is None:
            core = _optional_os_index(ancestor, what)
            if ancestor not in core_pus:
                pus = (p for p in ancestor.iter("object") if p.get("type") == "PU")
                core_pus[ancestor] = frozenset(_os_index(p, what) for p in pus)
            siblings = core_pus[ancestor]
        elif (kind == "Die" or (kind == "Group" and ancestor.get("subtype") == "Die")) and die is None:
            die = _optional_os_index(ancestor, what)
        elif kind == "Package" and socket is None:
            socket = _optional_os_index(ancestor, what)
    return Cpu(id=cpu_id, socket=socket, die=die, core=core, siblings=siblings)


def _optional_os_index(obj: etree._Element, what: str) -> int | None:
    text = obj.get("os_index")
    # hwloc writes -1 (or omits the attribute) for objects without an OS index.
    if text is None or text.strip() in ("-1", "4294967295"):
        return None
    return _os_index(obj, what, maximum=INT64_MAX)


def _bytes_to_kib(obj: etree._Element, attr: str, what: str) -> int:
    return read_int(obj.get(attr, "0"), what=what, element=obj, field=f"attribute {attr}") // 1024


def _gpu_of(node: etree._Element, what: str) -> str | None:
    """The address of the GPU a ``GPUMemory`` node belongs to (its ``PCIBusID``); None for other nodes."""
    if (node.get("subtype") or "").strip() != GPU_MEMORY_SUBTYPE:
        return None
    for info in node.findall("info"):
        if info.get("name") == "PCIBusID":
            return _busid_address((info.get("value") or "").strip(), info, "PCIBusID", what)
    return None


def _pages(node: etree._Element, what: str) -> tuple[PagePool, ...]:
    pools: dict[int, int] = {}
    for page in node.findall("page_type"):
        size_kib = _bytes_to_kib(page, "size", what)
        count = read_int(page.get("count"), what=what, element=page, field="attribute count")
        where = element_where(what, page)
        if size_kib <= 0:
            raise InvalidInputError(f"{where}: <page_type> size is below 1 KiB")
        if size_kib > INT32_MAX:
            raise InvalidInputError(f"{where}: <page_type> size {size_kib} KiB is above {INT32_MAX} KiB")
        pools[size_kib] = pools.get(size_kib, 0) + count
        if pools[size_kib] > INT64_MAX:
            raise InvalidInputError(
                f"{where}: <page_type> counts of {size_kib} KiB pages add up above {INT64_MAX}"
            )
    return tuple(PagePool(size, pools[size]) for size in sorted(pools))


def _distances(
    root: etree._Element, nodes: list[etree._Element], what: str
) -> dict[int, tuple[tuple[int, int], ...]]:
    matrices = [m for m in root.findall("distances2") if m.get("type") == "NUMANode"]
    if not matrices:
        return {}
    matrix = next((m for m in matrices if m.get("name") == "NUMALatency"), None)
    matrix = matrix if matrix is not None else next((m for m in matrices if _means_latency(m)), matrices[0])
    count = read_int(matrix.get("nbobjs"), what=what, element=matrix, field="attribute nbobjs")
    indexes = _numbers(matrix.findall("indexes"), what)
    values = _numbers(matrix.findall("u64values"), what)
    if len(indexes) != count or len(values) != count * count:
        raise InvalidInputError(
            f"{element_where(what, matrix)}: distance matrix for {count} nodes has "
            f"{len(indexes)} indexes and {len(values)} values"
        )
    ids = _node_ids(matrix, indexes, nodes, what)
    return {
        ids[i]: tuple(sorted((ids[j], values[i * count + j]) for j in range(count))) for i in range(count)
    }


def _means_latency(matrix: etree._Element) -> bool:
    kind = (matrix.get("kind") or "0").strip()
    # Not str.isdigit(): it accepts "²", which int() refuses.
    return bool(_KIND.match(kind)) and bool(int(kind) & _KIND_MEANS_LATENCY)


def _numbers(elements: Iterable[etree._Element], what: str) -> list[int]:
    numbers: list[int] = []
    for el in elements:
        for token in (el.text or "").split():
            numbers.append(read_int(token, what=what, element=el, field="a number"))
    return numbers


def _node_ids(
    matrix: etree._Element, indexes: list[int], nodes: list[etree._Element], what: str
) -> list[int]:
    indexing = matrix.get("indexing", "os")
    if indexing == "os":
        known = {_os_index(n, what): _os_index(n, what) for n in nodes}
    elif indexing == "gp":
        known = {
            read_int(n.get("gp_index"), what=what, element=n, field="attribute gp_index"): _os_index(n, what)
            for n in nodes
        }
    else:
        raise InvalidInputError(f"{element_where(what, matrix)}: unknown distance indexing {indexing!r}")
    twice = sorted(i for i, n in Counter(indexes).items() if n > 1)
    if twice:
        where = element_where(what, matrix)
        raise InvalidInputError(
            f"{where}: distance matrix lists NUMA node(s) {twice} ({indexing} index) twice"
        )
    missing = [i for i in indexes if i not in known]
    if missing:
        raise InvalidInputError(
            f"{element_where(what, matrix)}: distance matrix names NUMA node(s) {missing} ({indexing} index) "
            "that are not in the topology"
        )
    return [known[i] for i in indexes]


def _devices(
    objects: list[etree._Element], gpu_nodes: frozenset[int], cpu_nodes: frozenset[int], what: str
) -> Iterable[PciDevice]:
    for obj in objects:
        if obj.get("type") in ("PCIDev", "Bridge") and obj.get("pci_busid"):
            yield _device(obj, gpu_nodes, cpu_nodes, what)


def _unique_devices(devices: Iterable[PciDevice], what: str) -> tuple[PciDevice, ...]:
    seen: dict[str, PciDevice] = {}
    for dev in devices:
        if dev.address in seen:
            raise InvalidInputError(f"{what}: PCI device {dev.address} is listed twice")
        seen[dev.address] = dev
    return tuple(seen[address] for address in sorted(seen))


def _pci_address(obj: etree._Element, what: str) -> str:
    return _busid_address((obj.get("pci_busid") or "").strip(), obj, "pci_busid", what)


def _busid_address(busid: str, element: etree._Element, field: str, what: str) -> str:
    """hwloc's ``0004:05:00.0`` (any case) in the devices' form (:func:`format_pci_address`)."""
    match = _BUSID.match(busid)
    if not match:
        raise InvalidInputError(f"{element_where(what, element)}: bad {field} {busid!r}")
    domain, bus, slot, function = (int(g, 16) for g in match.groups())
    return format_pci_address(domain, bus, slot, function)


def _device(obj: etree._Element, gpu_nodes: frozenset[int], cpu_nodes: frozenset[int], what: str) -> PciDevice:
    address = _pci_address(obj, what)
    pci_type = (obj.get("pci_type") or "").strip()
    match = _PCI_TYPE.match(pci_type)
    if not match:
        where = element_where(what, obj)
        raise InvalidInputError(f"{where}: PCI device {address} has bad pci_type {pci_type!r}")
    class_id, vendor, product, prog_if = match.groups()
    numa_node: int | None = None
    bridges: list[str] = []
    root_complex: str | None = None
    for ancestor in obj.iterancestors("object"):
        if ancestor.get("type") == "Bridge" and root_complex is None:
            if ancestor.get("pci_busid"):
                bridges.append(_pci_address(ancestor, what))
            elif ancestor.get("bridge_type", "").startswith("0-"):
                root_complex = _root_complex(ancestor.get("bridge_pci"))
        nodeset = ancestor.get("nodeset")
        if nodeset is not None:
            local = parse_hwloc_bitmap(nodeset, what=element_where(what, ancestor)) - gpu_nodes
            local = (local & cpu_nodes) or local
            numa_node = next(iter(local)) if len(local) == 1 else None
            break
    pci_class = int(class_id, 16) << 8 | int(prog_if or "0", 16)
    return PciDevice(
        address=address,
        kind=device_kind_for_class(pci_class),
        vendor_id=f"0x{int(vendor, 16):04x}",
        product_id=f"0x{int(product, 16):04x}",
        numa_node=numa_node,
        parent=bridges[0] if bridges else None,
        root_complex=root_complex,
        bridges=tuple(bridges),
        pci_class=pci_class,
    )


def _root_complex(bus_range: str | None) -> str | None:
    """``0000:[16-17]`` (a host bridge's buses) -> ``pci0000:16``; None when it does not read so."""
    match = _BUS_RANGE.match((bus_range or "").strip())
    return f"pci{match.group(1).lower()}:{match.group(2).lower()}" if match else None
