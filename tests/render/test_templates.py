"""Templates: operator overrides, one-line errors naming file and line, the sandbox, escaping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from tests.render.scenarios import BY_NAME, METACHAR_TENANT, METACHAR_VM
from vnuma.errors import RenderError
from vnuma.render.domain import render_domain, render_view
from vnuma.render.metadata import read_metadata
from vnuma.render.view import RenderOptions, build_view

HOST = make_host()
PLACEMENT = make_placement(HOST, [CellSpec(0, 2)], threads=2)
VIEW = build_view(HOST, PLACEMENT, RenderOptions())


def _operator(tmp_path: Path, body: str, name: str = "op.xml.j2") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def test_operator_file_overrides_a_block_and_keeps_the_rest(tmp_path: Path) -> None:
    path = _operator(
        tmp_path,
        "{% extends \"domain.xml.j2\" %}\n{% block clock %}\n  <clock offset='localtime'/>\n{% endblock %}\n",
    )
    root = etree.fromstring(render_domain(HOST, PLACEMENT, template=path).encode())
    assert root.find("clock").get("offset") == "localtime"
    assert len(root.findall("cputune/vcpupin")) == 2


def test_operator_directory_partial_wins_over_the_shipped_one(tmp_path: Path) -> None:
    _operator(tmp_path, "    <watchdog model='i6300esb' action='reset'/>\n", "_devices.xml.j2")
    xml = render_domain(HOST, PLACEMENT, templates_dir=tmp_path)
    root = etree.fromstring(xml.encode())
    assert root.find("devices/watchdog").get("model") == "i6300esb"
    assert root.find("devices/memballoon") is None


def test_operator_directory_domain_can_extend_the_shipped_domain(tmp_path: Path) -> None:
    _operator(
        tmp_path,
        '{% extends "vnuma/domain.xml.j2" %}\n{% block features %}\n  <features>\n    <acpi/>\n    <apic/>\n'
        "    <pmu state='off'/>\n  </features>\n{% endblock %}\n",
        "domain.xml.j2",
    )
    root = etree.fromstring(render_domain(HOST, PLACEMENT, templates_dir=tmp_path).encode())
    assert root.find("features/pmu").get("state") == "off"


def test_operator_domain_extending_itself_is_a_render_error(tmp_path: Path) -> None:
    _operator(tmp_path, '{% extends "domain.xml.j2" %}\n', "domain.xml.j2")
    with pytest.raises(RenderError, match="include each other") as info:
        render_view(VIEW, templates_dir=tmp_path)
    assert "vnuma/domain.xml.j2" in (info.value.hint or "")


ERRORS = [
    (
        "syntax",
        '{% extends "domain.xml.j2" %}\n{% block devices %}\n{% if %}\n{% endblock %}\n',
        3,
        "syntax error",
    ),
    (
        "undefined",
        '{% extends "domain.xml.j2" %}\n{% block devices %}\n\n  {{ view.no_such_field }}\n{% endblock %}\n',
        4,
        "undefined: 'vnuma.render.view.DomainView object' has no attribute 'no_such_field'",
    ),
    ("sandbox", "<domain>\n{{ ''.__class__.__mro__ }}\n</domain>\n", 2, "unsafe"),
    ("sandbox-call", "<domain>\n{{ view.__init__.__globals__ }}\n</domain>\n", 2, "unsafe"),
    (
        "missing-include",
        '<domain>\n\n{% include "no-such.xml.j2" %}\n</domain>\n',
        3,
        "not found: no-such.xml.j2",
    ),
    ("runtime", "<domain>\n{{ 1 // 0 }}\n</domain>\n", 2, "ZeroDivisionError"),
]


@pytest.mark.parametrize(("body", "line", "problem"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_template_error_names_file_line_and_problem(
    tmp_path: Path, body: str, line: int, problem: str
) -> None:
    path = _operator(tmp_path, body)
    with pytest.raises(RenderError) as info:
        render_view(VIEW, template=path)
    message = str(info.value)
    assert message.startswith(f"template {path} line {line}: "), message
    assert problem in message
    assert "\n" not in message


def test_error_in_a_shipped_partial_named_through_the_operator_directory(tmp_path: Path) -> None:
    _operator(tmp_path, "  <cpu mode='{{ view.cpu_mod }}'/>\n", "_cpu.xml.j2")
    with pytest.raises(RenderError, match=f"template {tmp_path / '_cpu.xml.j2'} line 1: undefined"):
        render_view(VIEW, templates_dir=tmp_path)


def test_unreadable_operator_file_is_a_render_error(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=f"template file {tmp_path / 'absent.xml.j2'} does not exist"):
        render_view(VIEW, template=tmp_path / "absent.xml.j2")
    with pytest.raises(RenderError, match="is not a file"):
        render_view(VIEW, template=tmp_path)


def test_edited_operator_file_is_reloaded(tmp_path: Path) -> None:
    path = _operator(
        tmp_path, "{% extends \"domain.xml.j2\" %}{% block clock %}  <clock offset='utc'/>\n{% endblock %}"
    )
    assert "offset='utc'" in render_view(VIEW, template=path)
    path.write_text(
        "{% extends \"domain.xml.j2\" %}{% block clock %}  <clock offset='localtime'/>\n{% endblock %}"
    )
    os.utime(path, (1, 1))
    assert "offset='localtime'" in render_view(VIEW, template=path)


def test_metacharacter_names_are_text_never_markup() -> None:
    scenario = BY_NAME["names-with-metacharacters"]
    xml = scenario.render()
    root = etree.fromstring(xml.encode())
    assert root.findtext("name") == METACHAR_VM
    meta = read_metadata(xml)
    assert meta is not None
    assert (meta["vm"], meta["tenant"]) == (METACHAR_VM, METACHAR_TENANT)
    assert "<b" not in xml and "<en>" not in xml


def test_operator_template_output_is_escaped_too() -> None:
    scenario = BY_NAME["names-with-metacharacters"]
    path = Path(__file__).resolve().parent.parent / "data" / "templates" / "disk-and-network.xml.j2"
    xml = render_domain(scenario.host, scenario.placement, template=path)
    root = etree.fromstring(xml.encode())
    assert root.find("devices/disk/source").get("file") == f"/var/lib/libvirt/images/{METACHAR_VM}.qcow2"


_XML_TEXT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\ufffe\uffff"),
    min_size=1,
    max_size=40,
)


@given(vm=_XML_TEXT, tenant=_XML_TEXT)
def test_any_name_round_trips_exactly(vm: str, tenant: str) -> None:
    placement = make_placement(HOST, [CellSpec(0, 2)], vm=vm, tenant=tenant, threads=2)
    xml = render_domain(HOST, placement)
    root = etree.fromstring(xml.encode())
    assert root.findtext("name") == vm
    meta = read_metadata(xml)
    assert meta is not None
    assert (meta["vm"], meta["tenant"]) == (vm, tenant)
    assert len(root.findall("cputune/vcpupin")) == 2
