"""Golden domain XML: exact bytes, libvirt's schema, and libvirt's own test driver.

Test-driver facts this file relies on (libvirt 9.0.0, checked by
``test_test_driver_does_not_check_pins_against_its_host``): ``test:///default``
has 2 cells x 8 CPUs, but ``defineXMLFlags(..., VALIDATE)`` checks the XML
against the schema and the generic parser only; it does not compare pins
or numatune nodesets with its own host. So the scenarios use realistic
32-CPU test hosts instead of squeezing into 16 CPUs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tests.render.scenarios import SCENARIOS, Scenario
from vnuma.errors import RenderError
from vnuma.render.metadata import read_metadata
from vnuma.render.requirements import needed_libvirt
from vnuma.render.validate import ACPI_11_8_0, DOMAIN_RNG, check_schema, load_schema

RNG_12_8_0 = Path(__file__).parents[1] / "data" / "libvirt" / "schemas-12.8.0" / "domain.rng"
"""libvirt 12.8.0's own domain schema set (Debian's libvirt-common 12.8.0-1), newer than every element vnuma writes."""


def assert_golden(rendered: str, path: Path, update: bool) -> None:
    """Compare exact bytes with a unified diff; rewrite only when asked; a missing file fails."""
    if update:
        path.write_text(rendered, encoding="utf-8")
    if not path.is_file():
        pytest.fail(f"golden file {path} is missing; run pytest --update-golden and review it")
    expected = path.read_text(encoding="utf-8")
    if rendered != expected:
        diff = difflib.unified_diff(
            expected.splitlines(True), rendered.splitlines(True), str(path), "rendered"
        )
        pytest.fail("rendered XML differs from the golden file:\n" + "".join(diff))


def _ids(s: Scenario) -> str:
    return s.name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_ids)
def test_rendered_xml_matches_golden_file(scenario: Scenario, update_golden: bool) -> None:
    assert_golden(scenario.render(), scenario.golden, update_golden)


def test_every_golden_file_belongs_to_a_scenario() -> None:
    names = {s.name for s in SCENARIOS}
    stale = sorted(p.stem for p in SCENARIOS[0].golden.parent.glob("*.xml") if p.stem not in names)
    assert stale == []


@pytest.mark.libvirt
@pytest.mark.parametrize("scenario", SCENARIOS, ids=_ids)
def test_golden_file_matches_libvirt_schema(scenario: Scenario) -> None:
    assert load_schema(DOMAIN_RNG) is not None, f"libvirt's schema {DOMAIN_RNG} is not installed"
    check_schema(etree.fromstring(scenario.golden.read_bytes()))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_ids)
def test_golden_file_matches_libvirt_12_8_0_schema(scenario: Scenario) -> None:
    # libvirt's own schema of a release that has <acpi nodeset> (11.8.0 and later), not the installed 9.0.0's
    # with vnuma's copy of the definition: the GH200 golden is checked by what libvirt itself ships.
    golden = etree.fromstring(scenario.golden.read_bytes())
    check_schema(golden, RNG_12_8_0)


def test_libvirt_12_8_0_schema_refuses_a_bad_gpu_memory_tie() -> None:
    golden = etree.fromstring(next(s for s in SCENARIOS if s.name == "gh200-gpu-memory-nodes").golden.read_bytes())
    golden.find("devices/hostdev/acpi").set("nodeset", "one")
    with pytest.raises(RenderError, match=r"domain\.rng"):
        check_schema(golden, RNG_12_8_0)


def test_the_acpi_definition_vnuma_adds_to_older_schemas_is_libvirts_own() -> None:
    ns = {"rng": "http://relaxng.org/ns/structure/1.0"}
    upstream = etree.parse(str(RNG_12_8_0.with_name("domaincommon.rng"))).find("rng:define[@name='acpi']", ns)

    def canonical(define: etree._Element) -> bytes:
        return etree.tostring(etree.fromstring(etree.tostring(define)), method="c14n2", strip_text=True)

    assert canonical(etree.fromstring(ACPI_11_8_0)) == canonical(upstream)


def _essentials(xml: str) -> dict[str, Any]:
    """What must survive a round trip through libvirt: pins, NUMA, pages, devices, metadata."""
    root = etree.fromstring(xml.encode())
    cells = {
        c.get("id"): (
            c.get("cpus"),
            c.get("memory"),
            c.get("memAccess"),
            tuple((s.get("id"), s.get("value")) for s in c.iterfind("distances/sibling")),
        )
        for c in root.iterfind("cpu/numa/cell")
    }
    return {
        "name": root.findtext("name"),
        "uuid": root.findtext("uuid"),
        "vcpu": root.findtext("vcpu"),
        "vcpupins": {p.get("vcpu"): p.get("cpuset") for p in root.iterfind("cputune/vcpupin")},
        "emulatorpin": [p.get("cpuset") for p in root.iterfind("cputune/emulatorpin")],
        "iothreadpins": {p.get("iothread"): p.get("cpuset") for p in root.iterfind("cputune/iothreadpin")},
        "cachetune": [
            (t.get("vcpus"), [(c.get("id"), c.get("level"), c.get("type"), _kib(c)) for c in t.iterfind("cache")])
            for t in root.iterfind("cputune/cachetune")
        ],
        "monitors": [
            (m.getparent().tag, m.get("level"), m.get("vcpus"))
            for m in root.iterfind("cputune/*/monitor")
        ],
        "memorytune": [
            (t.get("vcpus"), [dict(n.attrib) for n in t.iterfind("node")]) for t in root.iterfind("cputune/memorytune")
        ],
        "memory": [(m.get("mode"), m.get("nodeset")) for m in root.iterfind("numatune/memory")],
        "memnodes": {
            m.get("cellid"): (m.get("mode"), m.get("nodeset")) for m in root.iterfind("numatune/memnode")
        },
        "topology": dict(root.find("cpu/topology").attrib),
        "cpu_mode": root.find("cpu").get("mode"),
        "cells": cells,
        "pages": [dict(p.attrib) for p in root.iterfind("memoryBacking/hugepages/page")],
        "hostdevs": [
            (dict(h.find("source/address").attrib), dict(h.find("address").attrib))
            for h in root.iterfind("devices/hostdev")
        ],
        "expanders": [
            (c.get("index"), c.find("target").get("busNr"), c.findtext("target/node"))
            for c in root.iterfind("devices/controller[@model='pcie-expander-bus']")
        ],
        "disks": len(root.findall("devices/disk")),
        "interfaces": len(root.findall("devices/interface")),
        "metadata": read_metadata(xml),
    }


def _kib(cache: Any) -> int:
    """A ``<cache size unit>`` in KiB (libvirt writes back the largest whole unit)."""
    scale = {"B": 1 / 1024, "KiB": 1, "MiB": 1024, "GiB": 1024 * 1024}[cache.get("unit", "B")]
    return int(int(cache.get("size")) * scale)


@pytest.fixture
def test_driver() -> Iterator[Any]:
    libvirt = pytest.importorskip("libvirt")
    conn = libvirt.open("test:///default")
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.libvirt
@pytest.mark.parametrize("scenario", SCENARIOS, ids=_ids)
def test_golden_file_defines_in_libvirt_test_driver(scenario: Scenario, test_driver: Any) -> None:
    import libvirt

    golden = scenario.golden.read_text(encoding="utf-8")
    if needed_libvirt(etree.fromstring(golden.encode())) is not None:
        # libvirt 9.0.0 (this machine's) predates <acpi nodeset>: its schema refuses the domain, which is why
        # apply asks the host's version first (tests/cli/test_grace_apply.py).
        with pytest.raises(libvirt.libvirtError, match="Extra element devices"):
            test_driver.defineXMLFlags(golden, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        return
    dom = test_driver.defineXMLFlags(golden, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    try:
        back = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        assert dom.name() == scenario.placement.vm
    finally:
        dom.undefine()
    assert _essentials(back) == _essentials(golden)


@pytest.mark.libvirt
def test_test_driver_does_not_check_pins_against_its_host(test_driver: Any) -> None:
    """Documents why the scenarios may pin beyond the test driver's 16 CPUs and 2 cells."""
    import libvirt

    scenario = next(s for s in SCENARIOS if s.name == "two-cell-1g")
    root = etree.fromstring(scenario.golden.read_bytes())
    root.find("name").text = "beyond-test-host"
    root.find("uuid").text = "9d4b1f38-0a2e-4c43-9a0e-2b9d7a1f0c11"
    root.find("cputune/vcpupin").set("cpuset", "99")
    root.find("numatune/memory").set("nodeset", "0-7")
    root.find("numatune/memnode").set("nodeset", "7")
    dom = test_driver.defineXMLFlags(
        etree.tostring(root, encoding="unicode"), libvirt.VIR_DOMAIN_DEFINE_VALIDATE
    )
    try:
        back = etree.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode())
    finally:
        dom.undefine()
    assert back.find("cputune/vcpupin").get("cpuset") == "99"
    assert back.find("numatune/memnode").get("nodeset") == "7"
