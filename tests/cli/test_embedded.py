"""The embedded hypervisor (libvirt's test driver on a node file) keeps its domains between commands.

Every command below is its own libvirt connection, as every ``vnuma`` process is: the test driver
forgets a node-file connection's domains when it closes, and vnuma restores them into the next.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libvirt
import pytest

from tests.builders import make_host
from tests.cli.conftest import Cli
from tests.sources.capswriter import capabilities_xml

pytestmark = pytest.mark.libvirt


@pytest.fixture
def demo(cli: Cli) -> Cli:
    """The demo host, tenant a and one placed 2-GPU VM ``llm``."""
    cli.ok("host", "add", "demo", "--demo")
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--gpus", "2", "--name", "llm")
    return cli


def _state(cli: Cli, vm: str) -> str:
    return str(cli.ok("vm", "show", vm, "--json").json()["state"])


def _kept(db: Path, host: str) -> Any:
    """The host's kept domains (``name``, ``xml``, ``running``) by name, None when nothing is kept."""
    con = sqlite3.connect(db)
    try:
        host_id, kept = con.execute("SELECT id, embedded_kept FROM hosts WHERE name = ?", (host,)).fetchone()
        rows = con.execute(
            "SELECT name, xml, running FROM embedded_domains WHERE host_id = ? ORDER BY name", (host_id,)
        ).fetchall()
    finally:
        con.close()
    return [{"name": n, "xml": x, "running": bool(r)} for n, x, r in rows] if kept else None


def _set_kept(db: Path, host: str, domains: list[dict[str, Any]]) -> None:
    """Keep exactly ``domains`` for the host (as if the commands had left them so)."""
    con = sqlite3.connect(db)
    with con:
        (host_id,) = con.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()
        con.execute("UPDATE hosts SET embedded_kept = 1 WHERE id = ?", (host_id,))
        con.execute("DELETE FROM embedded_domains WHERE host_id = ?", (host_id,))
        con.executemany(
            "INSERT INTO embedded_domains (host_id, name, xml, running) VALUES (?, ?, ?, ?)",
            [(host_id, d["name"], d["xml"], d["running"]) for d in domains],
        )
    con.close()


def test_apply_stop_start_reconcile_undefine_answer_as_on_a_real_hypervisor(demo: Cli) -> None:
    missing = demo("vm", "start", "llm")  # nothing defined yet
    assert missing.exit_code == 8 and "no domain named 'llm'" in missing.stderr and "vnuma apply" in missing.stderr
    assert _kept(demo.db, "demo") is None  # nothing applied yet: nothing kept
    demo.ok("apply", "llm")
    assert _state(demo, "llm") == "defined"
    assert [(d["name"], d["running"]) for d in _kept(demo.db, "demo")] == [("llm", False)]
    assert demo.ok("reconcile").stdout.strip() == "host demo (test:///vnuma-demo): in agreement"

    demo.ok("apply", "llm", "--start")
    assert _state(demo, "llm") == "running"
    dry = demo.ok("apply", "llm", "--dry-run").stdout
    assert "--- test:///vnuma-demo llm (libvirt)" in dry and "(not defined)" not in dry
    refused = demo("apply", "llm")  # a running domain's definition is not replaced
    assert refused.exit_code == 9 and "is running" in refused.stderr
    assert demo("reconcile").exit_code == 0

    demo.ok("vm", "stop", "llm")
    assert _state(demo, "llm") == "stopped"
    assert [(d["name"], d["running"]) for d in _kept(demo.db, "demo")] == [("llm", False)]
    assert demo("reconcile").exit_code == 0

    assert demo.ok("vm", "start", "llm").stdout == "VM llm: running\n"
    assert _state(demo, "llm") == "running" and _kept(demo.db, "demo")[0]["running"] is True
    assert demo("reconcile").exit_code == 0
    still = demo("vm", "release", "llm")
    assert still.exit_code == 9 and "still defined on demo" in still.stderr
    demo.ok("vm", "undefine", "llm")
    assert _state(demo, "llm") == "placed" and _kept(demo.db, "demo") == []
    assert demo("reconcile").exit_code == 0
    demo.ok("vm", "release", "llm")


