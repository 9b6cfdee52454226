"""Placements read back from domains: what vnuma renders adopts to the same placement, and differs in nothing."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tests.builders import make_host
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CpuPolicy, EmulatorThreads, Placement, ThreadPolicy, VmRequest
from vnuma.render.domain import render_domain
from vnuma.services.adoption import differences, placement_from_domain
from vnuma.sources.domainxml import parse_domain
from vnuma.topology import KIB_PER_GIB, PAGE_4K, Host, format_cpuset

HOST = make_host("h1", gpus_per_cell=2)
REQUESTS = {
    "one-cell-1g-pages": VmRequest("a", "t", 4, 8 * KIB_PER_GIB, numa_nodes=1),
    "two-cells": VmRequest("b", "t", 8, 16 * KIB_PER_GIB, numa_nodes=2, page_size_kib=2048),
    "shared-4k": VmRequest("c", "t", 4, 4 * KIB_PER_GIB, cpu_policy=CpuPolicy.SHARED, page_size_kib=PAGE_4K),
    "isolated-emulator": VmRequest(
        "d", "t", 4, 4 * KIB_PER_GIB, emulator_threads=EmulatorThreads.ISOLATE, thread_policy=ThreadPolicy.ISOLATE
    ),
    "gpu": VmRequest("e", "t", None, None, gpus=1),
    "two-gpus-two-cells": VmRequest("f", "t", 8, 16 * KIB_PER_GIB, gpus=2, numa_nodes=2),
    "mixed-two-cells": VmRequest(
        "g", "t", 8, 16 * KIB_PER_GIB, numa_nodes=2, cpu_policy=CpuPolicy.MIXED, dedicated_vcpus=frozenset({0, 1, 4})
    ),
    "mixed-isolate-one-cell-all-but-one": VmRequest(
        "h", "t", 4, 4 * KIB_PER_GIB, cpu_policy=CpuPolicy.MIXED, thread_policy=ThreadPolicy.ISOLATE,
        dedicated_vcpus=frozenset({0, 1, 3}),
    ),
}


def _placed(request: VmRequest, host: Host = HOST) -> Placement:
    chosen = place(request, Fleet([host])).chosen
    assert chosen is not None
    return chosen


@pytest.mark.parametrize("request_", REQUESTS.values(), ids=list(REQUESTS))
def test_a_rendered_placement_adopts_back_to_itself(request_: VmRequest) -> None:
    p = _placed(request_)
    d = parse_domain(render_domain(HOST, p))
    assert differences(p, d, d, HOST) == []
    adopted = placement_from_domain(d, d, HOST, p.tenant)
    assert adopted == dataclasses.replace(p, emulator_pcpus=adopted.emulator_pcpus)
    assert set(adopted.emulator_pcpus) == set(p.emulator_pcpus or (x for c in p.cells for x in c.pcpus))


def test_a_domain_without_a_recorded_shape_keeps_its_cell_count() -> None:
    p = _placed(REQUESTS["gpu"])
    assert p.numa_nodes is None
    xml = render_domain(HOST, p)
    bare = xml.replace("<vnuma:numa-nodes>auto</vnuma:numa-nodes>", "")
    assert bare != xml
    foreign = xml.split("<metadata>")[0] + xml.split("</metadata>")[1]  # no vnuma metadata at all
    for text in (bare, foreign):
        d = parse_domain(text)
        assert placement_from_domain(d, d, HOST, p.tenant).numa_nodes == len(p.cells)


def test_differences_name_each_changed_pin_and_shape() -> None:
    p = _placed(REQUESTS["two-cells"])
    xml = render_domain(HOST, p)
    first = p.cells[0].pcpus[0]
    other = p.cells[1].pcpus[0]
    edited = xml.replace(f"<vcpupin vcpu='0' cpuset='{first}'/>", f"<vcpupin vcpu='0' cpuset='{other}'/>", 1)
    edited = edited.replace(
        "<memnode cellid='1' mode='strict' nodeset='1'/>", "<memnode cellid='1' mode='strict' nodeset='0'/>"
    )
    found = differences(p, parse_domain(edited), None, HOST)
    assert [(d.kind, d.what, d.expected, d.actual) for d in found] == [
        ("pins", "memnode 1", "1", "0"),
        ("pins", "vcpupin 0", str(first), str(other)),
    ]


def test_a_cache_slice_and_cap_adopt_back_and_their_changes_are_differences() -> None:
    from tests.placement.test_resctrl import rdt_host

    host = rdt_host("h1", snc=False, default_ways=2, limit=100)
    for cdp in (False, True):
        if cdp:  # code and data controls apart: the domain holds a code and a data entry per cache
            from vnuma.topology.resctrl import CacheControl, CacheType

            controls = (CacheControl(2048, 4096, CacheType.CODE, 4), CacheControl(2048, 4096, CacheType.DATA, 4))
            banks = tuple(dataclasses.replace(b, controls=controls) for b in host.resctrl.caches)
            host = dataclasses.replace(host, resctrl=dataclasses.replace(host.resctrl, caches=banks))
        p = _placed(VmRequest("s", "t", 4, 2 * KIB_PER_GIB, numa_nodes=2, page_size_kib=2048, llc_ways=3, mem_bw=30),
                    host)
        assert len(p.llc) == 2 and len(p.mem_bw) == 2
        xml = render_domain(host, p)
        d = parse_domain(xml)
        assert differences(p, d, d, host) == []
        assert placement_from_domain(d, d, host, "t").llc == p.llc
        assert placement_from_domain(d, d, host, "t").mem_bw == p.mem_bw
    cache = p.llc[0][0]
    smaller = xml.replace(f"<cache id='{cache}' level='3' type='code' size='6144'",
                          f"<cache id='{cache}' level='3' type='code' size='4096'")
    assert smaller != xml
    smaller = smaller.replace(f"<cache id='{cache}' level='3' type='data' size='6144'",
                              f"<cache id='{cache}' level='3' type='data' size='4096'")
    found = differences(p, parse_domain(smaller), None, host)
    assert [(d.what, d.expected, d.actual) for d in found] == [(f"L3 cache {cache}", "6144 KiB", "4096 KiB")]
    uncapped = xml.replace("<memorytune", "<!--").replace("</memorytune>", "-->")
    assert {d.what for d in differences(p, parse_domain(uncapped), None, host)} == {
        f"bandwidth domain {i}" for i, _c in p.mem_bw
    }
    odd = xml.replace("size='6144' unit='KiB'", "size='5000' unit='KiB'")
    with pytest.raises(InvalidInputError, match="not a whole number of 2048 KiB ways"):
        placement_from_domain(parse_domain(odd), None, host, "t")


def _without_pins(xml: str) -> str:
    start, end = xml.index("<cputune>"), xml.index("</cputune>") + len("</cputune>")
    return xml[:start] + xml[end:]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (_without_pins, "vCPU 0 is not pinned"),
        (lambda x: x.replace("<name>a</name>", "<name>bad name</name>"), "bad VM name"),
        (lambda x: x.replace("cpuset='1'/>", "cpuset='0'/>", 1).replace("cpuset='0'/>", "cpuset='0-1'/>"),
         "neither one pCPU per vCPU nor one set per guest cell"),
        (lambda x: x.replace("<memnode cellid='0' mode='strict' nodeset='0'/>", ""), None),
    ],
    ids=["unpinned", "bad-name", "mixed-pins", "no-memnode-uses-pinned-cell"],
)
def test_refusals_name_the_reason(edit: object, reason: str | None) -> None:
    p = _placed(REQUESTS["one-cell-1g-pages"])
    assert callable(edit)
    d = parse_domain(edit(render_domain(HOST, p)))
    if reason is None:
        assert placement_from_domain(d, None, HOST, "t").cells == p.cells
        return
    with pytest.raises(InvalidInputError, match=reason):
        placement_from_domain(d, None, HOST, "t")


def test_live_pins_that_differ_from_the_definition_are_refused() -> None:
    p = _placed(REQUESTS["one-cell-1g-pages"])
    xml = render_domain(HOST, p)
    live = parse_domain(xml.replace(f"cpuset='{p.cells[0].pcpus[0]}'/>", "cpuset='15'/>", 1))
    with pytest.raises(InvalidInputError, match="live pinning differs"):
        placement_from_domain(parse_domain(xml), live, HOST, "t")


def test_a_cold_tier_renders_without_differences_and_adopts_back() -> None:
    host = make_host("h1", cells=2, memory_only_cells=1, hugepages_1g_gib=0)
    p = _placed(VmRequest("vm1", "acme", 4, 4 * 1024 * 1024, cold_memory_kib=8 * 1024 * 1024), host)
    assert p.cold and p.cold[0].host_cell == 2
    d = parse_domain(render_domain(host, p))
    assert differences(p, d, d, host) == []
    adopted = placement_from_domain(d, d, host, "acme")
    assert adopted.cold == p.cold and adopted.cells == p.cells
    without = dataclasses.replace(p, cold=())
    found = differences(without, d, None, host)  # a cold cell the inventory does not hold is a difference
    assert {x.what for x in found} >= {"guest cell 1", "memory KiB"}


def test_a_gpus_iommu_companion_adopts_back_as_following_it() -> None:
    from tests.placement.test_nics import DGX

    fleet = Fleet([DGX])
    p = None
    for i in range(8):  # GPUs in address order until the one with an audio function in its group
        p = place(VmRequest(f"v{i}", "acme", 2, 1024 * 1024, gpus=1, page_size_kib=PAGE_4K), fleet).chosen
        assert p is not None
        if any(d.peer_of for d in p.devices):
            break
        fleet.add(p)
    assert p is not None and [d.peer_of for d in p.devices] == [None, "0000:13:00.0"]
    d = parse_domain(render_domain(DGX, p))
    assert differences(p, d, d, DGX) == []
    adopted = placement_from_domain(d, d, DGX, "acme")
    assert adopted.devices == p.devices


def test_a_mixed_domain_whose_pins_lost_their_shape_is_refused() -> None:
    p = _placed(REQUESTS["mixed-two-cells"])
    xml = render_domain(HOST, p)
    pin = p.cells[0].pcpus[0]  # vCPU 0's own pCPU
    floated = re.sub(r"<vcpupin vcpu='0' cpuset='[^']+'/>", f"<vcpupin vcpu='0' cpuset='{pin},{pin + 1}'/>", xml)
    assert floated != xml
    with pytest.raises(InvalidInputError, match="dedicated vCPUs are not pinned 1:1"):
        placement_from_domain(parse_domain(floated), None, HOST, "t")
    floats = format_cpuset(p.cells[0].pcpus[2:])
    onto_pin = xml.replace(f"<vcpupin vcpu='2' cpuset='{floats}'/>", f"<vcpupin vcpu='2' cpuset='{pin}'/>")
    assert onto_pin != xml
    with pytest.raises(InvalidInputError, match="floating vCPUs do not share one set"):
        placement_from_domain(parse_domain(onto_pin), None, HOST, "t")


def test_a_grace_vms_gpu_memory_nodes_are_no_difference_and_a_missing_one_is() -> None:
    # The GH200-like golden scenario: its GPU's eight guest nodes are what vnuma renders (reconcile finds a
    # domain libvirt 11.8.0 holds in agreement), and a domain without them differs in its shape.
    from tests.render.scenarios import BY_NAME

    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    xml = scenario.render()
    assert differences(scenario.placement, parse_domain(xml), None, scenario.host) == []
    # Adopted back, the nodes are not cells of the placement (the render derives them again from the host).
    adopted = placement_from_domain(parse_domain(xml), None, scenario.host, "acme")
    assert [c.guest_cell for c in adopted.cells] == [0] and adopted.cold == ()
    assert differences(adopted, parse_domain(xml), None, scenario.host) == []
    bare = re.sub(r"\s*<cell id='8' memory='0' unit='KiB'>.*?</cell>", "", xml, flags=re.S)
    found = differences(scenario.placement, parse_domain(bare), None, scenario.host)
    assert [(f.what, f.expected, f.actual) for f in found] == [
        ("guest cell 8", "vCPUs none, 0 KiB in 4 KiB pages", "none"), ("guest cells", "0-8", "0-7")]
