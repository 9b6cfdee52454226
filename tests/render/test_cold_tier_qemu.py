"""The cold tier and guest HMAT as the real QEMU driver turns them into a command line.

libvirt's embedded QEMU driver (``qemu:///embed?root=DIR``: no daemon) converts the golden domain with
``domainXMLToNative``. It refuses bindings to host nodes the converting machine lacks, so the
``<numatune>`` and ``<memoryBacking>`` are checked in the XML first and left out of the converted copy.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from lxml import etree

from tests.render.conftest import qemu_argv as _argv
from tests.render.scenarios import BY_NAME
from vnuma.render import render_domain
from vnuma.render.view import RenderOptions

pytestmark = pytest.mark.libvirt


def test_the_cold_cell_becomes_a_numa_node_without_cpus_and_the_guest_hmat_hmat_lb_entries(embedded: Any) -> None:
    scenario = BY_NAME["cold-tier-hmat"]
    p = scenario.placement
    (cold,) = p.cold
    (hot,) = p.cells
    xml = render_domain(scenario.host, p, options=replace(RenderOptions(), domain_type="qemu"))
    root = etree.fromstring(xml.encode())
    binds = {m.get("cellid"): m.get("nodeset") for m in root.iterfind("numatune/memnode")}
    assert binds == {"0": str(hot.host_cell), "1": str(cold.host_cell)}  # the cold cell on the memory-only cell
    argv = _argv(embedded, xml)
    assert "hmat=on" in argv
    nodes = re.findall(r"-numa node,(\S+)", argv)
    assert nodes[0].startswith("nodeid=0,cpus=0-3,")
    assert nodes[1].startswith("nodeid=1,initiator=0,memdev=") and "cpus=" not in nodes[1]
    assert f'"size":{cold.memory_kib * 1024}' in argv
    hmat = set(re.findall(r"-numa hmat-lb,(\S+)", argv))
    rated = {(i, t): v for i, t, v in scenario.host.hmat.latency_ns}
    bandwidth = {(i, t): v for i, t, v in scenario.host.hmat.bandwidth_kib_s}
    assert hmat == {
        f"initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency={rated[(hot.host_cell,) * 2]}",
        f"initiator=0,target=1,hierarchy=memory,data-type=access-latency,"
        f"latency={rated[(hot.host_cell, cold.host_cell)]}",
        f"initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,"
        f"bandwidth={bandwidth[(hot.host_cell,) * 2]}K",
        f"initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,"
        f"bandwidth={bandwidth[(hot.host_cell, cold.host_cell)]}K",
    }


def test_without_host_hmat_the_cold_cell_is_a_plain_memory_node_with_slit_distances(embedded: Any) -> None:
    scenario = BY_NAME["cold-tier-cxl-hwloc"]
    xml = render_domain(scenario.host, scenario.placement, options=replace(RenderOptions(), domain_type="qemu"))
    argv = _argv(embedded, xml)
    assert "hmat" not in argv
    assert re.search(r"-numa node,nodeid=1,memdev=\S+", argv)
    (hot,), (cold,) = scenario.placement.cells, scenario.placement.cold
    slit = scenario.host.cell(hot.host_cell).distance_to(cold.host_cell)
    assert f"-numa dist,src=0,dst=1,val={slit}" in argv
