"""The host and fleet pictures: valid SVG 1.1, element ids that say what the placements say, and a PNG
rendered by cairo in which each VM's colour covers exactly as many regions as it holds things."""

from __future__ import annotations

import io
import re
from collections import deque
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from lxml import etree
from PIL import Image

from tests.builders import make_host
from tests.placement.helpers import held_by, request
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CpuPolicy, EmulatorThreads, Isolation, Placement, ThreadPolicy
from vnuma.report import fleetpicture, palette
from vnuma.report.fleetpicture import fleet_rows, fleet_svg
from vnuma.report.hostpicture import host_svg
from vnuma.services.pictures import svg_to_png
from vnuma.topology import PAGE_1G, PAGE_2M, PAGE_4K

SVG11_DTD = Path("/usr/share/xml/w3c-sgml-lib/schema/dtd/REC-SVG11-20110816/svg11.dtd")
NS = {"s": "http://www.w3.org/2000/svg"}
MIN_REGION = 60
"""Pixels: smaller same-colour islands are the insides of glyphs drawn over a coloured box."""


def valid_svg(text: str) -> etree._Element:
    """Parse ``text`` and validate it against the W3C SVG 1.1 DTD (Debian's w3c-sgml-lib)."""
    assert SVG11_DTD.is_file(), "the SVG 1.1 DTD comes with Debian's w3c-sgml-lib (scripts/setup --test)"
    doc = etree.fromstring(text.encode())
    dtd = etree.DTD(str(SVG11_DTD))
    assert dtd.validate(doc), dtd.error_log.filter_from_errors()[:5]
    return doc


