"""The guest follows the host's architecture: an aarch64 (Grace) host gets an aarch64 domain.

The host's arch is what the inventory recorded from its capabilities (``<host><cpu><arch>``) or hwloc
(``Architecture``); an explicit arch option still wins; x86_64 hosts render as before (every other golden).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from tests.render.scenarios import BY_NAME
from vnuma.errors import RenderError
from vnuma.inventory.topologies import decode_host, digest_topology, encode_topology
from vnuma.render import render_domain
from vnuma.render.view import RenderOptions
from vnuma.services.renderings import rendering_doc, rendering_of
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.hwloc import parse_hwloc

GRACE = Path(__file__).parents[1] / "data" / "grace"


def _os_and_features(xml: str) -> tuple[dict[str, str | None], list[str]]:
    root = etree.fromstring(xml.encode())
    os_el, type_el = root.find("os"), root.find("os/type")
    assert os_el is not None and type_el is not None
    shown = {"firmware": os_el.get("firmware"), "arch": type_el.get("arch"), "machine": type_el.get("machine")}
    features = [f"{f.tag}{dict(f.attrib) if f.attrib else ''}" for f in root.iterfind("features/*")]
    return shown, features


def test_a_grace_host_gets_an_aarch64_virt_domain_with_a_gic_and_uefi() -> None:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    assert scenario.host.arch == "aarch64"
    shown, features = _os_and_features(scenario.render())
    assert shown == {"firmware": "efi", "arch": "aarch64", "machine": "virt"}
    assert features == ["acpi", "gic{'version': '3'}"]  # no <apic/>: x86 only


def test_an_x86_host_keeps_q35_the_apic_and_the_default_firmware() -> None:
    host = make_host()
    shown, features = _os_and_features(render_domain(host, make_placement(host, [CellSpec(0, 2)])))
    assert shown == {"firmware": None, "arch": "x86_64", "machine": "q35"} and features == ["acpi", "apic"]


def test_an_explicit_arch_option_wins_over_the_hosts() -> None:
    scenario = BY_NAME["gh200-gpu-memory-nodes"]
    xml = render_domain(scenario.host, scenario.placement, options=RenderOptions(arch="x86_64"))
    assert _os_and_features(xml) == ({"firmware": None, "arch": "x86_64", "machine": "q35"}, ["acpi", "apic"])
    pinned = render_domain(scenario.host, scenario.placement, options=RenderOptions(machine="virt-9.0"))
    assert _os_and_features(pinned)[0] == {"firmware": "efi", "arch": "aarch64", "machine": "virt-9.0"}


def test_a_host_of_an_arch_vnuma_renders_no_domain_for_is_refused_naming_it() -> None:
    host = replace(make_host(), arch="ppc64le")
    with pytest.raises(RenderError, match=r"x86_64 and aarch64 domains, not ppc64le \(the arch of host 'host-a'\)"):
        render_domain(host, make_placement(host, [CellSpec(0, 2)]))


def test_the_inventory_keeps_the_arch_and_an_x86_hosts_text_and_digest_stay_as_they_were() -> None:
    grace = parse_capabilities((GRACE / "gh200-numa-capabilities.xml").read_bytes(), name="gh")
    text = encode_topology(grace)
    assert '"arch":"aarch64"' in text
    assert decode_host("gh", None, "capabilities", text, "").arch == "aarch64"
    x86 = make_host()
    assert '"arch"' not in encode_topology(x86)
    assert digest_topology(encode_topology(x86)) == digest_topology(encode_topology(replace(x86, arch="x86_64")))
    assert decode_host("x", None, "capabilities", encode_topology(x86), "").arch == "x86_64"


def test_hwloc_imports_read_the_machines_architecture() -> None:
    assert parse_hwloc((GRACE / "gh200-numa-hwloc.xml").read_bytes(), name="gh").arch == "aarch64"


def test_a_rendering_recorded_before_the_arch_followed_the_host_follows_it_now() -> None:
    old = {"options": {**rendering_doc(RenderOptions(), None)["options"], "arch": "x86_64", "machine": "q35"},  # type: ignore[dict-item]
           "template": None}
    options, _template = rendering_of(old)
    assert options.arch is None and options.machine is None
    assert rendering_of(rendering_doc(RenderOptions(arch="aarch64"), None))[0].arch == "aarch64"


@pytest.mark.libvirt
def test_libvirts_test_driver_defines_the_aarch64_domain_with_validation(conn: Any) -> None:
    import libvirt

    # libvirt 9.0.0 knows no <acpi nodeset> (apply refuses for it): the rest of the domain is what is checked.
    xml = re.sub(r"\s*<acpi nodeset='[^']*'/>", "", BY_NAME["gh200-gpu-memory-nodes"].golden.read_text())
    held = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    assert _os_and_features(held) == ({"firmware": "efi", "arch": "aarch64", "machine": "virt"},
                                      ["acpi", "gic{'version': '3'}"])


def test_a_refresh_lists_an_arch_that_changed() -> None:
    from vnuma.services.hosts import diff_hosts

    grace = parse_capabilities((GRACE / "gh200-numa-capabilities.xml").read_bytes(), name="gh")
    recorded_before = replace(grace, arch="x86_64")  # a Grace host stored before vnuma kept the arch
    assert diff_hosts(recorded_before, grace) == [
        "arch: x86_64 -> aarch64 (its VMs' domains follow it when next defined)"
    ]


def test_an_i686_host_as_libvirts_test_driver_reports_keeps_x86_64_guests() -> None:
    host = replace(make_host(), arch="i686")
    xml = render_domain(host, make_placement(host, [CellSpec(0, 2)]))
    assert _os_and_features(xml) == ({"firmware": None, "arch": "x86_64", "machine": "q35"}, ["acpi", "apic"])
