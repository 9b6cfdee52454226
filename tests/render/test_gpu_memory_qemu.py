"""A GH200-like VM's GPU memory nodes as this machine's QEMU driver (libvirt 9.0.0) turns them into a command line.

libvirt's embedded QEMU driver (``qemu:///embed?root=DIR``: no daemon) converts the rendered domain with
``domainXMLToNative`` (``<numatune>`` and ``<memoryBacking>`` are checked in the XML by the other tests and left
out, as for the cold tier). What 9.0.0 can show: each GPU node becomes a QEMU NUMA node without CPUs and without
memory, with the host's distances. What it cannot: the ``acpi-generic-initiator`` object tying the nodes to the
GPU, which libvirt makes from ``<acpi nodeset>`` only since 11.8.0 — 9.0.0 leaves it out without a word, which is
why apply refuses such a domain on it (docs/render.md records what could not be checked here).

The domain is the host's aarch64 guest rendered for TCG (domain type qemu): qemu-system-aarch64 and its UEFI
build (installed by ``scripts/test``) convert it on this x86 machine.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.render.conftest import qemu_argv
from tests.render.scenarios import BY_NAME
from vnuma.render import render_domain
from vnuma.render.view import RenderOptions

pytestmark = pytest.mark.libvirt


def test_the_gpu_nodes_become_numa_nodes_without_cpus_or_memory_at_the_hosts_distances(embedded: Any) -> None:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    options = RenderOptions(domain_type="qemu")
    xml = render_domain(scenario.host, scenario.placement, options=options)
    argv = qemu_argv(embedded, xml)
    nodes = dict(re.findall(r"-numa node,nodeid=(\d+),(\S+)", argv))
    assert sorted(map(int, nodes)) == list(range(9))
    assert nodes["0"].startswith("cpus=0-7,")
    for n in range(1, 9):
        assert "cpus=" not in nodes[str(n)]
        backend = re.search(r"memdev=(\S+?)(?:,|$)", nodes[str(n)])
        assert backend is not None and f'"id":"{backend.group(1)}","size":0}}' in argv
    for a in range(9):
        for b in range(9):
            value = scenario.host.cell(a).distance_to(b)  # guest node n stands for host node n here
            assert f"-numa dist,src={a},dst={b},val={value}" in argv
    assert '"driver":"vfio-pci","host":"0009:01:00.0"' in argv
    # libvirt 9.0.0 drops the tie it does not know: no acpi-generic-initiator (apply refuses for that reason).
    assert "acpi-generic-initiator" not in argv
