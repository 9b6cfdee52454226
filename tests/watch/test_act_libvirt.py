"""`vnuma watch --act apply` and `vnuma events apply` on hosts of libvirt's test driver: the recorded fleet's VMs
defined and running there, each move carried out through the hypervisor adapter (a re-pin that needs a stop and
start only with --allow-restart, a migration only with --allow-migrate), read back from libvirt's XML."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.stats.conftest import RESCTRL_CAPS
from tests.watch.conftest import FLEET, copy_rounds

libvirt = pytest.importorskip("libvirt")
pytestmark = pytest.mark.libvirt

URI = "test:///default"
VMS = (("a1", "tenant-a", "2", ("--mem-bw", "30"), "rdt", [0]), ("a2", "tenant-a", "2", (), "rdt", [0]),
       ("b1", "tenant-b", "2", (), "rdt", [0]), ("b2", "tenant-b", "4", (), "rdt", [1]),
       ("c1", "tenant-b", "2", (), "rdt2", [0]))


@pytest.fixture
def on_libvirt(cli: Cli, conn: Any) -> Cli:
    """The recorded fleet (:func:`tests.watch.conftest.make_fleet`'s hosts, tenants and VMs) with both hosts on
    ``test:///default`` and every VM defined and running there."""
    for host in ("rdt", "rdt2"):
        cli.ok("host", "add", host, "--uri", URI, "--capabilities", str(RESCTRL_CAPS))
        cli.ok("host", "reserve", host, "--llc-ways", "2")
    for tenant in ("tenant-a", "tenant-b"):
        cli.ok("tenant", "create", tenant)
    for name, tenant, vcpus, extra, host, cells in VMS:
        doc = cli.ok("place", tenant, "--vcpus", vcpus, "--memory", "2GiB", "--page-size", "2M", "--name", name,
                     "--llc-ways", "2", "--host", host, *extra, "--json").json()
        assert [c["host_cell"] for c in doc["cells"]] == cells  # as recorded
        cli.ok("apply", name, "--start")
    return cli


def _domain(conn: Any, vm: str, *, inactive: bool = False) -> tuple[list[int], str, bool]:
    """The vCPU pins, the memory nodeset and whether it runs, as libvirt has the domain now (``inactive``: as
    it boots next)."""
    dom = conn.lookupByName(vm)
    xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE if inactive else 0)
    pins = [int(p) for p in re.findall(r"<vcpupin vcpu='\d+' cpuset='(\d+)'/>", xml)]
    (nodeset,) = re.findall(r"<memory mode='\w+' nodeset='([^']+)'/>", xml)
    return pins, nodeset, bool(dom.isActive())


def _placed(cli: Cli, vm: str) -> tuple[str, list[int], str]:
    doc = cli.ok("vm", "show", vm, "--json").json()
    cells = doc["cells"]
    return doc["host"], [p for c in cells for p in c["pcpus"]], ",".join(str(c["host_cell"]) for c in cells)


def _steps(cli: Cli) -> list[tuple[str, str, str]]:
    """Each journaled step's VM, kind and status, in order."""
    with sqlite3.connect(cli.db) as db:
        return db.execute("SELECT vm, kind, status FROM rebalance_steps ORDER BY run_id, seq").fetchall()


def test_a_re_pin_that_needs_a_restart_waits_for_allow_restart(on_libvirt: Cli, conn: Any) -> None:
    before = _domain(conn, "b1")
    res = on_libvirt.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply")
    assert "proposal 1 for event 1 (noisy VM b1): re-pin b1 to rdt cells 1 (bandwidth)" in res.stdout
    assert ("warning: proposal 1 not carried out: VM 'b1' is running and cannot move from cells [0] to [1] live"
            in res.stderr)
    assert _domain(conn, "b1") == before  # libvirt untouched
    assert _placed(on_libvirt, "b1")[0::2] == ("rdt", "0")
    res = on_libvirt("events", "apply", "1")
    assert res.exit_code == 9 and "--allow-restart" in res.stderr  # the permit, not a libvirt failure
    assert _domain(conn, "b1") == before
    doc = on_libvirt.ok("events", "apply", "1", "--allow-restart", "--json").json()
    assert [(s["vm"], s["kind"], s["status"]) for s in doc["run"]["steps"]] == [("b1", "restart", "done")]
    host, pcpus, cells = _placed(on_libvirt, "b1")
    assert (host, cells) == ("rdt", "1")
    assert _domain(conn, "b1") == (pcpus, "1", True)  # stopped, defined on cell 1's CPUs and memory, started


