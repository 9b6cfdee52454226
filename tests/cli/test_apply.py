"""``vnuma render``, ``vnuma apply`` and ``vnuma vm stop|undefine|release`` on libvirt's test driver.

The test driver is real libvirt in this process: ``test:///default`` keeps
its domains only while some connection to it is open, so the ``conn``
fixture holds one for each test (and undefines what the test defined). The
host is added with that URI and a capabilities file built from
``make_host`` (the driver's own topology has no usable page sizes). What
apply did is read back from libvirt: the persistent (inactive) definition,
and whether the domain runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tests.builders import make_host
from tests.cli.conftest import Cli
from tests.sources.capswriter import capabilities_xml

libvirt = pytest.importorskip("libvirt")
pytestmark = pytest.mark.libvirt

URI = "test:///default"
VM = "v1"
Dump = Callable[[Path], list[str]]


def _caps(tmp_path: Path) -> Path:
    path = tmp_path / "caps.xml"
    host = make_host("h", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=0, hugepages_1g_gib=0)
    path.write_text(capabilities_xml(host))
    return path


@pytest.fixture
def placed(cli: Cli, conn: Any, tmp_path: Path) -> dict[str, Any]:
    """Host ``h`` on the test driver and VM ``v1`` placed on it (2 vCPUs, one cell, 4 KiB pages)."""
    cli.ok("host", "add", "h", "--uri", URI, "--capabilities", str(_caps(tmp_path)))
    cli.ok("tenant", "create", "a")
    doc = cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", VM, "--json")
    return dict(doc.json())


def _state(cli: Cli, vm: str = VM) -> str:
    return str(cli.ok("vm", "show", vm, "--json").json()["state"])


def _persistent(conn: Any, vm: str = VM) -> etree._Element:
    return etree.fromstring(conn.lookupByName(vm).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode())


def _expected_pins(placement: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """vcpu -> pCPU and guest cell -> host cell, as the placement says."""
    pins: dict[str, str] = {}
    memnodes: dict[str, str] = {}
    vcpu = 0
    for cell in placement["cells"]:
        memnodes[str(cell["guest_cell"])] = str(cell["host_cell"])
        for pcpu in cell["pcpus"]:
            pins[str(vcpu)] = str(pcpu)
            vcpu += 1
    return pins, memnodes


def _domain_pins(root: etree._Element) -> tuple[dict[str, str], dict[str, str]]:
    pins = {p.get("vcpu"): p.get("cpuset") for p in root.iterfind("cputune/vcpupin")}
    memnodes = {m.get("cellid"): m.get("nodeset") for m in root.iterfind("numatune/memnode")}
    return pins, memnodes


def test_render_prints_valid_xml_naming_the_placements_pins(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    xml = cli.ok("render", VM).stdout
    root = etree.fromstring(xml.encode())
    assert root.findtext("name") == VM
    assert _domain_pins(root) == _expected_pins(placed)
    assert conn.listDefinedDomains() == []  # render defines nothing


def test_render_json_carries_the_same_xml(cli: Cli, placed: dict[str, Any]) -> None:
    assert cli.ok("render", VM, "--json").json() == {"vm": VM, "xml": cli.ok("render", VM).stdout}


def test_apply_defines_the_domain_and_records_defined(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    assert _state(cli) == "placed"
    res = cli.ok("apply", VM)
    assert res.stdout.strip() == f"VM {VM}: defined"
    dom = conn.lookupByName(VM)
    assert not dom.isActive()
    assert _domain_pins(_persistent(conn)) == _expected_pins(placed)
    assert _state(cli) == "defined"


def test_apply_start_runs_it_then_stop_and_undefine(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    assert cli.ok("apply", VM, "--start").stdout.strip() == f"VM {VM}: running"
    assert conn.lookupByName(VM).isActive()
    assert _state(cli) == "running"
    assert cli.ok("vm", "stop", VM).stdout.strip() == f"VM {VM}: stopped"
    assert not conn.lookupByName(VM).isActive()
    assert _state(cli) == "stopped"
    assert cli.ok("vm", "undefine", VM).stdout.strip() == f"VM {VM}: placed"
    assert VM not in [d.name() for d in conn.listAllDomains()]
    assert _state(cli) == "placed"
    assert cli.ok("vm", "show", VM, "--json").json()["cells"] == placed["cells"]  # claims kept


def test_undefine_of_a_running_domain_stops_it_first(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    cli.ok("apply", VM, "--start")
    cli.ok("vm", "undefine", VM)
    assert VM not in [d.name() for d in conn.listAllDomains()]
    assert _state(cli) == "placed"


def test_apply_on_a_running_vm_is_refused_and_changes_nothing(
    cli: Cli, placed: dict[str, Any], conn: Any, dumped: Dump
) -> None:
    cli.ok("apply", VM, "--start")
    before_db, before_xml = dumped(cli.db), conn.lookupByName(VM).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    res = cli("apply", VM, "--memnode-mode", "restrictive")
    assert res.exit_code == 9
    assert res.stderr.splitlines() == [
        f"error: VM '{VM}' is running on h; its definition cannot be replaced while it runs",
        f"hint: vnuma vm stop {VM} first",
    ]
    assert dumped(cli.db) == before_db
    assert conn.lookupByName(VM).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before_xml
    assert conn.lookupByName(VM).isActive()


def test_dry_run_prints_a_diff_and_changes_nothing(
    cli: Cli, placed: dict[str, Any], conn: Any, dumped: Dump
) -> None:
    before = dumped(cli.db)
    res = cli.ok("apply", VM, "--dry-run")
    assert res.stdout.startswith("--- (not defined)\n+++ v1 (rendered)\n")
    assert "+    <vcpupin vcpu='0'" in res.stdout
    assert conn.listDefinedDomains() == [] and dumped(cli.db) == before

    cli.ok("apply", VM)
    defined = conn.lookupByName(VM).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    before = dumped(cli.db)
    res = cli.ok("apply", VM, "--dry-run", "--memnode-mode", "restrictive")
    assert res.stdout.startswith(f"--- {URI} {VM} (libvirt)\n+++ {VM} (rendered)\n")
    changed = [line for line in res.stdout.splitlines() if line.startswith(("-", "+")) and "memnode" in line]
    assert any("mode='strict'" in line for line in changed if line.startswith("-"))
    assert any("mode='restrictive'" in line for line in changed if line.startswith("+"))
    assert conn.lookupByName(VM).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == defined
    assert dumped(cli.db) == before


def test_release_is_refused_while_defined_and_undefine_releases(
    cli: Cli, placed: dict[str, Any], conn: Any, dumped: Dump
) -> None:
    cli.ok("apply", VM, "--start")
    before = dumped(cli.db)
    res = cli("vm", "release", VM)
    assert res.exit_code == 9
    assert res.stderr.splitlines()[0] == f"error: VM '{VM}' is still defined on h"
    assert "--undefine" in res.stderr.splitlines()[1]
    assert dumped(cli.db) == before and conn.lookupByName(VM).isActive()

    assert cli.ok("vm", "release", VM, "--undefine").stdout.strip() == f"released VM {VM}"
    assert VM not in [d.name() for d in conn.listAllDomains()]
    assert cli("vm", "show", VM).exit_code == 3
    # The claims are free again: the same request fits on the same pCPUs.
    again = cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "v2", "--json")
    assert again.json()["cells"] == placed["cells"]


BROKEN_TEMPLATES = {
    "jinja-syntax": ('{% extends "domain.xml.j2" %}\n{% block devices %}\n{% if %}\n{% endblock %}\n', "syntax error"),
    "undefined-variable": (
        '{% extends "domain.xml.j2" %}\n{% block devices %}\n{{ view.disk_image }}\n{% endblock %}\n',
        "undefined: 'vnuma.render.view.DomainView object' has no attribute 'disk_image'",
    ),
    "not-domain-xml": (
        '{% extends "domain.xml.j2" %}\n{% block devices %}\n    <disk type=\'file\'>\n{% endblock %}\n',
        "not well-formed XML",
    ),
    "schema-violation": (
        '{% extends "domain.xml.j2" %}\n{% block clock %}\n  <clock offset=\'sundial\'/>\n{% endblock %}\n',
        "domain.rng",
    ),
    "endless-loop": (
        '{% extends "domain.xml.j2" %}\n{% block devices %}\n'
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}\n{% endblock %}\n",
        "loop iterations and calls",
    ),
}


@pytest.mark.parametrize("command", ["render", "apply"])
@pytest.mark.parametrize("case", sorted(BROKEN_TEMPLATES))
def test_broken_operator_template_is_exit_7_and_changes_nothing(
    cli: Cli, placed: dict[str, Any], conn: Any, dumped: Dump, tmp_path: Path, case: str, command: str
) -> None:
    body, problem = BROKEN_TEMPLATES[case]
    template = tmp_path / "op.xml.j2"
    template.write_text(body)
    before = dumped(cli.db)
    res = cli(command, VM, "--template", str(template))
    assert res.exit_code == 7, res.stderr
    line, *hints = res.stderr.splitlines()
    assert line.startswith("error: ") and problem in line, line
    assert len(hints) <= 1 and all(h.startswith("hint: ") for h in hints), hints
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert [d.name() for d in conn.listAllDomains()] == ["test"]
    assert dumped(cli.db) == before


def test_a_working_operator_template_is_applied_and_remembered(
    cli: Cli, placed: dict[str, Any], conn: Any, tmp_path: Path
) -> None:
    template = tmp_path / "op.xml.j2"
    template.write_text(
        '{% extends "domain.xml.j2" %}\n{% block clock %}\n  <clock offset=\'localtime\'/>\n{% endblock %}\n'
    )
    cli.ok("apply", VM, "--template", str(template), "--domain-type", "qemu")
    root = _persistent(conn)
    assert root.find("clock").get("offset") == "localtime" and root.get("type") == "qemu"
    assert _domain_pins(root) == _expected_pins(placed)


def test_apply_on_a_host_imported_from_files_is_exit_4(cli: Cli, conn: Any, tmp_path: Path, dumped: Dump) -> None:
    cli.ok("host", "import", "files", "--capabilities", str(_caps(tmp_path)))
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", VM)
    assert etree.fromstring(cli.ok("render", VM).stdout.encode()).findtext("name") == VM  # render needs no libvirt
    before = dumped(cli.db)
    for args in (("apply", VM), ("apply", VM, "--dry-run"), ("vm", "stop", VM), ("vm", "undefine", VM)):
        res = cli(*args)
        assert res.exit_code == 4, (args, res.stderr)
        assert res.stderr.splitlines() == [
            "error: host 'files' was imported from files and has no libvirt URI to apply to",
            "hint: add it through libvirt: vnuma host add files --uri URI",
        ]
    assert dumped(cli.db) == before
    assert [d.name() for d in conn.listAllDomains()] == ["test"]


@pytest.mark.parametrize(
    "args",
    [("render", "nope"), ("apply", "nope"), ("apply", "nope", "--dry-run"), ("vm", "stop", "nope"),
     ("vm", "undefine", "nope"), ("vm", "release", "nope"), ("vm", "guest-view", "nope")],
    ids=lambda a: " ".join(a),
)
def test_unknown_vm_is_exit_3(cli: Cli, placed: dict[str, Any], args: tuple[str, ...], dumped: Dump) -> None:
    before = dumped(cli.db)
    res = cli(*args)
    assert res.exit_code == 3, res.stderr
    assert re.match(r"error: .*'nope'", res.stderr.splitlines()[0]), res.stderr
    assert dumped(cli.db) == before


def test_bad_render_options_are_exit_4(cli: Cli, placed: dict[str, Any]) -> None:
    res = cli("apply", VM, "--domain-type", "xen")
    assert res.exit_code == 4 and res.stderr.startswith("error: bad --domain-type 'xen'")
    res = cli("render", VM, "--memnode-mode", "loose")
    assert res.exit_code == 4 and res.stderr.startswith("error: bad --memnode-mode 'loose'")


def test_metacharacter_names_are_refused_before_anything_is_rendered(cli: Cli, placed: dict[str, Any]) -> None:
    res = cli("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "v<&'x")
    assert res.exit_code == 4, res.stderr
    assert cli("tenant", "create", "t<&>").exit_code == 4


def test_a_host_name_with_metacharacters_is_refused_and_one_the_rule_takes_renders_as_text(
    cli: Cli, tmp_path: Path
) -> None:
    # Host names follow the one name rule of tenants and VMs (vnuma.topology.names): markup never gets in.
    # Render writes the host into vnuma's <metadata>, and a name the rule takes comes back as text.
    assert cli("host", "import", "h<&'\"x>", "--capabilities", str(_caps(tmp_path))).exit_code == 4
    host = "h-1.x+y_z"
    cli.ok("host", "import", host, "--capabilities", str(_caps(tmp_path)))
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", VM)
    root = etree.fromstring(cli.ok("render", VM).stdout.encode())
    found = root.findtext("metadata/{https://vnuma.dev/xmlns/domain/1}placement/{https://vnuma.dev/xmlns/domain/1}host")
    assert found == host


def test_apply_guest_hints_gives_the_domain_its_guest_view(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    cli.ok("apply", VM, "--guest-hints")
    root = _persistent(conn)
    entries = [e.text or "" for e in root.iterfind("sysinfo[@type='smbios']/oemStrings/entry")]
    assert root.find("os/smbios").get("mode") == "sysinfo"
    assert len(entries) == 1 and entries[0].startswith("vnuma-guest-view:")
    assert json.loads(entries[0].split(":", 1)[1]) == cli.ok("vm", "guest-view", VM, "--json").json()


def test_apply_without_guest_hints_gives_none(cli: Cli, placed: dict[str, Any], conn: Any) -> None:
    cli.ok("apply", VM)
    assert _persistent(conn).find("sysinfo") is None
