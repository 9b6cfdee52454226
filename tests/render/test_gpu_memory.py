"""A Grace-class GPU's memory nodes in the guest: CPU-less guest nodes, ``memory='0'``, tied to the GPU's hostdev.

Inputs (``tests/data/grace``, written by this project from NVIDIA's published topologies, see the README there):
the GH200-like host once with its GPU owning only its HBM3 node (``gh200-numa-capabilities.xml``: HMAT rates node 1
best from itself) and once owning the eight nodes NVIDIA keeps per GH200 GPU (``gh200-mig-capabilities.xml``:
nodes 1-8 rate node 1 alike); the GB200-like compute tray as hwloc XML (two Grace CPUs, nodes 0 and 1; four GPUs,
their HBM3e on nodes 2, 10, 18, 26; SLIT 40 between the CPUs, 80 within a Grace's half, 120 across).
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest
from lxml import etree

from tests.render.placements import CellSpec, make_placement
from tests.render.scenarios import BY_NAME, TESTS, grace_host
from vnuma.errors import RenderError
from vnuma.placement.model import Placement
from vnuma.render.domain import render_domain
from vnuma.render.validate import DOMAIN_RNG, check_schema, load_schema, validate_domain
from vnuma.sources.hwloc import parse_hwloc
from vnuma.topology import KIB_PER_GIB, PAGE_1G, Host

GB200 = parse_hwloc((TESTS / "data" / "grace" / "gb200-numa-hwloc.xml").read_bytes(), name="gb")
GB200_NODES = {"0008:01:00.0": 2, "0009:01:00.0": 10, "0018:01:00.0": 18, "0019:01:00.0": 26}


def _cells(root: etree._Element) -> dict[int, etree._Element]:
    return {int(c.get("id")): c for c in root.iterfind("cpu/numa/cell")}


def _distances(root: etree._Element) -> dict[tuple[int, int], int]:
    return {(int(c.get("id")), int(s.get("id"))): int(s.get("value"))
            for c in root.iterfind("cpu/numa/cell") for s in c.iterfind("distances/sibling")}


def _acpi(root: etree._Element) -> dict[str, str | None]:
    out = {}
    for h in root.iterfind("devices/hostdev[@type='pci']"):
        src = h.find("source/address")
        address = f"{int(src.get('domain'), 16):04x}:{int(src.get('bus'), 16):02x}:00.0"
        acpi = h.find("acpi")
        out[address] = None if acpi is None else acpi.get("nodeset")
    return out


def _host_cell_of(root: etree._Element, placement: Placement, host: Host) -> dict[int, int]:
    """Guest cell -> the host cell it stands for: the placement's cells, then each GPU's nodes by acpi nodeset."""
    from vnuma.topology import parse_cpuset

    mapping = {c.guest_cell: c.host_cell for c in placement.cells}
    for address, nodeset in _acpi(root).items():
        owned = [c.id for c in host.cells if c.gpu == address]
        mapping |= dict(zip(sorted(parse_cpuset(nodeset or "")), owned, strict=True))
    return mapping


def test_the_gh200s_eight_gpu_nodes_become_cpu_less_guest_nodes_tied_to_the_gpu() -> None:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    root = etree.fromstring(scenario.render().encode())
    cells = _cells(root)
    assert sorted(cells) == list(range(9))
    assert cells[0].get("cpus") == "0-7"
    assert all(cells[n].get("cpus") is None and cells[n].get("memory") == "0" for n in range(1, 9))
    assert _acpi(root) == {"0009:01:00.0": "1-8"}
    # Nothing binds the GPU's nodes: no memnode, not in the memory nodeset (the HBM is the GPU's own).
    assert {m.get("cellid"): m.get("nodeset") for m in root.iterfind("numatune/memnode")} == {"0": "0"}
    assert root.find("numatune/memory").get("nodeset") == "0"
    # Guest distances are the host's SLIT between the host nodes the guest nodes stand for.
    mapping = _host_cell_of(root, scenario.placement, scenario.host)
    assert mapping == {0: 0, **{n: n for n in range(1, 9)}}
    assert _distances(root) == {(a, b): scenario.host.cell(mapping[a]).distance_to(mapping[b])
                                for a in range(9) for b in range(9)}


def test_a_gh200_whose_gpu_owns_its_memory_node_only_gets_one_guest_node() -> None:
    host = grace_host("gh", "gh200-numa-capabilities.xml", "gh200-numa-nodedevs.xml")
    placement = make_placement(host, [CellSpec(0, 4, 8 * KIB_PER_GIB, PAGE_1G, gpus=1)])
    root = etree.fromstring(render_domain(host, placement).encode())
    assert sorted(_cells(root)) == [0, 1] and _cells(root)[1].get("memory") == "0"
    assert _acpi(root) == {"0009:01:00.0": "1"}
    assert _distances(root) == {(0, 0): 10, (0, 1): 80, (1, 0): 80, (1, 1): 10}
    # A VM without the GPU gets none of its nodes.
    root = etree.fromstring(render_domain(host, make_placement(host, [CellSpec(0, 4)])).encode())
    assert sorted(_cells(root)) == [0] and root.find("devices/hostdev") is None


@pytest.mark.parametrize(("on_0", "on_1"), [n for n in product(range(3), range(3)) if any(n)], ids=str)
def test_every_gpu_set_on_the_gb200_gets_its_own_nodes_after_the_cpu_cells(on_0: int, on_1: int) -> None:
    # Every way to take some of the tray's GPUs with a VM over both Grace CPUs (0-2 GPUs of each).
    cells = [CellSpec(0, 4, 8 * KIB_PER_GIB, PAGE_1G, gpus=on_0), CellSpec(1, 4, 8 * KIB_PER_GIB, PAGE_1G, gpus=on_1)]
    placement = make_placement(GB200, cells)
    root = etree.fromstring(render_domain(GB200, placement).encode())
    taken = sorted(d.address for d in placement.devices)
    assert len(taken) == on_0 + on_1
    # One guest node per GPU, numbered after the two CPU cells in host PCI address order.
    assert _acpi(root) == {a: str(2 + i) for i, a in enumerate(taken)}
    assert sorted(_cells(root)) == list(range(2 + len(taken)))
    mapping = _host_cell_of(root, placement, GB200)
    assert {mapping[2 + i] for i in range(len(taken))} == {GB200_NODES[a] for a in taken}
    assert _distances(root) == {(a, b): GB200.cell(mapping[a]).distance_to(mapping[b])
                                for a in mapping for b in mapping}


def test_the_gb200s_gpu_nodes_are_near_their_own_grace() -> None:
    cells = [CellSpec(0, 4, 8 * KIB_PER_GIB, PAGE_1G, gpus=2), CellSpec(1, 4, 8 * KIB_PER_GIB, PAGE_1G, gpus=2)]
    root = etree.fromstring(render_domain(GB200, make_placement(GB200, cells)).encode())
    d = _distances(root)
    assert (d[(0, 1)], d[(0, 2)], d[(0, 3)], d[(0, 4)], d[(1, 4)], d[(2, 3)], d[(2, 4)]) == (40, 80, 80, 120, 80, 80,
                                                                                            120)


# --- operator templates and the semantic checks ------------------------------------------------------------


def test_an_operator_template_extending_the_default_keeps_the_gpu_nodes() -> None:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    xml = render_domain(scenario.host, scenario.placement, template=TESTS / "data" / "templates" /
                        "disk-and-network.xml.j2")
    root = etree.fromstring(xml.encode())
    assert _acpi(root) == {"0009:01:00.0": "1-8"} and root.find("devices/disk") is not None


def test_an_operator_template_writing_its_own_hostdevs_without_the_tie_is_refused(tmp_path: Path) -> None:
    template = tmp_path / "own.xml.j2"
    template.write_text(
        '{% extends "domain.xml.j2" %}{% block devices %}'
        "{% for dev in view.pcie.hostdevs %}"
        "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='{{ dev.source_domain }}' "
        "bus='{{ dev.source_bus }}' slot='{{ dev.source_slot }}' function='{{ dev.source_function }}'/></source>"
        "</hostdev>{% endfor %}{% endblock %}"
    )
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    with pytest.raises(RenderError, match=r"hostdev 0009:01:00.0: its GPU memory node\(s\) 1-8 are tied to it by no "
                                          r"<acpi nodeset>") as info:
        render_domain(scenario.host, scenario.placement, template=template)
    assert "dev.acpi_nodeset" in (info.value.hint or "")


def _edited(edit: str) -> tuple[str, Host, Placement]:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    root = etree.fromstring(scenario.render().encode())
    if edit == "memory":
        _cells(root)[3].set("memory", "1048576")
    elif edit == "cpus":
        _cells(root)[3].set("cpus", "7")
    elif edit == "nodeset":
        root.find("devices/hostdev/acpi").set("nodeset", "1-7")
    elif edit == "missing":
        _cells(root)[8].getparent().remove(_cells(root)[8])
    return etree.tostring(root, encoding="unicode"), scenario.host, scenario.placement


@pytest.mark.parametrize(("edit", "message"), [
    ("memory", r"numa cell id=3 memory=1048576: a memory node of GPU 0009:01:00.0 has memory='0'"),
    ("cpus", r"numa cell id=3 cpus=7: a memory node of GPU 0009:01:00.0 has no vCPUs"),
    ("nodeset", r"hostdev 0009:01:00.0 acpi nodeset=1-7: the GPU's guest memory nodes are 1-8"),
    ("missing", r"cpu numa: guest cell\(s\) 8 are missing"),
])
def test_the_checks_hold_the_gpu_nodes_whatever_the_template_wrote(edit: str, message: str) -> None:
    xml, host, placement = _edited(edit)
    with pytest.raises(RenderError, match=message):
        validate_domain(xml, host, placement, schema=None)


# --- libvirt's schema ---------------------------------------------------------------------------------------


@pytest.mark.libvirt
def test_the_installed_schema_takes_the_tie_only_with_acpi_as_libvirt_11_8_0_defines_it() -> None:
    assert load_schema(DOMAIN_RNG) is not None, f"libvirt's schema {DOMAIN_RNG} is not installed"
    golden = etree.fromstring(BY_NAME["gh200-gpu-memory-nodes"].golden.read_bytes())
    # This machine's libvirt 9.0.0 schema alone has no nodeset on <acpi>.
    plain = load_schema(DOMAIN_RNG)
    assert plain is not None and not plain.validate(golden)
    check_schema(golden)  # the installed schema, <acpi> replaced by 11.8.0's
    golden.find("devices/hostdev/acpi").set("nodeset", "one")
    with pytest.raises(RenderError, match=r"with <acpi> as libvirt 11\.8\.0 has it"):
        check_schema(golden)


def test_only_a_domain_with_the_tie_needs_libvirt_11_8_0() -> None:
    from vnuma.render.requirements import needed_libvirt, version_of

    assert needed_libvirt(etree.fromstring(BY_NAME["gpus-on-two-cells"].golden.read_bytes())) is None
    needed = needed_libvirt(etree.fromstring(BY_NAME["gh200-gpu-memory-nodes"].golden.read_bytes()))
    assert needed is not None and needed.version == (11, 8, 0) == version_of(11_008_000)
    assert version_of(9_000_000) < needed.version < version_of(12_005_001)
