"""Rebalance applied through a real libvirtd.

1. A running TCG guest re-pinned live: its QEMU vCPU and emulator threads'
   ``Cpus_allowed_list`` change, the guest keeps running, and its persistent
   definition follows.
2. ``vnuma rebalance --apply`` killed with SIGKILL at seeded points of its
   run, then ``--resume`` (or, when the kill came before the journal was
   written, ``--apply`` again), ends in the same inventory and the same
   libvirt definitions as an uninterrupted run. The host there is this
   machine's libvirtd with a made-up 2-cell topology (``--capabilities``);
   its domains are only defined, never started, since their pins name CPUs
   this machine does not have (libvirt checks those at start only).
3. Moves between hosts: this machine's libvirtd and the in-process test
   driver as the destination. A defined VM is undefined here and defined
   there (``move``); a running one needs --allow-migrate or --allow-restart;
   a migration libvirt cannot do (QEMU driver to test driver) fails the step
   and ``--abort`` leaves the guest running where it was; ``move-restart``
   stops it here and starts it there.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_host
from tests.cli.conftest import REPO, Cli
from tests.integration.conftest import virsh
from tests.integration.test_daemon_e2e import _qemu_pid, _vcpu_threads
from tests.sources.capswriter import capabilities_xml
from vnuma.codec import placement_from_dict
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance import Move, Plan
from vnuma.services import Settings
from vnuma.services.permits import granted
from vnuma.services.rebalance_apply import apply_plan

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]

SEED = 20261202
SPLIT_VMS = ("s1", "s2", "s3", "s4")


def _status_allowed(pid: int, tid: int | None = None) -> str:
    path = Path(f"/proc/{pid}/status") if tid is None else Path(f"/proc/{pid}/task/{tid}/status")
    match = re.search(r"^Cpus_allowed_list:\s*(\S+)", path.read_text(), re.M)
    assert match
    return match.group(1)


def _cleanup(prefix: str) -> None:
    for name in virsh("list", "--all", "--name").split():
        if name.startswith(prefix):
            if name in virsh("list", "--name").split():
                virsh("destroy", name)
            virsh("undefine", name)


def test_running_guest_is_repinned_live(libvirtd: str, tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.fail("this test needs 2 host CPUs")
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "local", "--uri", libvirtd)
    cli.ok("tenant", "create", "live")
    name = f"vnuma-live-{os.getpid()}"
    try:
        doc = cli.ok(
            "place", "live", "--vcpus", "1", "--memory", "128MiB", "--page-size", "4K", "--name", name, "--json"
        ).json()
        before = placement_from_dict(doc)
        cli.ok("apply", name, "--start", "--domain-type", "qemu")
        pid = _qemu_pid(name)
        old = before.cells[0].pcpus[0]
        assert _vcpu_threads(pid) == {0: str(old)}
        new = next(c for c in cpus if c != old and c in {cpu.id for cell in _host(cli).cells for cpu in cell.cpus})
        cell = before.cells[0]
        after = type(before)(
            before.vm, before.tenant, before.host,
            (type(cell)(cell.guest_cell, cell.host_cell, cell.vcpus, (new,), cell.memory_kib, cell.page_size_kib),),
            (new,), before.devices, before.cpu_policy, before.thread_policy, before.threads_per_core,
            request=before.request,
        )
        move = Move(name, "local", before.host_cells, "local", after.host_cells, "test re-pin", 0, after)
        plan = Plan(Objective.LOCALITY, 1, 0, True, (move,))
        report = apply_plan(Settings(db_url=f"sqlite:///{cli.db}"), plan, granted(False, False))
        assert [(s.kind, str(s.status)) for s in report.steps] == [("live", "done")]
        assert _qemu_pid(name) == pid, "the guest was restarted"
        assert _vcpu_threads(pid) == {0: str(new)}
        assert _status_allowed(pid) == str(new)  # the emulator (main) thread
        assert re.search(rf"^\s*0\s+{new}\s*$", virsh("vcpupin", name, "--config"), re.M)
        assert cli.ok("vm", "show", name, "--json").json()["state"] == "running"
        assert _shown(cli, name)[1].cells[0].pcpus == (new,)
    finally:
        _cleanup(name)


def _shown(cli: Cli, name: str) -> tuple[str, Any]:
    doc = cli.ok("vm", "show", name, "--json").json()
    state = doc.pop("state")
    return state, placement_from_dict(doc)


def _host(cli: Cli) -> Any:
    from vnuma.inventory import open_inventory

    with open_inventory(f"sqlite:///{cli.db}") as inv:
        return inv.get_host("local")


def _setup(tmp_path: Path, libvirtd: str, prefix: str) -> Cli:
    """Four VMs (placed with auto) split over both cells of a 2 x 8-CPU host, defined in libvirtd (not started)."""
    caps = tmp_path / "caps.xml"
    host = make_host(cells=2, cores_per_cell=8, smt=1, memory_gib=16, hugepages_2m_gib=0, hugepages_1g_gib=0)
    caps.write_text(capabilities_xml(host))
    cli = Cli(tmp_path / f"{prefix}inventory.db")
    cli.ok("host", "add", "fake", "--uri", libvirtd, "--capabilities", str(caps))
    cli.ok("tenant", "create", "t")
    mem = ("--memory", "256MiB", "--page-size", "4K")
    for i, vm in enumerate(SPLIT_VMS):
        # Fillers leave one free CPU per cell, so the VM (placed with auto, free to change its cell count
        # later) splits over both cells; then they go.
        fillers = [f"{prefix}fill{i}-{cell}" for cell in (0, 1)]
        for filler in fillers:
            cli.ok("place", "t", "--vcpus", str(7 - i), *mem, "--numa-nodes", "1", "--name", filler)
        name = prefix + vm
        placed = cli.ok("place", "t", "--vcpus", "2", *mem, "--name", name, "--json").json()
        assert len(placed["cells"]) == 2, placed
        for filler in fillers:
            cli.ok("vm", "release", filler)
        cli.ok("apply", name, "--domain-type", "qemu")
    return cli


def _final(cli: Cli, prefix: str) -> dict[str, Any]:
    """Per VM (prefix stripped): its cells and pCPUs in the inventory and the pins libvirt will boot it with."""
    out: dict[str, Any] = {}
    for vm in SPLIT_VMS:
        name = prefix + vm
        state, p = _shown(cli, name)
        xml = virsh("dumpxml", name, "--inactive")
        pins = re.findall(r"<vcpupin vcpu='(\d+)' cpuset='([^']+)'/>", xml)
        nodes = re.findall(r"<memnode cellid='(\d+)' mode='\w+' nodeset='([^']+)'/>", xml)
        out[vm] = (state, p.host_cells, [c.pcpus for c in p.cells], pins, nodes)
    return out


def _unfinished(db: Path) -> bool:
    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT count(*) FROM rebalance_runs WHERE unfinished").fetchone()[0] > 0
    finally:
        c.close()


def _steps_done(db: Path) -> int:
    c = sqlite3.connect(db, timeout=5)
    try:
        return int(c.execute("SELECT count(*) FROM rebalance_steps WHERE status = 'done'").fetchone()[0])
    except sqlite3.OperationalError:  # no such table yet / busy: nothing journaled yet
        return 0
    finally:
        c.close()


def _apply_process(cli: Cli) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vnuma.cli", *cli.options, "rebalance", "--max-moves", "4", "--apply", "--yes"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def test_sigkill_mid_apply_then_resume_ends_like_an_uninterrupted_run(libvirtd: str, tmp_path: Path) -> None:
    base = f"vk{os.getpid()}-"
    reference_prefix = base + "ref-"
    try:
        ref = _setup(tmp_path, libvirtd, reference_prefix)
        plan = ref.ok("rebalance", "--max-moves", "4", "--json").json()
        assert len(plan["moves"]) >= 3, plan
        ref.ok("rebalance", "--max-moves", "4", "--apply", "--yes")
        expected = _final(ref, reference_prefix)
        assert expected != {}
        rng = random.Random(SEED)
        # Kill after k steps are done (k = 0 kills while the first runs), then at random moments.
        triggers: list[tuple[str, float]] = [("steps", k) for k in range(len(plan["moves"]))]
        triggers += [("time", rng.uniform(0.2, 1.5)) for _ in range(3)]
        interrupted = 0
        for i, (how, value) in enumerate(triggers):
            prefix = f"{base}{i}-"
            cli = _setup(tmp_path, libvirtd, prefix)
            proc = _apply_process(cli)
            start = time.monotonic()
            while proc.poll() is None:
                if (how == "steps" and _steps_done(cli.db) >= value) or (
                    how == "time" and time.monotonic() - start >= value
                ):
                    proc.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.002)
            proc.wait(timeout=60)
            if _unfinished(cli.db):
                interrupted += 1
                cli.ok("rebalance", "--resume")
            elif proc.returncode != 0:  # killed before the journal was written: nothing happened
                cli.ok("rebalance", "--max-moves", "4", "--apply", "--yes")
            assert not _unfinished(cli.db)
            assert _final(cli, prefix) == expected, f"trial {i} ({how} {value})"
            _cleanup(prefix)
        assert interrupted >= len(plan["moves"]) - 1, "the kills did not land inside the apply"
    finally:
        _cleanup(base)


def _two_hosts(tmp_path: Path, libvirtd: str, name: str, *, start: bool) -> Cli:
    """Host "a" is this machine's libvirtd, host "b" the test driver with one 1-CPU cell.

    VM ``name`` (1 vCPU) sits on a; a 2-vCPU VM fits on a only once it leaves, and never on b.
    """
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "a", "--uri", libvirtd)
    cpus = sorted(int(c) for c in _host_cpus())
    if len(cpus) > 2:  # the scenario needs exactly two usable CPUs on a
        cli.ok("host", "reserve", "a", "--cpus", ",".join(map(str, cpus[2:])))
    caps = tmp_path / "b.xml"
    small = make_host(cells=1, cores_per_cell=1, smt=1, memory_gib=2, hugepages_2m_gib=0, hugepages_1g_gib=0)
    caps.write_text(capabilities_xml(small))
    cli.ok("host", "add", "b", "--uri", "test:///default", "--capabilities", str(caps))
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "1", "--memory", "64MiB", "--page-size", "4K", "--host", "a", "--name", name)
    cli.ok("apply", name, "--domain-type", "qemu", *(["--start"] if start else []))
    return cli


ROOM_2 = ["--make-room-for", "vcpus=2,memory=64MiB,page_size=4K,numa_nodes=1"]


def test_cold_move_undefines_on_the_source_and_defines_on_the_destination(
    libvirtd: str, conn: Any, tmp_path: Path
) -> None:
    name = f"vnuma-move-{os.getpid()}"
    try:
        cli = _two_hosts(tmp_path, libvirtd, name, start=False)
        doc = cli.ok("rebalance", *ROOM_2, "--apply", "--yes", "--json").json()
        (step,) = doc["run"]["steps"]
        assert (step["vm"], step["kind"], step["status"]) == (name, "move", "done")
        assert name not in virsh("list", "--all", "--name").split()
        moved = conn.lookupByName(name)
        assert not moved.isActive() and "<vcpupin vcpu='0' cpuset='0'/>" in moved.XMLDesc(0)
        state, placement = _shown(cli, name)
        assert (state, placement.host) == ("defined", "b")
    finally:
        _cleanup(name)


def test_running_vm_to_another_host_needs_permission_and_a_failed_migration_aborts_cleanly(
    libvirtd: str, conn: Any, tmp_path: Path
) -> None:
    name = f"vnuma-migr-{os.getpid()}"
    try:
        cli = _two_hosts(tmp_path, libvirtd, name, start=True)
        pid = _qemu_pid(name)
        refused = cli("rebalance", *ROOM_2, "--apply", "--yes")
        assert refused.exit_code == 9 and "--allow-migrate" in refused.stderr
        # libvirt cannot migrate from the QEMU driver to the test driver: the step fails in libvirt.
        failed = cli("rebalance", *ROOM_2, "--apply", "--yes", "--allow-migrate")
        assert failed.exit_code == 8 and "step 1" in failed.stderr
        assert _shown(cli, name)[1].host == "b"  # claims wait at the destination while the run is unfinished
        aborted = cli.ok("rebalance", "--abort", "--json").json()["run"]
        assert (aborted["status"], aborted["steps"][0]["status"]) == ("aborted", "undone")
        assert _shown(cli, name)[1].host == "a" and _qemu_pid(name) == pid
        # With a restart allowed instead, it is stopped here and started there.
        doc = cli.ok("rebalance", *ROOM_2, "--apply", "--yes", "--allow-restart", "--json").json()
        assert [s["kind"] for s in doc["run"]["steps"]] == ["move-restart"]
        assert name not in virsh("list", "--all", "--name").split()
        assert conn.lookupByName(name).isActive()
        state, placement = _shown(cli, name)
        assert (state, placement.host) == ("running", "b")
    finally:
        _cleanup(name)


def _host_cpus() -> list[str]:
    return re.findall(r"<cpu id='(\d+)'", virsh("capabilities"))
