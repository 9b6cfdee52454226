"""Regressions from fuzzing the source parsers: each input once crashed, or was accepted when it must not be.

Every case must now end in one InvalidInputError whose message is a single
line naming the document and the problem. The comment above each group
says what the input did before the fix.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vnuma.errors import InvalidInputError
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.hwloc import parse_hwloc
from vnuma.sources.nodedev import parse_nodedev, parse_nodedev_file_content
from vnuma.topology import Host

INT64_MAX = "9223372036854775807"
NODE_WITH = "<object type='NUMANode' os_index='0' cpuset='0x3' local_memory='1073741824'>{pages}</object>"
NODE = NODE_WITH.format(pages="")
PUS = "<object type='PU' os_index='0'/><object type='PU' os_index='1'/>"
CORE = f"<object type='Core' os_index='0'>{PUS}</object>"
GPU = "<object type='PCIDev' pci_busid='0000:02:00.0' pci_type='0302 [10de:2330] [10de:16c1] a1'/>"


def caps(cell: str) -> bytes:
    return f"<capabilities><host><topology><cells>{cell}</cells></topology></host></capabilities>".encode()


def cpu(attrs: str) -> bytes:
    return caps(f"<cell id='0'><cpus><cpu {attrs}/></cpus></cell>")


def hwloc(machine: str, tail: str = "") -> bytes:
    head = "<topology version='2.0'><object type='Machine' os_index='0' cpuset='0x3'>"
    return f"{head}{machine}</object>{tail}</topology>".encode()


def matrix(indexes: str, values: str, kind: str = "5") -> str:
    n = len(indexes.split())
    return (
        f"<distances2 type='NUMANode' kind='{kind}' nbobjs='{n}' indexing='os'>"
        f"<indexes>{indexes}</indexes><u64values>{values}</u64values></distances2>"
    )


def pci(numa: str = "", **fields: str) -> bytes:
    f = {"domain": "0", "bus": "0x17", "slot": "0", "function": "0"} | fields
    addr = "".join(f"<{tag}>{f[tag]}</{tag}>" for tag in ("domain", "bus", "slot", "function"))
    ids = "<vendor id='0x10de'/><product id='0x2330'/>"
    cap = f"<capability type='pci'>{addr}{ids}{numa}</capability>"
    return f"<device><name>pci_0000_17_00_0</name>{cap}</device>".encode()


def read_caps(data: bytes | str) -> object:
    return parse_capabilities(data, name="h", what="caps.xml")


def read_hwloc(data: bytes | str) -> Host:
    return parse_hwloc(data, name="h", what="hw.xml")


def read_device(data: bytes | str) -> object:
    return parse_nodedev(data, what="dev.xml")


def read_devices(data: bytes | str) -> object:
    return parse_nodedev_file_content(data, "devs.xml")


Parse = Callable[[bytes | str], object]
CASES: list[tuple[str, Parse, bytes | str, str]] = [
    # UnicodeEncodeError: a str holding a lone surrogate cannot be encoded to UTF-8.
    ("str-lone-surrogate", read_caps, "<capabilities>\ud800</capabilities>", "caps.xml: unreadable text: "),
    # Two-line message: libxml2 ends "Char 0x0 out of allowed range" with a newline.
    ("nul-byte", read_device, b"<\x00device/>", "dev.xml: malformed XML: Invalid character"),
    # Multi-line message: the device's <name> text went into every message verbatim.
    (
        "device-name-newline",
        read_device,
        b"<device><name>pci\n0000</name><capability type='pci'/></device>",
        "dev.xml device pci 0000 line 2: PCI capability has no <domain>",
    ),
    # Accepted as "7fffffff:17:00.0", "0000:60400:00.0"...: not PCI addresses.
    (
        "pci-domain-17-bits",
        read_device,
        pci(domain="2147483647"),
        "<domain> a number '2147483647' is above 65535",
    ),
    ("pci-bus-9-bits", read_devices, pci(bus="0x060400"), "<bus> a number '0x060400' is above 255"),
    ("pci-slot-6-bits", read_device, pci(slot="32"), "<slot> a number '32' is above 31"),
    ("pci-function-4-bits", read_device, pci(function="8"), "<function> a number '8' is above 7"),
    (
        "numa-node-33-bits",
        read_device,
        pci("<numa node='4294967296'/>"),
        "node '4294967296' is above 2147483647",
    ),
    # Accepted, then the inventory raised OverflowError ("Python int too large to convert to SQLite INTEGER").
    (
        "memory-70-bits",
        read_caps,
        caps("<cell id='0'><memory unit='KiB'>1180591620717411303424</memory></cell>"),
        f"<memory> a size '1180591620717411303424' is above {INT64_MAX}",
    ),
    (
        "memory-unit-overflows",
        read_caps,
        caps("<cell id='0'><memory unit='EiB'>9000</memory></cell>"),
        f"<memory> a size {9000 * 2**50} KiB is above {INT64_MAX} KiB",
    ),
    (
        "pages-sum-overflows",
        read_caps,
        caps(f"<cell id='0'><pages size='1048576'>{INT64_MAX}</pages></cell>"),
        f"cell 0 has no <memory> and its pages add up above {INT64_MAX} KiB",
    ),
    # Accepted: ids and page sizes the inventory's 32-bit columns (PostgreSQL INTEGER) cannot hold.
    ("cpu-id-10e30", read_caps, cpu(f"id='{10**30}'"), f"<cpu> attribute id '{10**30}' is out of range"),
    ("cell-id-32-bits", read_caps, caps("<cell id='2147483648'/>"), "id '2147483648' is above 2147483647"),
    (
        "page-size-4-tib",
        read_caps,
        caps("<cell id='0'><pages unit='GiB' size='4096'>1</pages></cell>"),
        "<pages> attribute size 4294967296 KiB is above 2147483647 KiB",
    ),
    # ValueError from int(): more digits than Python converts from a string.
    (
        "siblings-5000-digits",
        read_caps,
        cpu(f"id='0' siblings='{'9' * 5000}'"),
        "name a CPU id above 2147483647",
    ),
    # A set of 4.3 billion ids was built before any check (memory exhaustion).
    ("siblings-4-billion", read_caps, cpu("id='0' siblings='0-4294967295'"), "name more than 256 CPUs"),
    # Accepted, giving cell 0 two distances to itself.
    (
        "hwloc-matrix-node-twice",
        read_hwloc,
        hwloc(NODE + CORE, matrix("0 0", "10 20 20 10")),
        "distance matrix lists NUMA node(s) [0] (os index) twice",
    ),
    # Accepted: ids and page sizes beyond the inventory's 32-bit columns.
    (
        "hwloc-pu-id-33-bits",
        read_hwloc,
        hwloc(NODE + "<object type='PU' os_index='4294967296'/>"),
        "<object> attribute os_index '4294967296' is above 2147483647",
    ),
    (
        "hwloc-page-size-2-62",
        read_hwloc,
        hwloc(NODE_WITH.format(pages="<page_type size='4611686018427387904' count='0'/>") + CORE),
        "<page_type> size 4503599627370496 KiB is above 2147483647 KiB",
    ),
]


@pytest.mark.parametrize(("parse", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fuzzed_input_is_refused_on_one_line(parse: Parse, data: bytes | str, expected: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse(data)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


LEFT_OUT: list[tuple[str, bytes, str]] = [
    # Accepted whole: two devices at one PCI address (claims are unique per address). Now every copy is left
    # out and said so, as node-device files do.
    ("hwloc-pci-twice", hwloc(NODE + CORE + GPU + GPU), "device 0000:02:00.0 (GPU): listed twice, left out"),
    # Multi-line message: the raw os_index ("&#10;" is a newline) was quoted as read; the part left out now
    # names the PU by its number, on one line.
    (
        "hwloc-pu-index-newline",
        hwloc("<object type='NUMANode' os_index='0' local_memory='1024'/><object type='PU' os_index='&#10;5'/>"),
        "PU 5: in no NUMA node, left out",
    ),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in LEFT_OUT], ids=[c[0] for c in LEFT_OUT])
def test_fuzzed_parts_are_left_out_on_one_line(data: bytes, expected: str) -> None:
    from vnuma.sources.hwloc import read_hwloc as read

    assert [part.line() for part in read(data, name="h", what="hw.xml").left_out] == [expected]


def test_distance_kind_superscript_digit_is_read_not_crashed() -> None:
    # kind='²' raised ValueError (str.isdigit() accepts it, int() does not); now it is not a latency kind.
    host = read_hwloc(hwloc(NODE + CORE, matrix("0", "10", kind="²")))
    assert host.cells[0].distances == ((0, 10),)


def test_siblings_within_the_limit_still_parse() -> None:
    host = read_caps(
        caps("<cell id='0'><cpus><cpu id='0' siblings='0-1'/><cpu id='1' siblings='0-1'/></cpus></cell>")
    )
    assert isinstance(host, Host)
    assert [c.siblings for c in host.cells[0].cpus] == [frozenset({0, 1})] * 2
