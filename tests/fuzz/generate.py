"""Structured generation of plausible-but-wrong documents for the three XML formats.

Each document has the right shape, but its numbers are drawn from small
pools so ids collide and references miss: duplicate cell or CPU ids,
siblings and distances naming cells or CPUs that do not exist, page sizes
and memory of 0, distance matrices of the wrong size. About one value in
``Junk.rate`` is replaced by a lexically wrong one (negative, huge, hex,
NaN, Unicode digits) or dropped, so most documents reach the parsers'
semantic checks rather than stopping at the first unreadable number.
"""

from __future__ import annotations

import itertools
from typing import TypeVar
from xml.sax.saxutils import escape, quoteattr

from hypothesis import strategies as st

from tests.fuzz.values import UNITS, values

T = TypeVar("T")

_MAYBE = (None, None, None)
# Strategies are built once: building one per draw costs more than the draw itself.
_BOOL = st.booleans()
_ROLLS = {n: st.sampled_from(range(n)) for n in (5, 6, 8, 12, 16, 24, 48, 96)}
_COUNTS = st.integers(0, 10**6)
_SOCKETS = st.integers(0, 2)
_CORES = st.integers(0, 8)
_DIES = st.sampled_from([*_MAYBE, "0", "1"])
_SMALL_CPUS = st.integers(0, 15)
_WIDE_SIBLINGS = st.frozensets(st.integers(0, 20), max_size=3)
_GOOD_MEMORY = st.sampled_from([1024, 2**20, 2**40])
_BAD_MEMORY = st.sampled_from([0, 1, 2**53, 2**63])
_GOOD_UNITS = st.sampled_from(["KiB", "KiB", "MiB", "GiB", "bytes"])
_ANY_UNITS = st.sampled_from(UNITS)
_GOOD_PAGES = st.lists(st.sampled_from([4, 2048, 1048576]), unique=True, max_size=3)
_BAD_PAGES = st.lists(st.sampled_from([4, 2048, 1048576, 0, 3, 2**31]), max_size=3)
_STRAY_CELLS = st.lists(st.integers(0, 6), max_size=4)
_GOOD_DISTANCES = st.sampled_from([11, 12, 20, 21, 32])
_BAD_DISTANCES = st.sampled_from([0, 9, 10, 255])
_CELL_IDS = st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True)
_CLASHING_CELL_IDS = st.lists(st.integers(0, 5), max_size=4)
_CPU_POOL = st.permutations(range(16))
_PER_CELL = st.integers(0, 4)
_OVERLAPPING = st.lists(st.integers(0, 15), max_size=4, unique=True)
_HOSTS = st.sampled_from(["<host><cpu/>{}</host>", "<host/>{}", "{}"])


class Junk:
    """Passes valid values through, or (about 1 in ``rate``) a drawn wrong value or None (omit it).

    The rate is drawn per document, and half the documents get none at all,
    so clean-but-inconsistent documents reach the parsers' semantic checks.
    """

    def __init__(self, draw: st.DrawFn, rates: tuple[int, ...] = (0, 0, 48, 12)) -> None:
        self.draw = draw
        self.rate = draw(st.sampled_from(rates))

    def __call__(self, valid: object) -> str | None:
        # The wrong outcomes are the last indexes: Hypothesis favours index 0 when it generates.
        roll = self.draw(_ROLLS[self.rate]) if self.rate else 0
        if roll == self.rate - 1:
            return str(self.draw(values))
        if roll == self.rate - 2 or valid is None:
            return None
        return str(valid)

    def mostly(self, good: st.SearchStrategy[T], bad: st.SearchStrategy[T], odds: int = 8) -> T:
        """A draw from ``good``, or about 1 in ``odds`` from ``bad``."""
        return self.draw(bad if self.draw(_ROLLS[odds]) == odds - 1 else good)

    def or_bad(self, good: T, bad: st.SearchStrategy[T], odds: int = 8) -> T:
        """``good``, or about 1 in ``odds`` a draw from ``bad``."""
        return self.draw(bad) if self.draw(_ROLLS[odds]) == odds - 1 else good


def attrs(**pairs: str | None) -> str:
    """`` name='value'`` for each pair whose value is not None (escaped, newlines included)."""
    return "".join(f" {name}={quoteattr(value)}" for name, value in pairs.items() if value is not None)


def text_el(tag: str, text: str | None, extra: str = "") -> str:
    """``<tag extra>text</tag>``; nothing when ``text`` is None."""
    return "" if text is None else f"<{tag}{extra}>{escape(text)}</{tag}>"


