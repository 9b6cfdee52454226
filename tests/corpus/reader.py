"""A second, deliberately simple reading of topology files, for checking vnuma's import against.

This is not vnuma's parser and must never become one: it imports nothing from
``vnuma`` (lxml only), reads each file the plainest way the format allows, and
reports what the file *says* — cells, their CPUs (socket, die, core and SMT
siblings where the file gives them), memory, page pools and distances, and
the PCI devices with their NUMA node — without deciding what is usable. It
repairs nothing: a PU in no node, a device listed twice or with an address
that is not a PCI address, a page pool larger than its cell are reported as
they are, so the corpus test can check that vnuma either took them as the file
says or named them among the parts it left out.

Where it reads differently from vnuma on purpose (a second opinion is only
worth having if it is reached another way):

- hwloc: a PU belongs to the NUMA node whose ``cpuset`` attribute holds it
  (vnuma walks the object tree instead); when several do (DDR beside HBM,
  MCDRAM or CXL memory of the same CPUs), to the lowest-numbered one of no
  subtype or subtype ``DRAM``, else the lowest-numbered one — never to a
  ``GPUMemory`` node. A device's node is read from the ``cpuset`` of its
  nearest ancestor that has one: the cells owning those CPUs, when there is
  exactly one (vnuma reads the ancestor's ``nodeset``).
- capabilities: each ``<cell>`` as written; memory in the unit given. Node
  devices: the ``<capability type='pci'>`` fields and ``<numa node>``.

Sizes are KiB, distances and counts as written. ``None`` means the file does
not say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

# libvirt's scaled integers: powers of 1024 except the decimal "KB", "MB"...
_UNIT_BYTES = {
    "b": 1, "byte": 1, "bytes": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}


@dataclass(frozen=True)
class CpuFacts:
    """One CPU as the file describes it (None: not given)."""

    socket: int | None = None
    die: int | None = None
    core: int | None = None
    siblings: frozenset[int] | None = None


@dataclass
class CellFacts:
    """One NUMA cell as the file describes it."""

    id: int
    memory_kib: int | None = None
    cpus: dict[int, CpuFacts] = field(default_factory=dict)
    pages: dict[int, int] = field(default_factory=dict)
    distances: dict[int, int] = field(default_factory=dict)
    gpu_memory: bool = False


@dataclass(frozen=True)
class DeviceFacts:
    """One PCI function: its address (``dddd:bb:ss.f``, None when the file's fields do not make one),
    its NUMA node (None: none or unknown) and its name in the file (for messages)."""

    address: str | None
    numa_node: int | None
    name: str


@dataclass
class FileFacts:
    """What one file says: cells by id, PUs the file puts in no cell, and every PCI function listed."""

    cells: dict[int, CellFacts] = field(default_factory=dict)
    unowned_cpus: set[int] = field(default_factory=set)
    devices: list[DeviceFacts] = field(default_factory=list)

    def cpu_cells(self) -> dict[int, int]:
        """CPU id -> the cell the file puts it in."""
        return {cpu: cell.id for cell in self.cells.values() for cpu in cell.cpus}


# --- small helpers ------------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    if text is None or not text.strip():
        return None
    text = text.strip()
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _scaled_kib(value: str | None, unit: str | None) -> int | None:
    number = _int(value)
    if number is None:
        return None
    per_unit = _UNIT_BYTES[(unit or "KiB").strip().lower()]
    return number * per_unit // 1024


def cpu_list(text: str) -> frozenset[int]:
    """``0-3,8`` (a libvirt cpuset) -> {0, 1, 2, 3, 8}."""
    ids: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        ids.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(ids)


def hwloc_bits(text: str | None) -> frozenset[int]:
    """hwloc's ``0x000000ff,,0xffffffff`` (32-bit words, most significant first, an empty word is 0; an
    infinite ``0xf...f,`` prefix ignored)."""
    if not text:
        return frozenset()
    words = [w.strip() for w in text.split(",") if w.strip().lower() != "0xf...f"]
    value = 0
    for word in words:
        value = value << 32 | int(word or "0", 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def _pci(domain: int | None, bus: int | None, slot: int | None, function: int | None) -> str | None:
    """``dddd:bb:ss.f``, or None when a field is missing or beyond PCI's widths."""
    parts = (domain, bus, slot, function)
    limits = (0xFFFF, 0xFF, 0x1F, 0x7)
    if any(p is None or not 0 <= p <= limit for p, limit in zip(parts, limits, strict=True)):
        return None
    return f"{domain:04x}:{bus:02x}:{slot:02x}.{function:x}"


# --- libvirt capabilities and node devices ---------------------------------------------------


def read_capabilities(path: Path) -> FileFacts:
    """The ``<host><topology><cells>`` of ``virsh capabilities`` output."""
    root = etree.parse(str(path)).getroot()
    facts = FileFacts()
    for cell_el in root.iterfind("host/topology/cells/cell"):
        cell = CellFacts(id=int(cell_el.get("id")))
        memory = cell_el.find("memory")
        if memory is not None:
            cell.memory_kib = _scaled_kib(memory.text, memory.get("unit"))
        for pages in cell_el.iterfind("pages"):
            size = _scaled_kib(pages.get("size"), pages.get("unit"))
            assert size is not None
            cell.pages[size] = cell.pages.get(size, 0) + int(pages.text or "0")
        for sibling in cell_el.iterfind("distances/sibling"):
            cell.distances[int(sibling.get("id"))] = int(sibling.get("value"))
        for cpu in cell_el.iterfind("cpus/cpu"):
            siblings = cpu.get("siblings")
            cell.cpus[int(cpu.get("id"))] = CpuFacts(
                socket=_int(cpu.get("socket_id")),
                die=_int(cpu.get("die_id")),
                core=_int(cpu.get("core_id")),
                siblings=cpu_list(siblings) if siblings is not None else None,
            )
        facts.cells[cell.id] = cell
    return facts


