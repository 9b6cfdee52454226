"""NCCL's own reading of a topology file, written again in Python for the tests.

NCCL does not use an XML library: ``src/graph/xml.cc`` (NVIDIA/nccl, 2.2x)
reads the file a character at a time (``xmlGetNode``/``xmlLoadSub``) and
``src/graph/topo.cc`` then asks each element for its attributes. This reader
follows those rules, so a file it accepts is one NCCL's loader accepts:

* only spaces, ``\\n`` and ``\\r`` between elements; no XML declaration or
  processing instruction; comments skipped;
* attribute values quoted; at most 16 attributes and 255 characters a value;
* the element tree NCCL's handlers walk: ``system`` > ``cpu`` > ``pci`` (nested)
  > ``gpu`` (> ``nvlink``, ``c2c``) or ``nic`` > ``net`` (others are skipped);
* the attributes ``topo.cc`` reads without a default (``xmlGetAttrInt``/``Str``):
  ``system version`` = 1, ``cpu numaid`` and ``arch``, ``pci class``,
  ``busid``, ``link_width`` and ``link_speed``, ``gpu rank``, ``dev``, ``gdr``,
  ``net dev``, ``nvlink count`` and ``tclass`` (and ``target`` for a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
HANDLED = {"system": {"cpu"}, "cpu": {"pci", "nic"}, "pci": {"pci", "gpu", "nic", "pcilink"},
           "gpu": {"nvlink", "c2c"}, "nic": {"net"}}
ARCHES = {"x86_64", "arm64", "ppc64"}
PCI_GENS = {"2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe",
            "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"}


class NcclParseError(ValueError):
    """Where NCCL's loader would stop with an error."""


@dataclass
class Node:
    name: str
    attrs: dict[str, str]
    parent: Node | None = None
    subs: list[Node] = field(default_factory=list)

    def iter(self, name: str) -> list[Node]:
        out = [self] if self.name == name else []
        for s in self.subs:
            out += s.iter(name)
        return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def char(self) -> str:
        if self.pos >= len(self.text):
            raise NcclParseError("unexpected EOF")
        c = self.text[self.pos]
        self.pos += 1
        return c

    def token(self, want_value: bool) -> tuple[str, str | None, str]:
        name = ""
        while True:
            c = self.char()
            if c == "=":
                if not want_value:
                    raise NcclParseError(f"unexpected value with name {name}")
                return name, *self.value()
            name += c
            if len(name) >= MAX_STR_LEN:
                raise NcclParseError(f"name {name} too long")
            if c in " >/\n\r":
                return name[:-1], None, c

    def value(self) -> tuple[str, str]:
        quote = self.char()
        if quote not in "\"'":
            raise NcclParseError("expected (double) quote")
        out = ""
        while (c := self.char()) != quote:
            out += c
            if len(out) >= MAX_STR_LEN:
                raise NcclParseError(f"value {out} too long")
        return out, self.char()

    def node(self) -> tuple[str, str, dict[str, str]] | None:
        """(kind: open/single/close, name, attributes), None at the end of the file."""
        c = " "
        while c in " \n\r":
            if self.pos >= len(self.text):
                return None
            c = self.char()
        if c != "<":
            raise NcclParseError(f"expecting '<', got {c!r}")
        name, _v, c = self.token(False)
        if name.startswith("!--"):
            end = self.text.find("-->", self.pos - 1)
            if end < 0:
                raise NcclParseError("unterminated comment")
            self.pos = end + 3
            return self.node()
        if name == "" and c == "/":
            name, _v, c = self.token(False)
            if c != ">":
                raise NcclParseError(f"unexpected trailing {c!r} in closing tag {name}")
            return "close", name, {}
        attrs: dict[str, str] = {}
        count = 0
        while c == " ":
            key, value, c = self.token(True)
            count += 1
            if count <= MAX_ATTR_COUNT and key:
                attrs[key] = value or ""
        kind = "open"
        if c == "/":
            kind = "single"
            _n, _v, c = self.token(False)
        if c != ">":
            raise NcclParseError(f"expected >, got {c!r}")
        return kind, name, attrs

    def load(self, head: Node | None) -> list[Node]:
        subs: list[Node] = []
        while True:
            got = self.node()
            if got is None:
                if head is not None:
                    raise NcclParseError(f"unterminated {head.name}")
                return subs
            kind, name, attrs = got
            if kind == "close":
                if head is None or name != head.name:
                    raise NcclParseError(f"XML mismatch: {head.name if head else None} / {name}")
                return subs
            node = Node(name, attrs, head)
            node.subs = [] if kind == "single" else self.load(node)
            handled = HANDLED.get(head.name, set()) if head is not None else {"system"}
            if name in handled:
                subs.append(node)


def read_topology(text: str) -> Node:
    """The ``system`` element as NCCL's loader builds it; NcclParseError where NCCL would fail."""
    systems = _Reader(text).load(None)
    if len(systems) != 1:
        raise NcclParseError(f"{len(systems)} system elements")
    system = systems[0]
    _need(system, "version")
    if system.attrs["version"] != "1":
        raise NcclParseError("XML topology has the wrong version")
    for cpu in system.iter("cpu"):
        int(_need(cpu, "numaid"))
        if _need(cpu, "arch") not in ARCHES:
            raise NcclParseError(f"unknown arch {cpu.attrs['arch']}")
    for pci in system.iter("pci"):
        _need(pci, "class")
        _need(pci, "busid")
        int(_need(pci, "link_width"))
        if _need(pci, "link_speed") not in PCI_GENS | {""}:
            raise NcclParseError(f"unknown link speed {pci.attrs['link_speed']!r}")
    for gpu in system.iter("gpu"):
        for key in ("rank", "dev", "gdr"):
            int(_need(gpu, key))
        for link in gpu.subs:
            if link.name == "nvlink":
                int(_need(link, "count"))
                if _need(link, "tclass").startswith("0x03"):
                    _need(link, "target")
    for net in system.iter("net"):
        int(_need(net, "dev"))
    return system


def _need(node: Node, key: str) -> str:
    if key not in node.attrs:
        raise NcclParseError(f"attribute {key} of node {node.name} not found")
    return node.attrs[key]
