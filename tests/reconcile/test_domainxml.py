"""The domain XML parser: cpusets round-trip, libvirt's own output reads, hostile input is refused."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.errors import InvalidInputError
from vnuma.render.metadata import VNUMA_NS as RENDERED_NS
from vnuma.sources.domainxml import VNUMA_NS, HugePages, MemNode, parse_domain
from vnuma.topology import format_cpuset

cpusets = st.frozensets(st.integers(0, 511), min_size=1, max_size=40)


@st.composite
def tunings(draw: st.DrawFn) -> tuple[int, dict[int, frozenset[int]], frozenset[int], dict[int, frozenset[int]]]:
    vcpus = draw(st.integers(1, 64))
    pins = draw(st.dictionaries(st.integers(0, vcpus - 1), cpusets, max_size=vcpus))
    memnodes = draw(st.dictionaries(st.integers(0, 7), st.frozensets(st.integers(0, 63), min_size=1), max_size=8))
    return vcpus, pins, draw(cpusets), memnodes


def _xml(
    vcpus: int, pins: dict[int, frozenset[int]], emulator: frozenset[int], memnodes: dict[int, frozenset[int]]
) -> str:
    pin_xml = "".join(f"<vcpupin vcpu='{v}' cpuset='{format_cpuset(c)}'/>" for v, c in pins.items())
    nodes = frozenset().union(*memnodes.values()) if memnodes else frozenset({0})
    memnode_xml = "".join(
        f"<memnode cellid='{cell}' mode='restrictive' nodeset='{format_cpuset(n)}'/>" for cell, n in memnodes.items()
    )
    return (
        f"<domain type='kvm'><name>g</name><memory unit='GiB'>4</memory><vcpu placement='static'>{vcpus}</vcpu>"
        f"<cputune>{pin_xml}<emulatorpin cpuset='{format_cpuset(emulator)}'/></cputune>"
        f"<numatune><memory mode='restrictive' nodeset='{format_cpuset(nodes)}'/>{memnode_xml}</numatune></domain>"
    )


@given(tunings())
def test_cputune_and_numatune_cpusets_round_trip(
    tuning: tuple[int, dict[int, frozenset[int]], frozenset[int], dict[int, frozenset[int]]],
) -> None:
    vcpus, pins, emulator, memnodes = tuning
    d = parse_domain(_xml(vcpus, pins, emulator, memnodes))
    assert (d.vcpus, d.memory_kib) == (vcpus, 4 * 1024 * 1024)
    assert dict(d.vcpupins) == pins and [v for v, _ in d.vcpupins] == sorted(pins)
    assert all(d.pins_of(v) == pins.get(v) for v in range(vcpus))
    assert d.emulatorpin == emulator
    assert d.memnodes == tuple(MemNode(c, "restrictive", memnodes[c]) for c in sorted(memnodes))
    assert d.memory_mode == "restrictive"


LIBVIRT_OUTPUT = """<domain type='kvm' id='3'>
  <name>vm1</name>
  <metadata>
    <vnuma:placement xmlns:vnuma="https://vnuma.dev/xmlns/domain/1">
      <vnuma:tenant>acme</vnuma:tenant><vnuma:vm>vm1</vnuma:vm><vnuma:host>h1</vnuma:host>
      <vnuma:cpu-policy>dedicated</vnuma:cpu-policy><vnuma:thread-policy>isolate</vnuma:thread-policy>
    </vnuma:placement>
  </metadata>
  <memory unit='KiB'>6291456</memory>
  <memoryBacking><hugepages>
    <page size='1' unit='G' nodeset='1'/>
    <page size='2048' unit='KiB'/>
  </hugepages></memoryBacking>
  <vcpu placement='static' cpuset='0-3'>4</vcpu>
  <cputune><vcpupin vcpu='0' cpuset='8'/><vcpupin vcpu='1' cpuset='9'/></cputune>
  <cpu mode='host-passthrough'>
    <topology sockets='1' dies='1' cores='2' threads='2'/>
    <numa>
      <cell id='0' cpus='0-1' memory='2' unit='GiB'/>
      <cell id='1' cpus='2-3' memory='4194304' unit='KiB'/>
    </numa>
  </cpu>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x3B' slot='0x00' function='0x1'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='usb'><source><vendor id='0x1234'/></source></hostdev>
  </devices>
</domain>
"""


def test_reads_what_libvirt_prints() -> None:
    d = parse_domain(LIBVIRT_OUTPUT)
    assert d.name == "vm1" and d.threads_per_core == 2
    assert [(c.id, c.vcpus, c.memory_kib) for c in d.cells] == [
        (0, frozenset({0, 1}), 2097152), (1, frozenset({2, 3}), 4194304)
    ]
    assert d.hugepages == (HugePages(1048576, frozenset({1})), HugePages(2048, None))
    assert (d.page_size_of(0), d.page_size_of(1)) == (2048, 1048576)
    assert (d.pins_of(0), d.pins_of(3)) == (frozenset({8}), frozenset({0, 1, 2, 3}))
    assert d.hostdevs == ("0000:3b:00.1",)
    assert d.mark is not None and (d.mark.tenant, d.mark.vm, d.mark.host, d.mark.thread_policy) == (
        "acme", "vm1", "h1", "isolate"
    )
    assert d.emulatorpin is None and d.memory_nodeset is None


def test_the_namespace_is_the_one_vnuma_renders() -> None:
    assert VNUMA_NS == RENDERED_NS


ENTITIES = """<?xml version="1.0"?>
<!DOCTYPE domain [<!ENTITY e SYSTEM "file:///etc/passwd">]>
<domain><name>&e;</name><vcpu>1</vcpu><memory>1024</memory></domain>"""


@pytest.mark.parametrize(
    ("xml", "message"),
    [
        (ENTITIES, "entity declarations are not allowed"),
        ("<domain><name>x</name>", "malformed XML"),
        ("<capabilities/>", "root element is <capabilities>"),
        ("<domain><name>x</name><memory>1</memory></domain>", "has no <vcpu>"),
        ("<domain><name>x</name><vcpu>2</vcpu><memory>1</memory>"
         "<cputune><vcpupin vcpu='2' cpuset='0'/></cputune></domain>", "beyond the domain's 2 vCPUs"),
        ("<domain><name>x</name><vcpu>2</vcpu><memory>1</memory>"
         "<cputune><vcpupin vcpu='0' cpuset='0-4294967295'/></cputune></domain>", "names more than"),
        ("<domain><name>x</name><vcpu>1</vcpu><memory unit='parsec'>1</memory></domain>", "unknown unit"),
        ("<domain><name>x</name><vcpu>1</vcpu><memory>1</memory><devices><hostdev type='pci'><source>"
         "<address bus='0x100' slot='0' function='0'/></source></hostdev></devices></domain>", "above 255"),
    ],
    ids=["entities", "truncated", "wrong-root", "no-vcpu", "pin-beyond", "huge-cpuset", "bad-unit", "bad-bus"],
)
def test_bad_input_is_one_clear_error(xml: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_domain(xml, what="dom.xml")


@given(st.binary(max_size=300))
def test_any_bytes_parse_or_raise_invalid_input(data: bytes) -> None:
    with contextlib.suppress(InvalidInputError):
        parse_domain(b"<domain>" + data + b"</domain>")
