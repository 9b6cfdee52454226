"""Each validation rule rejects a broken domain with a message naming the element.

Broken documents are made by editing a good rendering with lxml; none of
them is ever given to libvirt (bad <distances> corrupt libvirt 9.0.0's heap).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from vnuma.errors import RenderError
from vnuma.render.domain import render_domain
from vnuma.render.validate import validate_domain
from vnuma.render.view import RenderOptions
from vnuma.topology import KIB_PER_GIB, PAGE_1G, PAGE_2M

HOST = make_host(gpus_per_cell=2)
PLACEMENT = make_placement(
    HOST,
    [CellSpec(0, 4, 4 * KIB_PER_GIB, PAGE_2M, gpus=1), CellSpec(1, 4, 4 * KIB_PER_GIB, PAGE_1G, gpus=1)],
    threads=2,
    isolate_emulator=True,
)
GOOD = render_domain(HOST, PLACEMENT, options=RenderOptions(iothreads=1))

Edit = Callable[[etree._Element], None]


def _set(path: str, attr: str, value: str, nth: int = 0) -> Edit:
    def edit(root: etree._Element) -> None:
        root.findall(path)[nth].set(attr, value)

    return edit


def _text(path: str, value: str) -> Edit:
    def edit(root: etree._Element) -> None:
        root.find(path).text = value

    return edit


def _remove(path: str, nth: int = 0) -> Edit:
    def edit(root: etree._Element) -> None:
        element = root.findall(path)[nth]
        element.getparent().remove(element)

    return edit


def _duplicate(path: str) -> Edit:
    def edit(root: etree._Element) -> None:
        element = root.find(path)
        element.addnext(etree.fromstring(etree.tostring(element)))

    return edit


def _sibling(cell: int, sibling: int, value: str) -> Edit:
    return _set(f"cpu/numa/cell[@id='{cell}']/distances/sibling[@id='{sibling}']", "value", value)


def _add_sibling(cell: int, sibling: str, value: str) -> Edit:
    def edit(root: etree._Element) -> None:
        distances = root.find(f"cpu/numa/cell[@id='{cell}']/distances")
        etree.SubElement(distances, "sibling", id=sibling, value=value)

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(root: etree._Element) -> None:
        for e in edits:
            e(root)

    return edit


CASES: list[tuple[str, Edit, str]] = [
    (
        "vcpupin-outside",
        _set("cputune/vcpupin", "cpuset", "77", 3),
        "vcpupin vcpu=3 cpuset=77: pCPU 77 is not in the placement",
    ),
    (
        "vcpupin-other-cell",
        _set("cputune/vcpupin", "cpuset", "8", 0),
        "vcpupin vcpu=0 cpuset=8: pCPU 8 is not in guest cell 0's pCPUs",
    ),
    (
        "vcpupin-emulator-cpu",
        _set("cputune/vcpupin", "cpuset", "2", 1),
        "vcpupin vcpu=1 cpuset=2: pCPU 2 is not in guest cell 0's pCPUs",
    ),
    (
        "vcpupin-twice",
        _duplicate("cputune/vcpupin"),
        "vcpupin vcpu=0 cpuset=0: vCPU 0 is pinned more than once",
    ),
    ("vcpupin-missing", _remove("cputune/vcpupin", 5), r"cputune: vCPU\(s\) 5 have no vcpupin"),
    (
        "vcpupin-no-such-vcpu",
        _set("cputune/vcpupin", "vcpu", "99", 7),
        "vcpupin vcpu=99 cpuset=25: the domain has no vCPU 99",
    ),
    (
        "vcpupin-bad-cpuset",
        _set("cputune/vcpupin", "cpuset", "3-1", 0),
        "vcpupin vcpu=0 cpuset=3-1: bad cpuset",
    ),
    (
        "emulatorpin-outside",
        _set("cputune/emulatorpin", "cpuset", "2,30"),
        "emulatorpin cpuset=2,30: pCPU 30 is not in the placement",
    ),
    (
        "iothreadpin-outside",
        _set("cputune/iothreadpin", "cpuset", "5-6"),
        "iothreadpin iothread=1 cpuset=5-6: pCPUs 5-6 are not in the placement",
    ),
    ("numatune-missing", _remove("numatune"), r"no <numatune><memory>"),
    (
        "memory-nodeset-no-such-host-cell",
        _set("numatune/memory", "nodeset", "0-1,7"),
        "numatune memory nodeset=0-1,7: host 'host-a' has no NUMA cell 7",
    ),
    (
        "memory-nodeset-not-placement",
        _set("numatune/memory", "nodeset", "0"),
        r"numatune memory nodeset=0: the placement uses host cell\(s\) 0-1",
    ),
    (
        "memnode-swapped",
        _set("numatune/memnode", "nodeset", "1", 0),
        r"memnode cellid=0 nodeset=1: the placement uses host cell\(s\) 0",
    ),
    ("memnode-missing", _remove("numatune/memnode", 1), r"numatune: guest cell\(s\) 1 have no memnode"),
    (
        "memnode-no-such-guest-cell",
        _set("numatune/memnode", "cellid", "5", 1),
        "memnode cellid=5 nodeset=1: the guest has no NUMA cell 5",
    ),
    (
        "memnode-restrictive-alone",
        _set("numatune/memnode", "mode", "restrictive", 0),
        "memnode cellid=0 nodeset=0 mode=restrictive: libvirt needs mode='restrictive'",
    ),
    (
        "memory-restrictive-alone",
        _set("numatune/memory", "mode", "restrictive"),
        "memnode cellid=0 nodeset=0 mode=strict: libvirt needs",
    ),
    ("vcpu-count", _text("vcpu", "6"), "vcpu 6: the placement has 8 vCPUs"),
    (
        "topology-product",
        _set("cpu/topology", "cores", "3"),
        "cpu topology sockets=2 dies=1 cores=3 threads=2: makes 12 vCPUs, the domain has 8",
    ),
    (
        "cell-cpus-overlap",
        _set("cpu/numa/cell", "cpus", "3-7", 1),
        "numa cell id=1 cpus=3-7: vCPU 3 is also in cell 0",
    ),
    (
        "cell-cpus-not-placement",
        _both(_set("cpu/numa/cell", "cpus", "0-2", 0), _set("cpu/numa/cell", "cpus", "3-7", 1)),
        "numa cell id=0 cpus=0-2: the placement gives guest cell 0 vCPUs 0-3",
    ),
    ("cell-missing", _remove("cpu/numa/cell", 1), r"cpu numa: guest cell\(s\) 1 are missing"),
    (
        "cell-memory-not-placement",
        _set("cpu/numa/cell", "memory", "2097152", 0),
        "numa cell id=0 memory=2097152 KiB: the placement gives guest cell 0 4194304 KiB",
    ),
    (
        "hugepages-dropped",
        _remove("memoryBacking"),
        "numa cell id=0 memory=4194304 KiB: backed by 4 KiB pages, the placement claimed 2048 KiB pages",
    ),
    (
        "hugepage-size-swapped",
        _set("memoryBacking/hugepages/page", "nodeset", "1", 0),
        "numa cell id=0 memory=4194304 KiB: backed by 4 KiB pages",
    ),
    (
        "hugepage-no-such-guest-cell",
        _set("memoryBacking/hugepages/page", "nodeset", "0,4", 0),
        "memoryBacking page size=2048 nodeset=0,4: the guest has no NUMA cell 4",
    ),
    (
        "distance-sibling-out-of-range",
        _add_sibling(0, "2", "30"),
        "numa distances: cell 0 sibling id=2 value=30: there is no guest NUMA cell 2",
    ),
    (
        "distance-below-10",
        _both(_sibling(0, 1, "9"), _sibling(1, 0, "9")),
        "numa distances: cell 0 sibling id=1 value=9: distances must be within 10..255",
    ),
    (
        "distance-diagonal",
        _sibling(1, 1, "11"),
        "numa distances: cell 1 sibling id=1 value=11: the distance of a cell to itself must be 10",
    ),
    (
        "distance-off-diagonal-10",
        _both(_sibling(0, 1, "10"), _sibling(1, 0, "10")),
        "numa distances: cell 0 sibling id=1 value=10: only a cell's distance to itself may be 10",
    ),
    (
        "distance-asymmetric",
        _sibling(0, 1, "31"),
        r"numa distances: cell 0 sibling id=1 value=31: not symmetric \(cell 1 gives 21 back\)",
    ),
    (
        "distance-missing-sibling",
        _remove("cpu/numa/cell[@id='1']/distances/sibling", 0),
        "numa distances: cell 1 gives no distance to cell.s. 0",
    ),
    (
        "distance-one-cell-only",
        _remove("cpu/numa/cell[@id='1']/distances"),
        "numa distances: cell 1 has no <distances> while other cells do",
    ),
    (
        "distance-sibling-twice",
        _duplicate("cpu/numa/cell[@id='0']/distances/sibling"),
        "numa cell id=0 sibling id=0 value=10: sibling 0 is listed twice",
    ),
    (
        "distance-not-a-number",
        _sibling(0, 1, "far"),
        "numa cell id=0 sibling id=1 value=far: 'far' is not a whole number",
    ),
    (
        "hostdev-not-placed",
        _set("devices/hostdev/source/address", "bus", "0x99", 0),
        "hostdev 0000:99:00.0: device is not in the placement",
    ),
    (
        "hostdev-missing",
        _remove("devices/hostdev", 1),
        r"devices: placement device\(s\) 0000:20:00.0 have no hostdev",
    ),
    (
        "expander-bad-node",
        _text("devices/controller[@model='pcie-expander-bus']/target/node", "7"),
        "controller index=1 pcie-expander-bus node=7: the guest has no NUMA cell 7",
    ),
    ("metadata-missing", _remove("metadata"), "metadata: no vnuma:placement element"),
    (
        "metadata-other-tenant",
        _text(
            "metadata/{https://vnuma.dev/xmlns/domain/1}placement/{https://vnuma.dev/xmlns/domain/1}tenant",
            "x",
        ),
        "metadata vnuma:tenant 'x': the placement's tenant is 'acme'",
    ),
    (
        "schema-violation",
        lambda root: etree.SubElement(root.find("devices"), "bogus"),
        "rendered domain does not match libvirt's domain.rng: line",
    ),
]


def _render_edit(edit: Edit) -> str:
    root = etree.fromstring(GOOD.encode())
    edit(root)
    return str(etree.tostring(root, encoding="unicode"))


def test_the_unedited_rendering_is_valid() -> None:
    validate_domain(GOOD, HOST, PLACEMENT)
    validate_domain(_render_edit(lambda root: None), HOST, PLACEMENT)


SEMANTIC = [c for c in CASES if c[0] != "schema-violation"]


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in SEMANTIC], ids=[c[0] for c in SEMANTIC])
def test_semantic_check_rejects_naming_the_element(edit: Edit, message: str) -> None:
    broken = _render_edit(edit)
    with pytest.raises(RenderError, match=message) as info:
        validate_domain(broken, HOST, PLACEMENT, schema=None)
    assert "\n" not in str(info.value)
    with pytest.raises(RenderError):  # with the schema first, one of the two layers still refuses it
        validate_domain(broken, HOST, PLACEMENT)


def test_schema_violation_is_rejected_with_its_line() -> None:
    edit = next(c[1] for c in CASES if c[0] == "schema-violation")
    with pytest.raises(RenderError, match=CASES[-1][2]):
        validate_domain(_render_edit(edit), HOST, PLACEMENT)
    validate_domain(_render_edit(edit), HOST, PLACEMENT, schema=None)


def test_missing_schema_file_skips_only_the_schema(tmp_path: Path) -> None:
    edit = next(c[1] for c in CASES if c[0] == "schema-violation")
    validate_domain(_render_edit(edit), HOST, PLACEMENT, schema=tmp_path / "absent.rng")
    with pytest.raises(RenderError, match="vcpupin vcpu=3 cpuset=77"):
        validate_domain(_render_edit(CASES[0][1]), HOST, PLACEMENT, schema=tmp_path / "absent.rng")


def test_cell_memory_units_are_converted() -> None:
    edit = _both(_set("cpu/numa/cell", "memory", "4", 1), _set("cpu/numa/cell", "unit", "GiB", 1))
    validate_domain(_render_edit(edit), HOST, PLACEMENT)
    decimal = _both(_set("cpu/numa/cell", "memory", "4", 1), _set("cpu/numa/cell", "unit", "GB", 1))
    with pytest.raises(RenderError, match="numa cell id=1 memory=3906250 KiB: the placement gives"):
        validate_domain(_render_edit(decimal), HOST, PLACEMENT)


def test_malformed_xml_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="rendered domain XML is not well-formed XML"):
        validate_domain(GOOD.replace("</domain>", ""), HOST, PLACEMENT)


def test_entities_are_not_expanded() -> None:
    doctype = '<!DOCTYPE domain [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    evil = doctype + GOOD.replace("<name>vm1</name>", "<name>&x;</name>")
    with pytest.raises(RenderError) as info:
        validate_domain(evil, HOST, PLACEMENT)
    assert "root:" not in str(info.value)


@pytest.mark.parametrize(
    ("memory_kib", "page_kib"),
    [(3 * KIB_PER_GIB + 2048, PAGE_1G), (512 * 1024, PAGE_1G), (1024, PAGE_2M)],
    ids=["not-whole-pages", "less-than-one-1g-page", "less-than-one-2m-page"],
)
def test_cell_memory_must_be_whole_pages(memory_kib: int, page_kib: int) -> None:
    host = make_host()
    placement = make_placement(host, [CellSpec(0, 2, memory_kib, page_kib)], threads=2)
    with pytest.raises(
        RenderError, match=re.escape(f"numa cell id=0 memory={memory_kib} KiB: not a whole number")
    ):
        render_domain(host, placement)
