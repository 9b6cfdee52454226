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
from vnuma.placement.model import Objective
from vnuma.placement.rebalance import Move, Plan
from vnuma.services import Settings
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
        )
        move = Move(name, "local", before.host_cells, "local", after.host_cells, "test re-pin", 0, after)
        plan = Plan(Objective.LOCALITY, 1, 0, True, (move,))
        report = apply_plan(Settings(db_url=f"sqlite:///{cli.db}"), plan)
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
    """Four VMs split over both cells of a 2 x 8-CPU host, defined in libvirtd (not started)."""
    caps = tmp_path / "caps.xml"
    host = make_host(cells=2, cores_per_cell=8, smt=1, memory_gib=16, hugepages_2m_gib=0, hugepages_1g_gib=0)
    caps.write_text(capabilities_xml(host))
    cli = Cli(tmp_path / f"{prefix}inventory.db")
    cli.ok("host", "add", "fake", "--uri", libvirtd, "--capabilities", str(caps))
    cli.ok("tenant", "create", "t")
    for vm in SPLIT_VMS:
        name = prefix + vm
        cli.ok("place", "t", "--vcpus", "2", "--memory", "256MiB", "--page-size", "4K", "--numa-nodes", "2",
               "--name", name)
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
        [sys.executable, "-m", "vnuma.cli", "--db", str(cli.db), "rebalance", "--max-moves", "4", "--apply", "--yes"],
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
