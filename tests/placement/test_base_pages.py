"""A host's base page is its kernel's page size: 64 KiB on a 64K-page arm64 kernel (Grace), 4 KiB elsewhere.

``--page-size 4K`` (or ``base``) means "no hugepages": the host's base page, on every host of a fleet; ``large``
takes only sizes above it. The GH200 fixture as a 64K-page kernel would report it: ``<pages size='64'>``,
``'524288'`` (512 MiB) and ``'16777216'`` (16 GiB) instead of 4 KiB, 2 MiB and 1 GiB, the same memory.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree

from tests.builders import make_host
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.placement.pagefilters import NO_HUGEPAGES
from vnuma.render import render_domain
from vnuma.sources.capabilities import parse_capabilities
from vnuma.topology import KIB_PER_GIB, PAGE_4K, Host, parse_page_size

GH200 = Path(__file__).parents[1] / "data" / "grace" / "gh200-numa-capabilities.xml"
_AS_64K = {"4": "64", "2048": "524288", "1048576": "16777216"}


def _gh200_64k(hugepages: bool = True) -> Host:
    """The GH200 fixture as a 64K-page kernel reports it (16 GiB pages for its 1 GiB ones, or none)."""

    def pool(m: re.Match[str]) -> str:
        size, count = m.group(1), int(m.group(2))
        new = _AS_64K[size]
        count = count * int(size) // int(new) if hugepages or size == "4" else 0
        return f"<pages unit='KiB' size='{new}'>{count}</pages>"

    text = re.sub(r"<pages unit='KiB' size='(\d+)'>(\d+)</pages>", pool, GH200.read_text())
    return parse_capabilities(text, name="gh64k")


def _ask(page: str, gib: int = 16) -> VmRequest:
    return VmRequest("vm1", "acme", 8, gib * KIB_PER_GIB, page_size_kib=parse_page_size(page))


def test_the_base_page_is_the_smallest_size_the_host_lists() -> None:
    assert _gh200_64k().base_page_kib == 64
    assert make_host().base_page_kib == PAGE_4K
    assert replace(make_host(), cells=tuple(replace(c, pages=()) for c in make_host().cells)).base_page_kib == 4


@pytest.mark.parametrize("page", ["4K", "base"])
def test_4k_and_base_take_the_64k_base_page_of_a_64k_host(page: str) -> None:
    chosen = place(_ask(page), Fleet([_gh200_64k()])).chosen
    assert chosen is not None and {c.page_size_kib for c in chosen.cells} == {64}


def test_4k_and_base_are_the_same_request_and_take_4k_pages_on_an_x86_host() -> None:
    assert _ask("4K") == _ask("base")
    chosen = place(_ask("base", 2), Fleet([make_host()])).chosen
    assert chosen is not None and {c.page_size_kib for c in chosen.cells} == {PAGE_4K}


def test_large_takes_hugepages_above_the_base_page_only() -> None:
    chosen = place(_ask("large"), Fleet([_gh200_64k()])).chosen
    assert chosen is not None and {c.page_size_kib for c in chosen.cells} == {16 * KIB_PER_GIB}
    refused = place(_ask("large"), Fleet([_gh200_64k(hugepages=False)]))
    assert refused.chosen is None and [r.reason for r in refused.rejections] == [NO_HUGEPAGES]


def test_a_grace_size_is_asked_by_name_and_refused_where_no_pool_has_it() -> None:
    chosen = place(_ask("16G"), Fleet([_gh200_64k()])).chosen
    assert chosen is not None and {c.page_size_kib for c in chosen.cells} == {16 * KIB_PER_GIB}
    refused = place(_ask("64K", 2), Fleet([make_host()]))
    assert refused.chosen is None and "64 KiB pages" in refused.rejections[0].reason


def test_a_vm_on_64k_base_pages_renders_without_hugepage_backing_and_passes_the_checks() -> None:
    host = _gh200_64k()
    chosen = place(_ask("base"), Fleet([host])).chosen
    assert chosen is not None
    root = etree.fromstring(render_domain(host, chosen).encode())
    assert root.find("memoryBacking/hugepages") is None
    assert {c.get("memAccess") for c in root.iterfind("cpu/numa/cell")} == {None}
    hugepage_vm = place(_ask("large"), Fleet([host])).chosen
    assert hugepage_vm is not None
    pages = etree.fromstring(render_domain(host, hugepage_vm).encode()).find("memoryBacking/hugepages/page")
    assert pages is not None and pages.get("size") == str(16 * KIB_PER_GIB)


@pytest.mark.parametrize(
    ("text", "kib"),
    [("4K", 4), ("base", 4), ("BASE", 4), ("64K", 64), ("64KiB", 64), ("512M", 524288), ("16G", 16777216),
     ("16GiB", 16777216), ("2M", 2048), ("1G", 1048576), ("524288", 524288), ("large", None)],
)
def test_page_size_words(text: str, kib: int | None) -> None:
    assert parse_page_size(text) == kib


@pytest.mark.parametrize("text", ["8K", "3M", "basic", "65", "32G", ""])
def test_other_page_sizes_are_refused_naming_the_choices(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"use 4K \(or base: no hugepages\), 2M, 1G, 64K, 512M, 16G or large"):
        parse_page_size(text)


def test_a_running_vm_on_base_pages_moves_between_cells_live_whatever_the_base_page() -> None:
    from tests.render.placements import CellSpec, make_placement
    from vnuma.placement.model import MemoryMode, Placement
    from vnuma.services.movekinds import live_capable

    host = make_host()

    def on(cell: int, page: int) -> Placement:
        return make_placement(host, [CellSpec(cell, 2, 4 * KIB_PER_GIB, page, memory_mode=MemoryMode.RESTRICTIVE)])

    assert live_capable(on(0, PAGE_4K), on(1, PAGE_4K), None)
    assert live_capable(on(0, 64), on(1, 64), None, base_kib=64)  # a 64K host's base pages re-pin live
    assert not live_capable(on(0, 64), on(1, 64), None)  # 64 KiB hugepages on a 4K host do not
