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

Devices: every ``PCIDev`` and every ``Bridge`` with a ``pci_busid``
(:mod:`vnuma.sources.hwlocpci`).
Distances: the ``<distances2 type="NUMANode">`` latency matrix (``os`` or
``gp`` indexing). HMAT: memory attributes with cpuset initiators; one whose
initiator is an object (``initiator_obj_type``: a GPU as the initiator of its
own memory) is not read, as ``PCIBusID`` already names the GPU and Linux's
backend writes cpuset initiators only.

What is left out (:func:`read_hwloc`; :mod:`vnuma.topology.leftout`):
a PU or NUMA node outside the root object's ``allowed_cpuset`` /
``allowed_nodeset`` (``lstopo --disallowed`` in a cgroup or cpuset keeps
them in the file; without it hwloc drops them, and their PUs are then in
no node), a PU in no NUMA node (an offline node: hwloc's
``offline-cpu0-node0``), a device that cannot be read, HMAT figures for a
NUMA node the file does not have. Distances and figures of a node left out
go with it; a PU's siblings are the PUs of its core that are kept.

hwloc 1.x files (``<topology>`` without ``version``) are refused with an
InvalidInputError: their NUMA nodes are normal parents and their distance
matrices are relative to arbitrary depths; hwloc 2's ``lstopo`` converts
them (``lstopo --input OLD.xml --of xml NEW.xml``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.hwlocdistances import read_distances
from vnuma.sources.hwlocpci import Nodes, check_busid, read_devices
from vnuma.sources.xmlsafe import INT32_MAX, INT64_MAX, element_where, parse_xml, read_int
from vnuma.topology import GPU_MEMORY_SUBTYPE, Cell, Cpu, Host, PagePool, Source
from vnuma.topology.hmat import Hmat
from vnuma.topology.leftout import Imported, LeftOut, numbered, usable

_V1_HINT = "convert it with hwloc 2: `lstopo --input OLD.xml --of xml NEW.xml`"
_WORD = re.compile(r"^0x[0-9a-f]{1,8}$", re.IGNORECASE)
_NOT_ALLOWED = "not allowed where lstopo ran (a cgroup or cpuset restricts it)"
_PLAIN_MEMORY = ("", "DRAM")


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
    """The usable part of ``lstopo --of xml`` output (:func:`read_hwloc`), without the list of what was
    left out: for callers that tell no operator (tests, tools); an import reports it."""
    return read_hwloc(data, name=name, what=what).host


def read_hwloc(data: bytes | str, *, name: str, what: str = "hwloc") -> Imported:
    """Parse ``lstopo --of xml`` output (hwloc 2.x/3.x) into a checked :class:`Host` and the parts left out
    (see the module doc, and :func:`vnuma.topology.leftout.usable` for what every import leaves out).

    Raises:
        InvalidInputError: malformed XML, a v1 or unknown format version, no
            NUMA nodes, bad numbers, or an inconsistent topology.
    """
    root = parse_xml(data, what=what, root="topology")
    _check_version(root, what)
    objects = list(root.iter("object"))
    in_file = [o for o in objects if o.get("type") == "NUMANode"]
    if not in_file:
        raise InvalidInputError(f"{what}: no NUMANode objects in the topology")
    allowed = _allowed(root, "allowed_nodeset", what)
    nodes = [n for n in in_file if allowed(_os_index(n, what))]
    left = [LeftOut(numbered("NUMA node", barred), _NOT_ALLOWED)] if (
        barred := [_os_index(n, what) for n in in_file if n not in nodes]) else []
    pus, homeless = _pus(objects, _cpu_owners(nodes, what), _allowed(root, "allowed_cpuset", what), what)
    left += homeless
    kept = frozenset(_os_index(pu, what) for group in pus.values() for pu in group)
    core_pus: dict[etree._Element, frozenset[int]] = {}
    distances = read_distances(root, _gp_ids(in_file, what), what)
    cells = []
    for node in nodes:
        node_id = _os_index(node, what)
        cells.append(
            Cell(
                id=node_id,
                memory_kib=_bytes_to_kib(node, "local_memory", what, allow_negative=True),  # left out if so
                cpus=tuple(sorted((_cpu(pu, core_pus, kept, what) for pu in pus.get(node_id, ())),
                                  key=lambda c: c.id)),
                pages=_pages(node, what),
                distances=tuple(d for d in distances.get(node_id, ()) if d[0] not in barred),
                subtype=(node.get("subtype") or "").strip() or None,
                gpu=_gpu_of(node, what),
            )
        )
    nodes = Nodes(frozenset(c.id for c in cells if c.gpu_memory), frozenset(c.id for c in cells if c.cpus))
    devices, unread = read_devices(objects, nodes, lambda text, where: parse_hwloc_bitmap(text, what=where), what)
    cells = sorted(cells, key=lambda c: c.id)
    hmat = _memattrs(root, in_file, cells, frozenset(barred), left, what)
    host = Host(
        name=name, cells=tuple(cells), devices=tuple(sorted(devices, key=lambda d: d.address)), source=Source.HWLOC,
        hmat=hmat, arch=_arch(root),
    )
    try:
        return usable(host, [*left, *unread])
    except InvalidInputError as err:
        raise InvalidInputError(f"{what}: {err}", hint=err.hint) from err


def _arch(root: etree._Element) -> str:
    """The machine's ``Architecture`` info (``uname -m``: aarch64, x86_64, ...); x86_64 when not given."""
    info = root.find("object/info[@name='Architecture']")
    return ((info.get("value") if info is not None else None) or "").strip() or "x86_64"


def _allowed(root: etree._Element, attr: str, what: str) -> Callable[[int], bool]:
    """Whether a PU or node id is in the root object's ``allowed_cpuset`` / ``allowed_nodeset`` (everything
    is when the file does not say); an infinite bitmap (``0xf...f,...``) allows every id above its words."""
    top = root.find("object")
    text = (top.get(attr) if top is not None else None) or ""
    if not text.strip():
        return lambda _id: True
    listed = parse_hwloc_bitmap(text, what=element_where(what, top) if top is not None else what)
    words = text.strip().split(",")
    if words[0].strip().lower() == "0xf...f":
        beyond = 32 * (len(words) - 1)
        return lambda i: i in listed or i >= beyond
    return listed.__contains__


def _pus(
    objects: list[etree._Element], owners: dict[etree._Element, int], allowed: Callable[[int], bool], what: str
) -> tuple[dict[int, list[etree._Element]], list[LeftOut]]:
    """The PUs kept, by the NUMA node that owns them, and those left out (not allowed; in no node)."""
    by_node: dict[int, list[etree._Element]] = {}
    barred: list[int] = []
    homeless: list[int] = []
    for pu in (o for o in objects if o.get("type") == "PU"):
        cpu_id = _os_index(pu, what)
        node = _owner_of(pu, owners) if allowed(cpu_id) else None
        if node is not None:
            by_node.setdefault(node, []).append(pu)
        else:
            (homeless if allowed(cpu_id) else barred).append(cpu_id)
    reasons = ((barred, _NOT_ALLOWED), (homeless, "in no NUMA node"))
    return by_node, [LeftOut(numbered("PU", ids), why) for ids, why in reasons if ids]


# hwloc memory attribute -> (Hmat field, multiplier to ns or KiB/s, 0 for a generic and 1 for an explicit read)
_MEMATTRS = {
    "Latency": ("latency_ns", 1, 1), "ReadLatency": ("latency_ns", 1, 0), "WriteLatency": ("write_latency_ns", 1, 0),
    "Bandwidth": ("bandwidth_kib_s", 1024, 1), "ReadBandwidth": ("bandwidth_kib_s", 1024, 0),
    "WriteBandwidth": ("write_bandwidth_kib_s", 1024, 0),
}


def _memattrs(
    root: etree._Element, nodes: list[etree._Element], cells: list[Cell], barred: frozenset[int],
    left: list[LeftOut], what: str,
) -> Hmat:
    """HMAT figures from hwloc's memory attributes: targets by NUMA node ``gp_index``, initiators (cpusets)
    mapped to the cells whose CPUs they cover entirely; initiators that cover none are kept as ignored.
    Figures for a node ``barred`` go with it; those for a ``gp_index`` the file has no node of are left out
    (added to ``left``, once per index). A negative figure is read: the usable step leaves it out."""
    by_gp = _gp_ids(nodes, what)
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
                unknown = LeftOut(f"HMAT figures for NUMA node gp_index {gp}", "the topology has no such node")
                if unknown not in left:
                    left.append(unknown)
                continue
            if target in barred:
                continue
            text = value_el.get("initiator_cpuset") or ""
            initiator = parse_hwloc_bitmap(text, what=element_where(what, value_el))
            covered = [c.id for c in cpu_cells if c.cpu_ids <= initiator]
            if not covered:
                if text not in ignored:
                    ignored.append(text)
                continue
            value = read_int(
                value_el.get("value"), what=what, element=value_el, field="attribute value", allow_negative=True
            ) * scale
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


def _gp_ids(nodes: list[etree._Element], what: str) -> dict[int, int]:
    """The NUMA nodes' ``gp_index`` -> ``os_index`` (nodes without a gp_index are not in it)."""
    return {
        read_int(n.get("gp_index"), what=what, element=n, field="attribute gp_index"): _os_index(n, what)
        for n in nodes if n.get("gp_index") is not None
    }


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


def _owner_of(pu: etree._Element, owners: dict[etree._Element, int]) -> int | None:
    for ancestor in pu.iterancestors("object"):
        if ancestor in owners:
            return owners[ancestor]
    return None


def _cpu(pu: etree._Element, core_pus: dict[etree._Element, frozenset[int]], kept: frozenset[int], what: str) -> Cpu:
    """The Cpu of one PU; ``core_pus`` caches each Core's kept PU ids (a core's PUs are read once, not per PU)."""
    cpu_id = _os_index(pu, what)
    socket = die = core = None
    siblings = frozenset({cpu_id})
    for ancestor in pu.iterancestors("object"):
        kind = ancestor.get("type")
        if kind == "Core" and core is None:
            core = _optional_os_index(ancestor, what)
            if ancestor not in core_pus:
                pus = (p for p in ancestor.iter("object") if p.get("type") == "PU")
                core_pus[ancestor] = frozenset(_os_index(p, what) for p in pus) & kept
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


def _bytes_to_kib(obj: etree._Element, attr: str, what: str, *, allow_negative: bool = False) -> int:
    number = read_int(obj.get(attr, "0"), what=what, element=obj, field=f"attribute {attr}",
                      allow_negative=allow_negative)
    return number // 1024


def _gpu_of(node: etree._Element, what: str) -> str | None:
    """The address of the GPU a ``GPUMemory`` node belongs to (its ``PCIBusID``); None for other nodes."""
    if (node.get("subtype") or "").strip() != GPU_MEMORY_SUBTYPE:
        return None
    for info in node.findall("info"):
        if info.get("name") == "PCIBusID":
            return check_busid((info.get("value") or "").strip(), info, "PCIBusID", what)
    return None


def _pages(node: etree._Element, what: str) -> tuple[PagePool, ...]:
    pools: dict[int, int] = {}
    for page in node.findall("page_type"):
        size_kib = _bytes_to_kib(page, "size", what)
        count = read_int(page.get("count"), what=what, element=page, field="attribute count", allow_negative=True)
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