def test_act_apply_with_allow_restart_re_pins_the_running_domain(on_libvirt: Cli, conn: Any) -> None:
    res = on_libvirt.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply", "--allow-restart")
    assert "proposal 1 applied: rebalance run 1 done" in res.stdout
    host, pcpus, cells = _placed(on_libvirt, "b1")
    assert (host, cells) == ("rdt", "1")
    assert _domain(conn, "b1") == (pcpus, "1", True)
    assert _steps(on_libvirt) == [("b1", "restart", "done")]


def test_a_migration_waits_for_allow_migrate(on_libvirt: Cli, conn: Any, tmp_path: Path) -> None:
    late = copy_rounds(tmp_path / "late", lambda s: s >= 16)  # b2 turns memory-bound; b1 no longer noisy
    before = _domain(conn, "b1")
    res = on_libvirt.ok("watch", "--domstats-dir", str(late), "--act", "apply")
    assert ("no move: migrate b1 to rdt2 cells 0 (bandwidth): no re-pin on rdt helps; migrating b1 to rdt2 "
            "needs --allow-migrate") in res.stdout
    assert _domain(conn, "b1") == before
    assert _placed(on_libvirt, "b1")[0] == "rdt"
    assert _steps(on_libvirt) == []


def test_act_apply_with_allow_migrate_moves_the_running_domain(on_libvirt: Cli, conn: Any, tmp_path: Path) -> None:
    late = copy_rounds(tmp_path / "late", lambda s: s >= 16)
    res = on_libvirt.ok("watch", "--domstats-dir", str(late), "--act", "apply", "--allow-migrate")
    assert "migrate b1 to rdt2 cells 0 (bandwidth)" in res.stdout and "applied: rebalance run 1 done" in res.stdout
    host, pcpus, cells = _placed(on_libvirt, "b1")
    assert (host, cells) == ("rdt2", "0")
    assert _steps(on_libvirt) == [("b1", "migrate", "done")]
    # both host names reach one test driver: the running domain is redefined there, to boot on rdt2's cell 0
    assert _domain(conn, "b1", inactive=True) == (pcpus, "0", True)


def test_a_proposal_refused_when_carried_out_counts_as_no_move(on_libvirt: Cli) -> None:
    """Refused for want of --allow-restart, a proposal changed nothing: it puts b1 into no cooldown, takes none
    of rdt's hour (b2's remote event is decided by the planners, not withheld by the hour), and is not proposed
    again; with the permit it is carried out still."""
    res = on_libvirt.ok("watch", "--domstats-dir", str(FLEET), "--act", "apply")
    assert "cooldown" not in res.stdout and "moves in the last hour" not in res.stdout
    events = on_libvirt.ok("events", "--json").json()
    actions = [(e["rule"], a["vm"], a["status"], a["reason"]) for e in events for a in e["actions"]]
    assert [(vm, status) for _, vm, status, _ in actions if status != "withheld"] == [("b1", "refused")]
    assert [reason for rule, _, _, reason in actions if rule == "remote"] == [
        "migrate b1 to rdt2 cells 0 (bandwidth): no re-pin on rdt helps; migrating b1 to rdt2 needs --allow-migrate"]
    doc = on_libvirt.ok("events", "apply", "1", "--allow-restart", "--json").json()
    assert [(s["vm"], s["status"]) for s in doc["run"]["steps"]] == [("b1", "done")]
