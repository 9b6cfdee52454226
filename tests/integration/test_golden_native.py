"""Every golden domain, turned into a QEMU command line by the real QEMU driver.

`virsh domxml-to-native qemu-argv` needs the daemon but starts nothing. Its
`-numa node` and memory-backend arguments must match the placement: the
guest cells' vCPUs and sizes, hugepage backing of the placed size, binding.

This machine has one host NUMA node and libvirt refuses a nodeset naming a
node it does not have, so the numatune nodesets (and only those) are
rewritten to this machine's node before conversion; the placement's host
cells are checked against the un-rewritten XML instead. A placement for
another architecture (the GH200-like aarch64 guest) is rendered as vnuma
renders it for a TCG host (domain type qemu, CPU mode maximum) and converted
by qemu-system-aarch64: KVM cannot run a foreign guest, and the NUMA layout
QEMU is given does not depend on the accelerator.
"""

from __future__ import annotations

import itertools
import json
import platform
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree

from tests.integration.conftest import SYSTEM_URI
from tests.render.conftest import vf_interfaces_as_hostdevs
from tests.render.scenarios import SCENARIOS, Scenario
from vnuma.render.gpumemory import gpu_nodes
from vnuma.render.view import effective_memory_modes
from vnuma.topology import PAGE_1G, PAGE_2M, PAGE_4K, format_cpuset

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]

HUGEPAGE_MOUNTS = {PAGE_2M: "/dev/hugepages/", PAGE_1G: "/dev/hugepages1G/"}


def _local_node() -> int:
    nodes = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    return nodes[0]


def _rewrite_nodesets(xml: str, node: int) -> tuple[str, dict[int, str]]:
    """Point numatune at ``node``; return the new XML and the original memnode nodesets.

    An SR-IOV VF's ``<interface type='hostdev'>`` becomes the plain ``<hostdev>`` it is underneath
    (:func:`tests.render.conftest.vf_interfaces_as_hostdevs`).
    """
    root = etree.fromstring(xml.encode())
    original = {int(m.get("cellid")): m.get("nodeset") for m in root.iterfind("numatune/memnode")}
    for el in root.iterfind("numatune/memory"):
        el.set("nodeset", str(node))
    for el in root.iterfind("numatune/memnode"):
        el.set("nodeset", str(node))
    vf_interfaces_as_hostdevs(root)
    return etree.tostring(root, encoding="unicode"), original


def _argv(xml_path: Path) -> list[str]:
    out = subprocess.run(
        ["virsh", "-c", SYSTEM_URI, "domxml-to-native", "qemu-argv", str(xml_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return shlex.split(out.stdout)


def _numa_nodes(argv: list[str]) -> dict[int, tuple[str, str]]:
    """guest node id -> (cpus as a cpuset string, memdev id)."""
    nodes = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-numa" and value.startswith("node,"):
            fields = [kv.split("=", 1) for kv in value.split(",")[1:]]
            cpus = ",".join(v for k, v in fields if k == "cpus")
            info = dict(fields)
            nodes[int(info["nodeid"])] = (cpus, info["memdev"])
    return nodes


def _backends(argv: list[str]) -> dict[str, dict[str, object]]:
    out = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-object" and value.startswith("{"):
            obj = json.loads(value)
            if str(obj.get("qom-type", "")).startswith("memory-backend"):
                out[str(obj["id"])] = obj
    return out


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_golden_domain_becomes_the_placed_qemu_numa_layout(
    libvirtd: str, scenario: Scenario, tmp_path: Path
) -> None:
    node = _local_node()
    golden = scenario.golden.read_text()
    if scenario.host.arch != platform.machine():
        golden = replace(scenario, options=replace(scenario.options, domain_type="qemu")).render()
    xml, original = _rewrite_nodesets(golden, node)
    placement = scenario.placement
    modes = dict(zip((c.guest_cell for c in sorted(placement.cells, key=lambda c: c.guest_cell)),
                     effective_memory_modes(placement, scenario.options.memnode_mode), strict=True))
    modes.update({c.guest_cell: "strict" for c in placement.cold})  # a cold tier binds strictly to its node
    every = (*placement.cells, *placement.cold)
    everywhere = format_cpuset(placement.host_cells)
    assert original == {
        c.guest_cell: everywhere if modes[c.guest_cell] == "interleave" else str(c.host_cell) for c in every
    }
    path = tmp_path / f"{scenario.name}.xml"
    path.write_text(xml)
    argv = _argv(path)
    nodes, backends = _numa_nodes(argv), _backends(argv)
    gpu_cells = gpu_nodes(scenario.host, placement)  # a Grace GPU's memory nodes: no CPUs, no memory
    assert sorted(nodes) == [c.guest_cell for c in every] + [g.guest_cell for g in gpu_cells]
    assert all(nodes[g.guest_cell][0] == "" and backends[nodes[g.guest_cell][1]]["size"] == 0 for g in gpu_cells)
    for cell in every:
        cpus, memdev = nodes[cell.guest_cell]
        assert re.sub(r"\s", "", cpus) == format_cpuset(cell.vcpus)
        backend = backends[memdev]
        assert backend["size"] == cell.memory_kib * 1024
        mode = modes[cell.guest_cell]
        if mode != "restrictive":
            policy = {"strict": "bind", "preferred": "preferred", "interleave": "interleave"}[mode]
            assert (backend["host-nodes"], backend["policy"]) == ([node], policy)
        else:
            # restrictive: libvirt binds through the cgroup's cpuset.mems, not QEMU's
            # memory policy, which is what lets the nodeset change while it runs.
            assert "host-nodes" not in backend and "policy" not in backend
        mem_path = str(backend.get("mem-path", ""))
        if cell.page_size_kib == PAGE_4K:
            assert not any(mem_path.startswith(m) for m in HUGEPAGE_MOUNTS.values())
        else:
            assert mem_path.startswith(HUGEPAGE_MOUNTS[cell.page_size_kib]), mem_path
    smp = argv[argv.index("-smp") + 1]
    assert smp.startswith(f"{placement.vcpus},")
