"""Structure-aware mutation of the real fixture documents.

Each example takes one recorded document, applies 1-4 tree edits (delete,
duplicate, swap, move, rename an element; set, drop or add an attribute;
replace text), serialises it, then maybe applies byte-level edits and a
re-encoding. Edits favour the elements each parser reads, so most inputs
get past the XML layer and into the parser's own checks.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from lxml import etree

from tests.fuzz.raw import byte_mutated, encoded
from tests.fuzz.values import UNITS, values

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data"


@dataclass(frozen=True)
class Family:
    """One document format: its fixtures, the tags its parser reads, and their attribute names."""

    name: str
    files: tuple[Path, ...]
    tags: frozenset[str]
    attributes: tuple[str, ...]


CAPABILITIES = Family(
    "capabilities",
    (*sorted((DATA / "capabilities").glob("*.xml")), ROOT / "vnuma" / "data" / "demo-capabilities.xml"),
    frozenset(
        {"host", "topology", "cells", "cell", "memory", "pages", "distances", "sibling", "cpus", "cpu"}
    ),
    ("id", "unit", "size", "value", "num", "socket_id", "die_id", "core_id", "siblings"),
)
NODEDEV = Family(
    "nodedev",
    (*sorted((DATA / "nodedev").glob("*.xml")), ROOT / "vnuma" / "data" / "demo-node.xml"),
    frozenset(
        {
            "device",
            "name",
            "parent",
            "capability",
            "domain",
            "bus",
            "slot",
            "function",
            "class",
            "vendor",
            "product",
            "numa",
        }
    ),
    ("type", "id", "node"),
)
HWLOC = Family(
    "hwloc",
    tuple(sorted((DATA / "hwloc").glob("*.xml"))),
    frozenset({"topology", "object", "page_type", "distances2", "indexes", "u64values"}),
    (
        "version",
        "type",
        "subtype",
        "os_index",
        "gp_index",
        "cpuset",
        "nodeset",
        "local_memory",
        "size",
        "count",
        "nbobjs",
        "indexing",
        "kind",
        "name",
        "pci_busid",
        "pci_type",
    ),
)
NVIDIA_SMI = Family(
    "nvidia-smi",
    tuple(sorted((DATA / "nvidia-smi-health").glob("*.xml"))),
    frozenset(
        {
            "nvidia_smi_log",
            "gpu",
            "pci",
            "pci_bus_id",
            "product_name",
            "ecc_errors",
            "volatile",
            "aggregate",
            "sram_uncorrectable",
            "dram_uncorrectable",
            "double_bit",
            "total",
            "retired_pages",
            "pending_retirement",
            "pending_blacklist",
            "remapped_rows",
            "remapped_row_pending",
            "remapped_row_failure",
        }
    ),
    ("id",),
)
FAMILIES = {f.name: f for f in (CAPABILITIES, NODEDEV, HWLOC, NVIDIA_SMI)}

_TREES: dict[Path, etree._ElementTree] = {}
_OPS = ("delete", "duplicate", "swap", "move", "rename", "set-attr", "drop-attr", "set-text")


def _tree(path: Path) -> etree._ElementTree:
    # Fixtures are trusted, so a default parser; cached because every example starts from one.
    if path not in _TREES:
        _TREES[path] = etree.parse(str(path), etree.XMLParser(remove_comments=True))
    return _TREES[path]


def _pick(draw: st.DrawFn, root: etree._Element, family: Family) -> etree._Element:
    everything = [el for el in root.iter() if isinstance(el.tag, str)]
    favoured = [el for el in everything if el.tag in family.tags]
    use_favoured: bool = draw(st.sampled_from([True, True, True, True, False]))
    pool = favoured if favoured and use_favoured else everything
    return pool[draw(st.integers(0, len(pool) - 1))]


def _related(a: etree._Element, b: etree._Element) -> bool:
    return a is b or any(x is b for x in a.iterancestors()) or any(x is a for x in b.iterancestors())


def _structural(draw: st.DrawFn, op: str, el: etree._Element, other: etree._Element) -> None:
    parent = el.getparent()
    if parent is None:
        return
    if op == "delete":
        parent.remove(el)
    elif op == "duplicate":
        el.addnext(copy.deepcopy(el))
    elif op == "swap" and not _related(el, other) and other.getparent() is not None:
        marker = etree.Element("marker")
        el.addprevious(marker)
        other.addprevious(el)
        marker.addprevious(other)
        parent.remove(marker)  # the marker took el's place, under el's old parent
    elif op == "move" and not _related(el, other):
        other.insert(draw(st.integers(0, len(other))), el)


def _edit(draw: st.DrawFn, op: str, el: etree._Element, family: Family) -> None:
    if op == "rename":
        el.tag = draw(st.sampled_from(sorted(family.tags | {"x", "device", "cell", "object"})))
    elif op == "set-attr":
        name = draw(st.sampled_from(sorted(set(el.attrib) | set(family.attributes))))
        el.set(name, draw(st.sampled_from(UNITS)) if name == "unit" else draw(values))
    elif op == "drop-attr" and el.attrib:
        del el.attrib[draw(st.sampled_from(sorted(el.attrib)))]
    elif op == "set-text":
        el.text = draw(values)


@st.composite
def mutated(draw: st.DrawFn, family: Family) -> bytes | str:
    """One fixture of ``family`` after 1-4 tree edits, maybe byte edits, maybe re-encoded."""
    root = copy.deepcopy(_tree(draw(st.sampled_from(family.files))).getroot())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(_OPS))
        el = _pick(draw, root, family)
        if op in ("delete", "duplicate", "swap", "move"):
            _structural(draw, op, el, _pick(draw, root, family))
        else:
            _edit(draw, op, el, family)
    text: str = etree.tostring(root, encoding="unicode")
    tail = draw(st.sampled_from(["plain", "plain", "bytes", "encoded"]))
    if tail == "plain":
        return text.encode("utf-8")
    if tail == "bytes":
        return draw(byte_mutated(text.encode("utf-8")))
    return draw(encoded(text))