def regions(png: bytes, colour: str, min_pixels: int = MIN_REGION) -> int:
    """Connected regions (4-neighbour) of exactly ``colour`` with at least ``min_pixels`` pixels."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    mask = np.all(rgb == want, axis=2)
    seen = np.zeros_like(mask)
    count = 0
    h, w = mask.shape
    for y, x in zip(*np.nonzero(mask), strict=True):
        if seen[y, x]:
            continue
        size, todo = 0, deque([(y, x)])
        seen[y, x] = True
        while todo:
            cy, cx = todo.popleft()
            size += 1
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    todo.append((ny, nx))
        count += size >= min_pixels
    return count


def _placed(fleet: Fleet, *reqs: object) -> list[Placement]:
    out = []
    for r in reqs:
        chosen = place(r, fleet).chosen  # type: ignore[arg-type]
        assert chosen is not None, r
        fleet.add(chosen)
        out.append(chosen)
    return out


@pytest.fixture
def busy() -> tuple[object, list[Placement]]:
    """A 2-socket host (2 cells per socket, a GPU and a NIC per cell, 16 x 1G pages per cell) with four VMs
    of three tenants: GPUs, an isolated emulator with kept-empty siblings, two cells, a shared VM."""
    host = make_host("gpu-host", cells=4, cells_per_socket=2, cores_per_cell=4, memory_gib=40, hugepages_1g_gib=16,
                     hugepages_2m_gib=8, gpus_per_cell=1, nics_per_cell=1, reserved_cpus=frozenset({0, 16}))
    fleet = Fleet([host])
    vms = _placed(
        fleet,
        request("llm", "tenant-a", vcpus=4, memory_gib=4, gpus=1, page_size_kib=PAGE_1G),
        request("iso", "tenant-a", vcpus=2, memory_gib=2, page_size_kib=PAGE_1G,
                thread_policy=ThreadPolicy.ISOLATE, emulator_threads=EmulatorThreads.ISOLATE),
        request("wide", "tenant-b", vcpus=4, memory_gib=4, numa_nodes=2, page_size_kib=PAGE_1G),
        request("float", "tenant-c", vcpus=2, memory_gib=2, page_size_kib=PAGE_2M, cpu_policy=CpuPolicy.SHARED),
    )
    return host, vms


def _by_id(doc: etree._Element) -> dict[str, etree._Element]:
    return {el.get("id"): el for el in doc.iter() if el.get("id")}


def _legend_vm(ids: dict[str, etree._Element], css: str) -> str:
    """The VM named by the legend entry of class ``vmI`` (its tooltip: ``VM name (tenant t)``)."""
    index = next(c for c in css.split() if c.startswith("vm"))[2:]
    title = ids[f"legend-vm{index}"].find("s:title", NS).text
    return title.split()[1]


def test_host_picture_is_valid_svg_whose_ids_say_what_each_vm_holds(busy: tuple[object, list[Placement]]) -> None:
    host, vms = busy
    doc = valid_svg(host_svg(host, vms, {"tenant-a": Isolation.CORE}))
    ids = _by_id(doc)
    colours = palette.vm_colours((p.vm, p.tenant) for p in vms)
    held_anywhere: set[int] = set()
    for p in vms:
        if p.cpu_policy is CpuPolicy.SHARED:
            for cpu in p.shared_pcpus:
                assert ids[f"pu-{cpu}"].get("fill") == palette.SHARED_POOL
            continue
        held = held_by(p, host)  # the tests' own account of what a VM keeps, not the ledger's
        held_anywhere |= held
        for cpu in held:
            el = ids[f"pu-{cpu}"]
            assert _legend_vm(ids, el.get("class")) == p.vm
            pinned = cpu in p.dedicated_pcpus
            assert el.get("fill" if pinned else "stroke") == colours[p.vm], (p.vm, cpu)
        for d in p.devices:
            el = ids["dev-" + d.address.replace(":", "-")]
            assert el.get("fill") == colours[p.vm] and _legend_vm(ids, el.get("class")) == p.vm
    for cpu in host.reserved_cpus:
        assert ids[f"pu-{cpu}"].get("fill") == palette.RESERVED
    floating = {c for p in vms for c in p.shared_pcpus}
    for cpu in host.cpu_ids - host.reserved_cpus - held_anywhere - floating:
        assert ids[f"pu-{cpu}"].get("fill") == palette.FREE, cpu
    for cell in host.cells:
        assert f"cell-{cell.id}" in ids
    assert {f"socket-{s}" for s in (0, 1)} <= ids.keys()


def test_host_picture_page_bars_split_each_pool_by_what_each_vm_claims(busy: tuple[object, list[Placement]]) -> None:
    host, vms = busy
    ids = _by_id(valid_svg(host_svg(host, vms, {})))
    for cell in host.cells:
        total = cell.pages_of(PAGE_1G)
        claims = {p.vm: sum(ca.memory_kib // PAGE_1G for ca in p.cells if ca.host_cell == cell.id
                            and ca.page_size_kib == PAGE_1G) for p in vms}
        base = f"pages-{cell.id}-{PAGE_1G}"
        bar = ids[base]
        width = sum(float(r.get("width")) for r in bar.iter("{*}rect") if r.get("id", "").startswith(base + "-"))
        for vm, n in claims.items():
            segs = [r for r in bar.iter("{*}rect") if r.get("id", "").startswith(base + "-vm")
                    and _legend_vm(ids, r.get("class")) == vm]
            assert len(segs) == (1 if n else 0), (cell.id, vm)
            if n:
                assert float(segs[0].get("width")) == pytest.approx(width * n / total)
        free = total - sum(claims.values())
        assert (base + "-free" in ids) == (free > 0)


def test_host_picture_png_shows_one_region_per_thing_each_vm_holds(busy: tuple[object, list[Placement]]) -> None:
    host, vms = busy
    svg = host_svg(host, vms, {})
    png = svg_to_png(svg)
    colours = palette.vm_colours((p.vm, p.tenant) for p in vms)
    for p in vms:
        pages = {(ca.host_cell, ca.page_size_kib) for ca in p.cells}
        pinned = len(p.dedicated_pcpus)
        kept_empty = len(held_by(p, host)) - pinned if p.cpu_policy is CpuPolicy.DEDICATED else 0
        # filled PUs, page-bar segments, devices, the legend swatch; a kept-empty PU is an outline (a ring)
        expected = pinned + len(pages) + len(p.devices) + 1 + kept_empty
        assert regions(png, colours[p.vm], MIN_REGION if not kept_empty else 40) == expected, p.vm
    assert regions(png, palette.RESERVED) == len(host.reserved_cpus) + 1  # + its legend swatch


def test_names_are_text_never_markup() -> None:
    host = replace(make_host("h<1>&\"x\"", cells=1, cores_per_cell=2), name="h<1>&\"x\"")
    vm = _placed(Fleet([host]), request("v<script>", "t&amp;"))
    doc = valid_svg(host_svg(host, vm, {}))
    assert "h<1>&\"x\"" in "".join(doc.itertext())
    assert not doc.findall(".//s:script", NS) and "v<script>" in "".join(doc.itertext())


def test_fleet_picture_marks_stranded_gpus_and_fills_by_use() -> None:
    full = make_host("full", cells=2, cores_per_cell=2, smt=1, gpus_per_cell=2)
    empty = make_host("empty", cells=2, cores_per_cell=2, smt=1, gpus_per_cell=2)
    fleet = Fleet([full, empty])
    vms = _placed(fleet, request("cpu-hog", vcpus=2, memory_gib=1, numa_nodes=1, gpus=1, host="full"))
    (cell,) = vms[0].host_cells
    svg = fleet_svg([full, empty], vms, {})
    ids = _by_id(valid_svg(svg))
    rows = {r.hosts: r for r in fleet_rows([full, empty], vms, {})}
    hog = rows[("full",)].cells[cell]
    assert (hog.claimed, hog.gpus_claimed, hog.gpus_stranded) == (2, 1, 1)
    # rows are in name order: empty (row 0), full (row 1)
    stranded = [el for el in ids.values() if el.get("class") == "stranded"]
    assert [el.get("id") for el in stranded] == [f"row-1-cell-{cell}-gpu-1"]
    png = svg_to_png(svg)
    assert regions(png, palette.STRANDED, 20) == 1 + 1  # the square and the legend swatch
    assert regions(png, palette.FREE_GPU, 20) == 2 + 4 + 1  # full's other cell, empty's four, legend


def test_fleet_picture_groups_hosts_of_one_shape_and_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleetpicture, "GROUP_AT", 5)
    hosts = [make_host(f"h{i:02d}", cells=2, cores_per_cell=2, smt=1) for i in range(12)]
    vms = _placed(Fleet(hosts), *(request(f"v{i}", vcpus=2, memory_gib=1, host=f"h{i:02d}") for i in range(4)))
    rows = fleet_rows(hosts, vms, {})
    assert sorted(len(r.hosts) for r in rows) == [4, 8]  # 8 empty hosts, 4 with one cell full
    assert sum(len(r.hosts) for r in rows) == 12 and rows[0].hosts[0] == "h04"
    doc = valid_svg(fleet_svg(hosts, vms, {}))
    row_ids = [el.get("id") for el in doc.iter() if re.fullmatch(r"row-\d+", el.get("id") or "")]
    assert row_ids == ["row-0", "row-1"]


def test_gpus_and_nics_are_drawn_inside_their_root_complex() -> None:
    from vnuma.sources.capabilities import parse_capabilities
    from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges

    data = Path(__file__).resolve().parent.parent / "data"
    host = parse_capabilities((data / "capabilities" / "x86-2socket-cdp.xml").read_bytes(), name="dgx")
    devices = with_parent_bridges(parse_nodedev_file_content((data / "nodedev" / "dgx-like.xml").read_bytes(), "d"))
    host = replace(host, devices=devices)
    ids = _by_id(valid_svg(host_svg(host, [], {})))

    def box(el: etree._Element) -> tuple[float, float, float, float]:
        x, y = float(el.get("x")), float(el.get("y"))
        return x, y, x + float(el.get("width")), y + float(el.get("height"))

    drawn = {k for k in ids if k.startswith("dev-")}
    expected = {d for d in devices if d.kind.value in ("gpu", "nic") and d.pf is None}
    assert drawn == {"dev-" + d.address.replace(":", "-") for d in expected}  # no VF, bridge or audio function
    for dev in expected:
        cell = "none" if dev.numa_node is None else str(dev.numa_node)
        frame = box(ids[f"rc-{cell}-{dev.root_complex.replace(':', '-')}"])
        x0, y0, x1, y1 = box(ids["dev-" + dev.address.replace(":", "-")])
        assert frame[0] <= x0 and frame[1] <= y0 and x1 <= frame[2] and y1 <= frame[3], dev.address


def test_a_partitioned_gpu_is_drawn_used_by_the_rule_host_show_counts_with() -> None:
    """A GPU holding MIG instances is drawn used, with one segment per instance in its VM's colour, as
    ``host show`` (:func:`host_gpu_use`) counts it; an unclaimed GPU free; a whole one in its VM's colour."""
    from vnuma.placement.partitionchoice import host_gpu_use
    from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
    from vnuma.sources.capabilities import parse_capabilities
    from vnuma.sources.demo import demo_capabilities_path, demo_node_path
    from vnuma.sources.migprofiles import parse_profile
    from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
    from vnuma.topology.partitions import with_gpu_profiles

    data = Path(__file__).resolve().parent.parent / "data"
    geometry = parse_profile((data / "gpu-profiles" / "demo-h100-pcie.json").read_text(), "json")
    host = parse_capabilities(demo_capabilities_path().read_bytes(), name="m")
    devices = with_parent_bridges(parse_nodedev_file_content(demo_node_path().read_bytes(), "demo"))
    host = with_gpu_profiles(replace(host, devices=devices), [geometry])
    fleet = Fleet([host])
    mig = PartitionKind.MIG
    vms = _placed(
        fleet,
        request("a", "t", page_size_kib=PAGE_4K, partition=PartitionAsk(mig, "3g.40gb", 1)),
        request("b", "t", page_size_kib=PAGE_4K, partition=PartitionAsk(mig, "1g.10gb", 1)),
        request("w", "u", page_size_kib=PAGE_4K, gpus=1),
    )
    ids = _by_id(valid_svg(host_svg(host, vms, {})))
    colours = palette.vm_colours((p.vm, p.tenant) for p in vms)
    use = host_gpu_use(host, vms, [])
    assert {u.mode for u in use.values()} == {None, "mig", "whole"}
    for gpu, u in use.items():
        el = ids["dev-" + gpu.replace(":", "-")]
        title = el.find("s:title", NS).text
        if u.mode is None:
            assert el.get("fill") == palette.FREE and title.endswith(": free"), gpu
        elif u.mode == "whole":
            assert el.get("fill") == colours["w"], gpu
        else:
            assert el.get("fill") == palette.USED and "free" not in title.split(":")[-1], (gpu, title)
            for k, held in enumerate(u.layout):
                assert held.label() in title and held.vm in title
                part = ids["dev-" + gpu.replace(":", "-") + f"-part-{k}"]
                assert part.get("fill") == colours[held.vm] and _legend_vm(ids, part.get("class")) == held.vm
            assert ("dev-" + gpu.replace(":", "-") + "-free" in ids) == any(u.free.values())


def test_fleet_picture_memory_tooltips_read_as_every_table_prints_sizes(busy: tuple[object, list[Placement]]) -> None:
    host, vms = busy
    ids = _by_id(valid_svg(fleet_svg([host], vms, {"tenant-a": Isolation.CORE})))
    titles = [el.find("s:title", NS).text for k, el in ids.items() if k.endswith("-memory")]
    assert titles and all(" MiB claimed" not in t and t.endswith(" GiB claimed") for t in titles), titles