def test_commands_that_only_read_write_nothing(demo: Cli, dumped: Callable[[Path], list[str]]) -> None:
    demo.ok("apply", "llm", "--start")
    before = dumped(demo.db)
    for args in (("reconcile",), ("stats",), ("apply", "llm", "--dry-run"), ("vm", "show", "llm")):
        demo.ok(*args)
        assert dumped(demo.db) == before, args


def test_the_kept_domains_are_the_hypervisors_truth(demo: Cli) -> None:
    """What the inventory keeps is what the next connection holds: a domain gone from it is missing."""
    demo.ok("apply", "llm")
    _set_kept(demo.db, "demo", [])
    res = demo("reconcile", "--json")
    assert res.exit_code == 9, res.stderr
    (finding,) = res.json()["hosts"][0]["findings"]
    assert (finding["name"], finding["drift"]) == ("llm", "missing")


def test_a_kept_definition_libvirt_refuses_is_refused_and_left_alone(
    demo: Cli, dumped: Callable[[Path], list[str]]
) -> None:
    demo.ok("apply", "llm")
    _set_kept(demo.db, "demo", [{"name": "llm", "xml": "<domain type='kvm'><name>llm</name>", "running": False}])
    before = dumped(demo.db)
    res = demo("vm", "stop", "llm")
    assert res.exit_code == 8, res.stderr
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert dumped(demo.db) == before


NODE_WITH_STOCK_DOMAIN = """<node>
  <cpu><mhz>2000</mhz><model>x86_64</model><active>8</active><nodes>1</nodes><sockets>1</sockets>
  <cores>4</cores><threads>2</threads></cpu>
  <memory unit='KiB'>16777216</memory>
  <domain type='test'><name>stock</name><memory>1048576</memory><os><type>hvm</type></os></domain>
</node>
"""


def test_a_domain_the_node_file_brings_is_kept_and_its_undefine_too(cli: Cli, tmp_path: Path) -> None:
    node, caps = tmp_path / "node.xml", tmp_path / "caps.xml"
    node.write_text(NODE_WITH_STOCK_DOMAIN)
    host = make_host("lab", cells=2, cores_per_cell=2, smt=2, memory_gib=16, hugepages_2m_gib=2, hugepages_1g_gib=8)
    caps.write_text(capabilities_xml(host))
    uri = f"test://{node}"
    cli.ok("host", "add", "lab", "--uri", uri, "--capabilities", str(caps))
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--name", "v1")
    cli.ok("apply", "v1")
    kept = {d["name"]: d["running"] for d in _kept(cli.db, "lab")}
    assert kept == {"stock": True, "v1": False}  # the node file's own domain runs, as the driver started it
    report = cli("reconcile", "--json").json()
    assert [(f["name"], f["drift"]) for f in report["hosts"][0]["findings"]] == [("stock", "unknown")]

    # Kept without "stock" (as if it had been undefined): the next connection undefines it too.
    _set_kept(cli.db, "lab", [d for d in _kept(cli.db, "lab") if d["name"] != "stock"])
    assert cli("reconcile").exit_code == 0
    # A fresh connection to the node file still brings it: vnuma's restore is what removes it.
    conn = libvirt.open(uri)
    try:
        assert "stock" in [d.name() for d in conn.listAllDomains()]
    finally:
        conn.close()