def bitmap(bits: frozenset[int]) -> str:
    """hwloc's bitmap writer: 32-bit words, most significant first."""
    if not bits:
        return "0x0"
    words = [
        sum(1 << (b - 32 * w) for b in bits if 32 * w <= b < 32 * w + 32) for w in range(max(bits) // 32 + 1)
    ]
    return ",".join(f"0x{word:08x}" for word in reversed(words))


def _cpuset_text(ids: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


# --- libvirt capabilities -----------------------------------------------------------------------


def _cap_cpu(draw: st.DrawFn, junk: Junk, cpu_id: int, everything: _Caps) -> str:
    siblings = junk.mostly(everything.siblings, _WIDE_SIBLINGS)
    return (
        "<cpu"
        + attrs(
            id=junk(cpu_id),
            socket_id=junk(draw(_SOCKETS)),
            die_id=draw(_DIES),
            core_id=junk(draw(_CORES)),
            siblings=junk(_cpuset_text(siblings | {cpu_id})),
        )
        + "/>"
    )


def _cap_cell(draw: st.DrawFn, junk: Junk, cell_id: int, cpu_ids: list[int], everything: _Caps) -> str:
    memory = junk(junk.mostly(_GOOD_MEMORY, _BAD_MEMORY))
    unit = junk(junk.mostly(_GOOD_UNITS, _ANY_UNITS))
    parts = [f"<cell{attrs(id=junk(cell_id))}>", text_el("memory", memory, attrs(unit=unit))]
    for size in junk.mostly(_GOOD_PAGES, _BAD_PAGES):
        count = draw(_COUNTS)
        parts.append(text_el("pages", junk(count), attrs(unit=junk("KiB"), size=junk(size))))
    others = junk.or_bad(everything.cell_ids, _STRAY_CELLS)
    with_distances: bool = draw(_BOOL)
    if others and with_distances:
        dists = [10 if o == cell_id else junk.mostly(_GOOD_DISTANCES, _BAD_DISTANCES) for o in others]
        body = "".join(
            f"<sibling{attrs(id=junk(o), value=junk(v))}/>" for o, v in zip(others, dists, strict=True)
        )
        parts.append(f"<distances>{body}</distances>")
    parts.append(f"<cpus{attrs(num=junk(len(cpu_ids)))}>")
    parts += [_cap_cpu(draw, junk, cpu, everything) for cpu in cpu_ids]
    parts.append("</cpus></cell>")
    return "".join(parts)


class _Caps:
    """The cell and CPU ids one capabilities document declares (for references that mostly hit)."""

    def __init__(self, cell_ids: list[int], cpus: list[list[int]]) -> None:
        self.cell_ids = cell_ids
        cpu_ids = sorted({c for ids in cpus for c in ids})
        self.siblings = st.frozensets(st.sampled_from(cpu_ids) if cpu_ids else _SMALL_CPUS, max_size=2)


@st.composite
def capabilities_documents(draw: st.DrawFn) -> str:
    """A ``<capabilities>`` document with 0-4 cells whose ids, CPUs, siblings and distances may clash."""
    junk = Junk(draw)
    cell_ids = junk.mostly(_CELL_IDS, _CLASHING_CELL_IDS)
    pool = draw(_CPU_POOL)
    cpus = [sorted(pool[4 * i : 4 * i + draw(_PER_CELL)]) for i in range(len(cell_ids))]
    if draw(_ROLLS[8]) == 7:  # CPUs shared between cells
        cpus = [draw(_OVERLAPPING) for _ in cell_ids]
    everything = _Caps(cell_ids, cpus)
    cells = "".join(
        _cap_cell(draw, junk, cid, ids, everything) for cid, ids in zip(cell_ids, cpus, strict=True)
    )
    topology = f"<topology><cells{attrs(num=junk(len(cell_ids)))}>{cells}</cells></topology>"
    host = junk.or_bad("<host>{}</host>", _HOSTS)
    return "<capabilities>" + host.format(topology) + "<guest><os_type>hvm</os_type></guest></capabilities>"


# --- hwloc --------------------------------------------------------------------------------------


_HW_NODE_CLASH = st.integers(0, 3)
_HW_GOOD_PAGES = st.lists(st.sampled_from([4096, 2097152, 1073741824]), unique=True, max_size=2)
_HW_BAD_PAGES = st.lists(st.sampled_from([4096, 0, 1000, 2**62]), max_size=2)
_HW_BAD_CPUSET = st.sampled_from(["0x0", "", None])
_HW_GOOD_MEMORY = st.sampled_from([2**30, 2**34])
_HW_BAD_MEMORY = st.sampled_from([0, 1023, 2**63, 2**64])
_HW_SUBTYPES = st.sampled_from([None, None, "DRAM", "HBM", "CXL-DRAM"])
_ONE_OR_TWO = st.integers(1, 2)
_HW_INDEXING = st.sampled_from(["os", "gp", None])
_HW_BAD_INDEXING = st.sampled_from(["logical", ""])
_HW_EXTRA_NODE = st.integers(0, 9)
_HW_BAD_DISTANCES = st.sampled_from([0, 9, 10, 2**64])
_HW_MATRIX_NAMES = st.sampled_from([None, "NUMALatency", "Bandwidth"])
_HW_BAD_KINDS = st.sampled_from(["²", "4" * 30, "x", "-4"])
_HW_GROUPS = st.sampled_from(["Die", "Group", "L3Cache"])
_HW_VERSIONS = st.sampled_from(["2.0", "2.11", "3.0"])
_HW_BAD_VERSIONS = st.sampled_from(["1.11", "", "4.0", "2"])
_PCI_TYPES = (
    "0302 [10de:2330] [10de:16c1] a1",
    "0200 [15b3:1021] [15b3:0041] 00 00",
    "1200 [1da3:1020] [1da3:0000] 01",
    "0604 [8086:352a] [0000:0000] 04",
)
_HW_PCI_TYPES = st.sampled_from(_PCI_TYPES)


class _Hw:
    """State of one hwloc document being built: id counters, the NUMA nodes made, the junk source."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.junk = Junk(draw, rates=(0, 0, 96, 24))
        self.pu_ids = itertools.count()
        self.node_ids = itertools.count()
        self.buses = itertools.count(1, 2)
        self.gp = itertools.count(1)
        self.nodes: list[tuple[int, int]] = []  # (os_index, gp_index)

    def obj(self, kind: str, inner: str = "", **extra: str | None) -> str:
        base = attrs(type=self.junk(kind), gp_index=str(next(self.gp)))
        return f"<object{base}{attrs(**extra)}>{inner}</object>"

    def numa(self, cpus: frozenset[int]) -> tuple[str, int]:
        draw, junk = self.draw, self.junk
        node_id = junk.or_bad(next(self.node_ids), _HW_NODE_CLASH)
        gp = next(self.gp)
        self.nodes.append((node_id, gp))
        sizes = junk.mostly(_HW_GOOD_PAGES, _HW_BAD_PAGES)
        pages = "".join(f"<page_type{attrs(size=junk(z), count=junk(draw(_COUNTS)))}/>" for z in sizes)
        cpuset = junk.or_bad(bitmap(cpus), _HW_BAD_CPUSET, odds=5)
        memory = junk.mostly(_HW_GOOD_MEMORY, _HW_BAD_MEMORY)
        xml = (
            "<object"
            + attrs(
                type="NUMANode",
                os_index=junk(node_id),
                gp_index=junk(gp),
                cpuset=junk(cpuset),
                nodeset=bitmap(frozenset({node_id})),
                local_memory=junk(memory),
                subtype=draw(_HW_SUBTYPES),
            )
            + f">{pages}</object>"
        )
        if draw(_ROLLS[6]) == 5:
            xml = self.obj("MemCache", xml, cache_size="1073741824")
        return xml, node_id

    def memory(self, cpus: frozenset[int], counts: tuple[int, ...]) -> tuple[str, frozenset[int]]:
        """NUMA nodes (how many drawn from ``counts``) to hang off an object with ``cpus``, and their ids."""
        made = [self.numa(cpus) for _ in range(self.draw(st.sampled_from(counts)))]
        return "".join(x for x, _ in made), frozenset(n for _, n in made)

    def core(self, core_id: int) -> tuple[str, frozenset[int], frozenset[int]]:
        ids = [
            self.junk.or_bad(next(self.pu_ids), _HW_NODE_CLASH, odds=16)
            for _ in range(self.draw(_ONE_OR_TWO))
        ]
        pus = "".join(self.obj("PU", os_index=self.junk(i), cpuset=bitmap(frozenset({i}))) for i in ids)
        xml = self.obj("Core", pus, os_index=self.junk(core_id), cpuset=bitmap(frozenset(ids)))
        return xml, frozenset(ids), frozenset()

    def group(
        self, kind: str, index: int, children: list[tuple[str, frozenset[int], frozenset[int]]]
    ) -> tuple[str, frozenset[int], frozenset[int]]:
        """A Package, Die, Group or cache over ``children`` (xml, cpus, nodes), maybe with memory and PCI."""
        cpus = frozenset[int]().union(*(c for _, c, _ in children))
        memory, nodes = self.memory(cpus, (0, 0, 1, 1, 2))
        nodes |= frozenset[int]().union(*(n for _, _, n in children))
        inner = memory + "".join(x for x, _, _ in children) + self.pci()
        extra = {"subtype": "Die"} if kind == "Group" else {}
        nodeset = self.junk(bitmap(nodes))
        xml = self.obj(kind, inner, os_index=self.junk(index), cpuset=bitmap(cpus), nodeset=nodeset, **extra)
        return xml, cpus, nodes

    def pci(self) -> str:
        if self.draw(_ROLLS[5]) < 3:
            return ""
        bus = self.junk.or_bad(next(self.buses), _HW_NODE_CLASH)
        kind = self.draw(_HW_PCI_TYPES)
        dev = self.obj("PCIDev", pci_busid=self.junk(f"0000:{bus + 1:02x}:00.0"), pci_type=self.junk(kind))
        bridge = self.obj("Bridge", dev, pci_busid=self.junk(f"0000:{bus:02x}:01.0"), pci_type=_PCI_TYPES[3])
        return self.obj("Bridge", bridge, bridge_type="0-1")

    def distances(self) -> str:
        draw, junk = self.draw, self.junk
        if not self.nodes or not draw(_BOOL):
            return ""
        indexing = junk.mostly(_HW_INDEXING, _HW_BAD_INDEXING)
        ids = [gp if indexing == "gp" else os for os, gp in self.nodes]
        ids = junk.or_bad(ids, _HW_EXTRA_NODE.map(lambda extra: [*ids, extra]))
        n = len(ids)
        far = junk.mostly(_GOOD_DISTANCES, _HW_BAD_DISTANCES)
        matrix = [10 if i == j else far for i in range(n) for j in range(n)]
        matrix = junk.or_bad(matrix, st.integers(0, len(matrix)).map(lambda cut: matrix[:cut]))
        body = text_el("indexes", " ".join(junk(i) or "" for i in ids), attrs(length=str(n)))
        body += text_el("u64values", " ".join(str(v) for v in matrix), attrs(length=str(len(matrix))))
        name = draw(_HW_MATRIX_NAMES)
        kind = junk.or_bad("5", _HW_BAD_KINDS)
        head = attrs(type=junk("NUMANode"), nbobjs=junk(n), indexing=indexing, kind=kind, name=name)
        return f"<distances2{head}>{body}</distances2>"


@st.composite
def hwloc_documents(draw: st.DrawFn) -> str:
    """An ``lstopo --of xml`` document: packages, optional dies or groups, cores, PUs, NUMA nodes, PCI."""
    hw = _Hw(draw)
    packages = []
    for p in range(draw(_ONE_OR_TWO)):
        dies = []
        for d in range(draw(_ONE_OR_TWO)):
            cores = [hw.core(c) for c in range(draw(_ONE_OR_TWO))]
            if draw(_BOOL):
                dies.append(hw.group(draw(_HW_GROUPS), d, cores))
            else:
                dies += cores
        packages.append(hw.group("Package", p, dies))
    cpus = frozenset[int]().union(*(c for _, c, _ in packages))
    # Nodes hung off packages or dies own their CPUs; a machine-level node catches the rest.
    uncovered = not hw.nodes or any(not nodes for _, _, nodes in packages)
    memory, _ = hw.memory(cpus, (1, 1, 1, 0) if uncovered else (0, 0, 1))
    machine = hw.obj(
        "Machine", memory + "".join(x for x, _, _ in packages), os_index="0", cpuset=bitmap(cpus)
    )
    version = hw.junk.mostly(_HW_VERSIONS, _HW_BAD_VERSIONS)
    return f"<topology{attrs(version=version)}>{machine}{hw.distances()}</topology>"


# --- libvirt node devices -----------------------------------------------------------------------

_NAMES = ("pci_0000_17_00_0", "pci_0000_00_01_0", "pci_0000_c6_01_0", "computer", "usb_1_5", "net_eth0", "")
_CLASSES = ("0x030200", "0x030000", "0x120000", "0x020000", "0x060400", "0x010601", "030200", "0x1", "")
_IDS = ("0x10de", "0x8086", "0x15b3", "0x1da3", "10de", "0x0", "0xffff")


@st.composite
def nodedev_documents(draw: st.DrawFn) -> str:
    """One ``<device>``: mostly PCI with fields near and beyond PCI's widths, sometimes another kind."""
    junk = Junk(draw)
    kind = draw(st.sampled_from(["pci", "pci", "pci", "usb_device", "net", "system"]))
    cap = ""
    if kind == "pci":
        cap = "".join(
            text_el(tag, junk(draw(st.sampled_from([0, 1, top, top + 1, 23]))))
            for tag, top in (("domain", 0xFFFF), ("bus", 0xFF), ("slot", 0x1F), ("function", 7))
        )
        cap += text_el("class", junk(draw(st.sampled_from(_CLASSES))))
        cap += f"<vendor{attrs(id=junk(draw(st.sampled_from(_IDS))))}/><product{attrs(id=junk('0x2330'))}/>"
        cap += f"<numa{attrs(node=junk(draw(st.integers(-1, 3))))}/>" if draw(st.booleans()) else ""
        cap += "<capability type='pci-bridge'/>" if draw(st.booleans()) else ""
    name = text_el("name", junk(draw(st.sampled_from(_NAMES))))
    parent = text_el("parent", junk(draw(st.sampled_from(_NAMES))))
    return f"<device>{name}{parent}<capability{attrs(type=junk(kind))}>{cap}</capability></device>"


@st.composite
def nodedev_files(draw: st.DrawFn) -> str:
    """Several devices under a ``<devices>`` or ``<node>`` root, sometimes one device listed twice."""
    devices = draw(st.lists(nodedev_documents(), max_size=5))
    repeat: bool = draw(_BOOL)
    if devices and repeat:
        devices.append(devices[draw(st.integers(0, len(devices) - 1))])
    root = draw(st.sampled_from(["devices", "node", "x"]))
    return f"<{root}>" + "".join(devices) + f"</{root}>"


# --- nvidia-smi -q -x ---------------------------------------------------------------------------

_BUS_IDS = ("00000000:3B:00.0", "00000000:18:00.0", "0000:3b:00.0", "00000019:01:00.0", "00000000:3B:20.0",
            "FFFFFFFF:FF:1F.7", "GPU-1", "N/A", "")
_FLAGS = ("Yes", "No", "N/A", "[Unknown Error]", "yes", "")
_COUNTERS = ("sram_uncorrectable", "dram_uncorrectable", "sram_uncorrectable_parity", "sram_correctable")


@st.composite
def nvidia_smi_documents(draw: st.DrawFn) -> str:
    """An ``<nvidia_smi_log>`` of a few GPUs whose bus ids, ECC counters and flags are near and beyond what
    nvidia-smi prints; GPUs may repeat a bus id or lack one."""
    junk = Junk(draw)
    gpus = []
    for _ in range(draw(st.integers(0, 4))):
        bus_id = junk(draw(st.sampled_from(_BUS_IDS)))
        counters = "".join(text_el(tag, junk(draw(_COUNTS))) for tag in _COUNTERS if draw(_BOOL))
        older = text_el("double_bit", junk(draw(_COUNTS)) if draw(_BOOL) else None) if draw(_BOOL) else ""
        ecc = f"<ecc_errors><volatile>{counters}{older}</volatile><aggregate>{counters}</aggregate></ecc_errors>"
        flags = "".join(text_el(tag, junk(draw(st.sampled_from(_FLAGS))))
                        for tag in ("remapped_row_pending", "remapped_row_failure"))
        retired = text_el("pending_retirement", junk(draw(st.sampled_from(_FLAGS))))
        gpu_id = attrs(id=junk(draw(st.sampled_from(_BUS_IDS))))
        gpus.append(f"<gpu{gpu_id}><pci>{text_el('pci_bus_id', bus_id)}</pci>{ecc}"
                    f"<retired_pages>{retired}</retired_pages><remapped_rows>{flags}</remapped_rows></gpu>")
    root = draw(st.sampled_from(["nvidia_smi_log", "nvidia_smi_log", "nvidia_smi_log", "gpu"]))
    return f"<?xml version='1.0' ?>\n<!DOCTYPE nvidia_smi_log SYSTEM 'nvsmi_device_v12.dtd'>\n<{root}>" + \
        "".join(gpus) + f"</{root}>"
