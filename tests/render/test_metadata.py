"""vnuma's <metadata>: written by the default template, read back by read_metadata."""

from __future__ import annotations

import pytest

from tests.render.scenarios import BY_NAME
from vnuma.errors import InvalidInputError
from vnuma.render.metadata import VNUMA_NS, read_metadata


def test_metadata_round_trips_the_placement_summary() -> None:
    scenario = BY_NAME["gpus-on-two-cells"]
    placement = scenario.placement
    meta = read_metadata(scenario.render())
    assert meta is not None
    assert (meta["tenant"], meta["vm"], meta["host"]) == (placement.tenant, placement.vm, placement.host)
    assert (meta["cpu_policy"], meta["thread_policy"]) == (placement.cpu_policy, placement.thread_policy)
    assert meta["emulator_pcpus"] == frozenset()
    assert meta["cells"] == [
        {
            "guest_cell": c.guest_cell,
            "host_cell": c.host_cell,
            "vcpus": frozenset(c.vcpus),
            "pcpus": frozenset(c.pcpus),
            "memory_kib": c.memory_kib,
            "page_size_kib": c.page_size_kib,
        }
        for c in placement.cells
    ]
    assert meta["devices"] == [
        {"address": d.address, "kind": str(d.kind), "guest_cell": d.guest_cell, "host_cell": d.host_cell}
        for d in sorted(placement.devices, key=lambda d: d.address)
    ]


def test_isolated_emulator_is_recorded() -> None:
    scenario = BY_NAME["emulator-isolate"]
    meta = read_metadata(scenario.render())
    assert meta is not None
    assert meta["emulator_pcpus"] == frozenset(scenario.placement.emulator_pcpus) != frozenset()


def test_domain_without_vnuma_metadata_gives_none() -> None:
    assert read_metadata("<domain type='kvm'><name>x</name></domain>") is None
    other = "<domain><metadata><o:x xmlns:o='urn:other'/></metadata></domain>"
    assert read_metadata(other) is None


def test_prefix_does_not_matter_only_the_namespace() -> None:
    xml = BY_NAME["one-cell-2m"].render().replace("vnuma:", "v:").replace("xmlns:vnuma", "xmlns:v")
    meta = read_metadata(xml)
    assert meta is not None and meta["vm"] == "vm1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("<p:vm>x</p:vm>", "missing <vnuma:tenant>"),
        (
            "<p:tenant>t</p:tenant><p:vm>v</p:vm><p:host>h</p:host><p:cpu-policy>dedicated</p:cpu-policy>"
            "<p:thread-policy>prefer</p:thread-policy><p:cell guest='0' host='x'/>",
            "<vnuma:cell> host='x' is not a number",
        ),
        (
            "<p:tenant>t</p:tenant><p:vm>v</p:vm><p:host>h</p:host><p:cpu-policy>dedicated</p:cpu-policy>"
            "<p:thread-policy>prefer</p:thread-policy><p:emulator pcpus='4-2'/>",
            "<vnuma:emulator> pcpus: bad cpuset",
        ),
    ],
    ids=["missing-tenant", "bad-number", "bad-cpuset"],
)
def test_malformed_metadata_is_invalid_input(body: str, message: str) -> None:
    xml = f"<domain><metadata><p:placement xmlns:p='{VNUMA_NS}'>{body}</p:placement></metadata></domain>"
    with pytest.raises(InvalidInputError, match=message):
        read_metadata(xml)


def test_not_xml_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="domain XML is not well-formed"):
        read_metadata("<domain>")