def test_the_first_hour_on_the_embedded_default(cli: Cli) -> None:
    """The README's commands in order, each answer agreeing with the step before."""
    from lxml import etree

    assert "added host demo" in cli.ok("host", "add", "demo", "--demo").stdout
    shown = cli.ok("host", "show", "demo", "--json").json()
    assert (len(shown["cells"]), shown["uri"]) == (4, "test:///vnuma-demo")
    cli.ok("tenant", "create", "tenant-a")
    placed = cli.ok("place", "tenant-a", "--gpus", "2", "--name", "tenant-a-llm", "--json").json()
    assert placed["host"] == "demo" and [d["kind"] for d in placed["devices"]] == ["gpu", "gpu"]
    domain = etree.fromstring(cli.ok("render", "tenant-a-llm").stdout.encode())
    assert domain.findtext("name") == "tenant-a-llm"
    assert len(domain.findall("cputune/vcpupin")) == sum(len(c["vcpus"]) for c in placed["cells"])
    assert cli.ok("apply", "tenant-a-llm").stdout == "VM tenant-a-llm: defined\n"
    assert cli.ok("vm", "start", "tenant-a-llm").stdout == "VM tenant-a-llm: running\n"
    assert cli.ok("vm", "stop", "tenant-a-llm").stdout == "VM tenant-a-llm: stopped\n"
    assert cli.ok("vm", "start", "tenant-a-llm").stdout == "VM tenant-a-llm: running\n"
    assert cli("reconcile").exit_code == 0
    plan = cli.ok("rebalance", "--json").json()
    assert (plan["objective"], plan["moves"]) == ("locality", [])  # one local VM: nothing to move
    (vm,) = cli.ok("stats", "--json").json()["vms"]
    assert (vm["vm"], vm["state"], vm["vcpus_local"], vm["devices_local"]) == ("tenant-a-llm", "running", 1.0, 1.0)
    assert cli.ok("vm", "undefine", "tenant-a-llm").stdout == "VM tenant-a-llm: placed\n"
    assert cli("reconcile").exit_code == 0
    cli.ok("vm", "release", "tenant-a-llm")
    assert cli.ok("vm", "list", "--json").json() == []
    assert cli.ok("stats", "--json").json()["vms"] == []


def test_the_demo_hosts_uri_is_the_demo_host(cli: Cli, tmp_path: Path) -> None:
    """``--uri test:///vnuma-demo`` (also on a --from-file line) adds what ``--demo`` adds, refreshed the same."""
    cli.ok("host", "add", "by-flag", "--demo")
    cli.ok("host", "add", "by-uri", "--uri", "test:///vnuma-demo")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("by-list test:///vnuma-demo\n")
    cli.ok("host", "add", "--from-file", str(hosts))
    shown = {n: cli.ok("host", "show", n, "--json").json() for n in ("by-flag", "by-uri", "by-list")}
    assert shown["by-uri"] == {**shown["by-flag"], "name": "by-uri"}
    assert shown["by-list"] == {**shown["by-flag"], "name": "by-list"}
    for name in shown:
        assert cli.ok("host", "refresh", name).stdout == f"host {name}: no change\n"


def test_the_test_driver_hint_says_what_the_driver_reports(cli: Cli, dumped: Callable[[Path], list[str]]) -> None:
    """test:///default has libvirt's 2 stock cells; a node file has none, and the refusal says exactly that."""
    from vnuma.sources.demo import demo_node_path

    cli.ok("host", "add", "stock", "--uri", "test:///default")
    assert len(cli.ok("host", "show", "stock", "--json").json()["cells"]) == 2
    before = dumped(cli.db)
    res = cli("host", "add", "nodefile", "--uri", f"test://{demo_node_path()}")
    assert res.exit_code == 4 and "no NUMA topology" in res.stderr
    assert res.stderr.splitlines()[-1] == (
        "hint: libvirt's test driver reports NUMA cells for test:///default (2 stock cells) and none for a node "
        "file: give the host's topology with --capabilities FILE (`virsh capabilities` of the real host), or add "
        "the demo host (vnuma host add NAME --demo)"
    )
    assert "never" not in res.stderr
    assert dumped(cli.db) == before