def read_nodedevs(path: Path) -> list[DeviceFacts]:
    """Every ``<device>`` with ``<capability type='pci'>`` in the file (one device, or several under any root)."""
    root = etree.parse(str(path)).getroot()
    devices = [root] if root.tag == "device" else root.findall("device")
    found = []
    for dev in devices:
        cap = dev.find("capability[@type='pci']")
        if cap is None:
            continue
        fields = [_int(cap.findtext(f)) for f in ("domain", "bus", "slot", "function")]
        numa = cap.find("numa")
        node = _int(numa.get("node")) if numa is not None else None
        found.append(DeviceFacts(_pci(*fields), node if node is not None and node >= 0 else None,
                                 dev.findtext("name") or "?"))
    return found


# --- hwloc --------------------------------------------------------------------------------


def _objects(root: etree._Element, kind: str) -> list[etree._Element]:
    return [o for o in root.iter("object") if o.get("type") == kind]


def _index(obj: etree._Element | None) -> int | None:
    """An object's ``os_index``; None when absent or hwloc's "none" (-1, or 2**32 - 1)."""
    if obj is None:
        return None
    value = _int(obj.get("os_index"))
    return None if value is None or value in (-1, 0xFFFFFFFF) else value


def _nearest(obj: etree._Element, *kinds: str) -> etree._Element | None:
    for ancestor in obj.iterancestors("object"):
        if ancestor.get("type") in kinds or (ancestor.get("type") == "Group" and ancestor.get("subtype") in kinds):
            return ancestor
    return None


def read_hwloc(path: Path) -> FileFacts:
    """An ``lstopo --of xml`` file (hwloc 2.x) as the file says it; see the module doc for the rules."""
    root = etree.parse(str(path)).getroot()
    facts = FileFacts()
    nodes = _objects(root, "NUMANode")
    cpusets = {}
    for node in nodes:
        node_id = _index(node)
        assert node_id is not None
        cell = CellFacts(id=node_id, gpu_memory=node.get("subtype") == "GPUMemory")
        memory = node.get("local_memory")
        cell.memory_kib = int(memory) // 1024 if memory is not None else None
        for page in node.iterfind("page_type"):
            size = int(page.get("size")) // 1024
            cell.pages[size] = cell.pages.get(size, 0) + int(page.get("count"))
        facts.cells[node_id] = cell
        if not cell.gpu_memory:
            cpusets[node_id] = (node.get("subtype") in (None, "", "DRAM"), hwloc_bits(node.get("cpuset")))
    for pu in _objects(root, "PU"):
        pu_id = _index(pu)
        assert pu_id is not None
        holders = sorted((not plain, node_id) for node_id, (plain, cpus) in cpusets.items() if pu_id in cpus)
        if not holders:
            facts.unowned_cpus.add(pu_id)
            continue
        core = _nearest(pu, "Core")
        facts.cells[holders[0][1]].cpus[pu_id] = CpuFacts(
            socket=_index(_nearest(pu, "Package")),
            die=_index(_nearest(pu, "Die")),
            core=_index(core),
            siblings=frozenset(i for p in _objects(core, "PU") if (i := _index(p)) is not None)
            if core is not None else frozenset({pu_id}),
        )
    _hwloc_distances(root, nodes, facts)
    owner = facts.cpu_cells()
    for obj in root.iter("object"):
        if obj.get("type") in ("PCIDev", "Bridge") and obj.get("pci_busid"):
            facts.devices.append(_hwloc_device(obj, owner))
    return facts


def _hwloc_distances(root: etree._Element, nodes: list[etree._Element], facts: FileFacts) -> None:
    """The NUMA latency matrix (``name="NUMALatency"``, else the first NUMANode matrix)."""
    matrices = [m for m in root.iterfind("distances2") if m.get("type") == "NUMANode"]
    if not matrices:
        return
    chosen = next((m for m in matrices if m.get("name") == "NUMALatency"), matrices[0])
    indexes = [int(t) for el in chosen.iterfind("indexes") for t in (el.text or "").split()]
    values = [int(t) for el in chosen.iterfind("u64values") for t in (el.text or "").split()]
    if chosen.get("indexing", "os") == "gp":
        by_gp = {int(n.get("gp_index")): _index(n) for n in nodes}
        indexes = [by_gp[i] for i in indexes]
    count = len(indexes)
    for i, a in enumerate(indexes):
        for j, b in enumerate(indexes):
            facts.cells[a].distances[b] = values[i * count + j]


def _hwloc_device(obj: etree._Element, owner: dict[int, int]) -> DeviceFacts:
    busid = obj.get("pci_busid", "")
    try:
        domain, bus, rest = busid.split(":")
        slot, function = rest.split(".")
        address = _pci(int(domain, 16), int(bus, 16), int(slot, 16), int(function, 16))
    except ValueError:
        address = None
    node = None
    for ancestor in obj.iterancestors("object"):
        if ancestor.get("cpuset") is not None:
            cells = {owner[c] for c in hwloc_bits(ancestor.get("cpuset")) if c in owner}
            node = next(iter(cells)) if len(cells) == 1 else None
            break
    return DeviceFacts(address, node, busid)
