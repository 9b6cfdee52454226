"""``vnuma reconcile`` end to end: the CLI in-process against libvirt's test driver."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libvirt
import pytest

from tests.cli.conftest import REPO, Cli
from tests.reconcile.conftest import URI, VM_ARGS, findings, fleet

pytestmark = pytest.mark.libvirt
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE


def foreign_xml(name: str, pcpus: list[int], *, node: int = 0) -> str:
    """A domain vnuma never saw: one vCPU per pCPU in ``pcpus``, one guest cell bound to host ``node``."""
    pins = "".join(f"<vcpupin vcpu='{i}' cpuset='{p}'/>" for i, p in enumerate(pcpus))
    last = len(pcpus) - 1
    return (
        f"<domain type='test'><name>{name}</name><memory unit='KiB'>262144</memory><vcpu>{len(pcpus)}</vcpu>"
        f"<cputune>{pins}<emulatorpin cpuset='{pcpus[0]}'/></cputune>"
        f"<numatune><memory mode='strict' nodeset='{node}'/><memnode cellid='0' mode='strict' nodeset='{node}'/>"
        f"</numatune><os><type>hvm</type></os>"
        f"<cpu><numa><cell id='0' cpus='0-{last}' memory='262144' unit='KiB'/></numa></cpu></domain>"
    )


def _vms(cli: Cli) -> dict[str, dict[str, Any]]:
    return {v["vm"]: v for v in cli.ok("vm", "list", "--json").json()}


def _states(cli: Cli) -> dict[str, str]:
    res = cli.ok("vm", "list")
    return {line.split()[0]: line.split()[3] for line in res.stdout.splitlines()[1:] if line.strip()}


def test_agreement_exits_0_with_no_findings(cli: Cli, without_stock: Any) -> None:
    fleet(cli, ("vm1", "running"), ("vm2", "defined"), ("vm3", "placed"))
    res = cli("reconcile")
    assert res.exit_code == 0, res.stderr
    assert "host h1 (test:///default): in agreement" in res.stdout
    doc = cli.ok("reconcile", "h1", "--json").json()
    assert doc["in_agreement"] is True and doc["changed"] is False
    assert [(h["host"], h["status"], h["findings"]) for h in doc["hosts"]] == [("h1", "checked", [])]


def test_json_keys(cli: Cli, conn: Any) -> None:
    fleet(cli, ("vm1", "defined"))
    conn.lookupByName("vm1").undefine()
    res = cli("reconcile", "--json")
    assert res.exit_code == 9
    doc = res.json()
    assert set(doc) == {"in_agreement", "changed", "hosts"}
    (host,) = doc["hosts"]
    assert set(host) == {"host", "uri", "status", "reason", "findings"}
    for f in host["findings"]:
        assert set(f) == {"name", "drift", "detail", "differences", "action", "outcome", "note"}
    assert {f["drift"] for f in host["findings"]} == {"missing", "unknown"}  # vm1, and the stock domain


def test_missing_domain_is_reported_and_nothing_changes_without_yes(
    cli: Cli, without_stock: Any, dumped: Callable[[Path], list[str]]
) -> None:
    fleet(cli, ("vm1", "running"), ("vm2", "defined"))
    without_stock.lookupByName("vm2").undefine()
    before = dumped(cli.db)
    res = cli("reconcile", "h1", "--json")
    assert res.exit_code == 9
    assert "hint: pass --yes" in res.stderr
    (f,) = findings(res.json())["vm2"]
    assert (f["drift"], f["action"], f["outcome"]) == ("missing", "release", "proposed")
    assert "vm1" not in findings(res.json())
    assert dumped(cli.db) == before


def test_yes_frees_the_claims_of_a_vm_whose_domain_is_gone(cli: Cli, without_stock: Any) -> None:
    fleet(cli, ("vm1", "running"), ("vm2", "defined"))
    freed = _vms(cli)["vm2"]["cells"][0]["pcpus"]
    without_stock.lookupByName("vm2").undefine()
    res = cli("reconcile", "--yes")
    assert res.exit_code == 0, res.stderr
    assert re.search(r"vm2\s+missing.*freed its claims", res.stdout)
    assert set(_vms(cli)) == {"vm1"}
    cli.ok("place", "acme", *VM_ARGS, "--name", "vm4")
    assert _vms(cli)["vm4"]["cells"][0]["pcpus"] == freed
    assert cli("reconcile").exit_code == 0


def test_state_drift_records_libvirts_state(cli: Cli, without_stock: Any) -> None:
    fleet(cli, ("vm1", "running"), ("vm2", "defined"))
    without_stock.lookupByName("vm1").destroy()
    without_stock.lookupByName("vm2").create()
    doc = cli("reconcile", "--json").json()
    got = {name: (fs[0]["drift"], fs[0]["note"]) for name, fs in findings(doc).items()}
    assert got == {"vm1": ("state", "would record state stopped"), "vm2": ("state", "would record state running")}
    assert _states(cli) == {"vm1": "running", "vm2": "defined"}
    assert cli("reconcile", "--yes").exit_code == 0
    assert _states(cli) == {"vm1": "stopped", "vm2": "running"}


def test_a_placed_vm_whose_domain_exists_gets_its_state(cli: Cli, without_stock: Any) -> None:
    """``vnuma apply`` killed between libvirt's define and the inventory's write leaves exactly this."""
    fleet(cli, ("vm1", "placed"))
    without_stock.defineXML(cli.ok("render", "vm1", "--domain-type", "qemu").stdout)
    assert _states(cli) == {"vm1": "placed"}
    res = cli("reconcile", "--yes")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert _states(cli) == {"vm1": "defined"}


def test_pins_changed_by_hand_are_reported_not_changed(
    cli: Cli, without_stock: Any, dumped: Callable[[Path], list[str]]
) -> None:
    fleet(cli, ("vm1", "defined"), ("vm2", "running"))
    xml = without_stock.lookupByName("vm1").XMLDesc(INACTIVE)
    pin = re.search(r"<vcpupin vcpu='0' cpuset='(\d+)'/>", xml)
    assert pin is not None
    without_stock.defineXML(xml.replace(pin.group(0), "<vcpupin vcpu='0' cpuset='7'/>"))
    running = without_stock.lookupByName("vm2")
    running.pinVcpu(1, tuple(cpu == 6 for cpu in range(8)))
    before = dumped(cli.db)
    res = cli("reconcile", "--yes", "--json")
    assert res.exit_code == 9
    got = findings(res.json())
    assert [(f["drift"], f["differences"]) for f in got["vm1"]] == [
        ("pins", [{"kind": "pins", "where": "persistent", "what": "vcpupin 0", "expected": pin.group(1),
                   "actual": "7"}])
    ]
    (vm2,) = got["vm2"]
    assert vm2["drift"] == "pins" and vm2["action"] == "none"
    assert [(d["where"], d["what"], d["actual"]) for d in vm2["differences"]] == [("live", "vcpupin 1", "6")]
    assert dumped(cli.db) == before


def test_adopt_records_an_unknown_domain_and_refuses_a_conflicting_one(cli: Cli, without_stock: Any) -> None:
    fleet(cli, ("vm1", "running"))
    without_stock.defineXML(foreign_xml("legacy", [4, 5]))
    res = cli("reconcile", "--json")
    (f,) = findings(res.json())["legacy"]
    assert (f["drift"], f["action"]) == ("unknown", "none")
    assert res.exit_code == 9 and "legacy" not in _vms(cli)
    res = cli("reconcile", "h1", "--adopt", "--tenant", "acme", "--yes")
    assert res.exit_code == 0, res.stdout + res.stderr
    legacy = _vms(cli)["legacy"]
    assert (legacy["tenant"], legacy["cells"][0]["host_cell"], legacy["cells"][0]["pcpus"]) == ("acme", 0, [4, 5])
    assert _states(cli)["legacy"] == "defined"
    without_stock.defineXML(foreign_xml("squatter", [5, 6]))
    res = cli("reconcile", "h1", "--adopt", "--tenant", "acme", "--yes", "--json")
    assert res.exit_code == 9
    (f,) = findings(res.json())["squatter"]
    assert f["outcome"] == "refused"
    assert "pCPU(s) 5 are already held by VM 'legacy'" in f["note"]
    assert "squatter" not in _vms(cli)


def test_adopt_refuses_with_reasons(cli: Cli, conn: Any) -> None:
    fleet(cli)
    conn.defineXML(foreign_xml("legacy", [4, 5]))
    doc = cli("reconcile", "--adopt", "--yes", "--json").json()
    notes = {name: fs[0]["note"] for name, fs in findings(doc).items()}
    assert notes == {
        "legacy": "not adoptable: it carries no vnuma metadata naming its tenant; pass --tenant TENANT",
        "test": "not adoptable: it carries no vnuma metadata naming its tenant; pass --tenant TENANT",
    }
    doc = cli("reconcile", "--adopt", "--tenant", "acme", "--json").json()
    notes = {name: fs[0]["note"] for name, fs in findings(doc).items()}
    assert notes["test"] == "not adoptable: vCPU 0 is not pinned (vnuma records pinned domains only)"
    assert notes["legacy"].startswith("would adopt it for tenant 'acme'")
    assert _vms(cli) == {}


def test_a_copied_domain_names_the_vm_its_metadata_belongs_to(cli: Cli, without_stock: Any) -> None:
    fleet(cli, ("vm1", "defined"))
    xml = without_stock.lookupByName("vm1").XMLDesc(INACTIVE)
    copy = re.sub(r"<uuid>[^<]*</uuid>", "", xml).replace("<name>vm1</name>", "<name>copy</name>")
    without_stock.defineXML(copy)
    (f,) = findings(cli("reconcile", "--json").json())["copy"]
    assert f["drift"] == "unknown"
    assert "vnuma metadata names VM 'vm1' of tenant 'acme' on host 'h1'" in f["detail"]
    assert "the inventory has VM 'vm1' on host 'h1' (defined)" in f["detail"]


def test_unknown_host_and_tenant_exit_3(cli: Cli, conn: Any) -> None:
    fleet(cli)
    res = cli("reconcile", "nope")
    assert (res.exit_code, res.stderr.splitlines()[0]) == (3, "error: host 'nope' is not in the inventory")
    res = cli("reconcile", "--adopt", "--tenant", "ghost")
    assert res.exit_code == 3 and "ghost" in res.stderr


def test_hosts_from_files_are_skipped_or_refused_by_name(cli: Cli, without_stock: Any) -> None:
    fleet(cli)
    caps = REPO / "tests" / "data" / "capabilities" / "laptop-1cell-minimal.xml"
    cli.ok("host", "import", "filed", "--capabilities", str(caps))
    doc = cli.ok("reconcile", "--json").json()
    assert [(h["host"], h["status"]) for h in doc["hosts"]] == [("filed", "skipped"), ("h1", "checked")]
    res = cli("reconcile", "filed")
    assert res.exit_code == 4 and "has no libvirt URI" in res.stderr
    assert URI in cli.ok("reconcile").stdout


def test_an_action_is_checked_again_before_it_runs(cli: Cli, without_stock: Any) -> None:
    """The report an operator confirms may be stale: a domain that came back keeps its claims."""
    from vnuma.services import Settings
    from vnuma.services.reconcile_apply import carry_out
    from vnuma.services.reconciling import Outcome, check

    fleet(cli, ("vm1", "defined"), ("vm2", "running"))
    xml = without_stock.lookupByName("vm1").XMLDesc(INACTIVE)
    without_stock.lookupByName("vm1").undefine()
    without_stock.lookupByName("vm2").destroy()
    settings = Settings(db_url=f"sqlite:///{cli.db}")
    report = check(settings)
    assert report.proposed == 2
    without_stock.defineXML(xml)
    without_stock.lookupByName("vm2").create()
    done = {f.name: (f.outcome, f.note) for f in carry_out(settings, report).findings}
    assert done == {
        "vm1": (Outcome.SKIPPED, "left alone: the domain reappeared since the check"),
        "vm2": (Outcome.SKIPPED, "left alone: libvirt's state changed to running since the check"),
    }
    assert _states(cli) == {"vm1": "defined", "vm2": "running"}
    assert cli("reconcile").exit_code == 0
