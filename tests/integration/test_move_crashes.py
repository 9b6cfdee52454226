"""``vnuma vm migrate`` and ``vnuma host drain`` killed with SIGKILL at each journaled step, between two libvirtds.

The source is this machine's libvirtd, the destination the peer daemon
scripts/test starts (see tests/integration/test_live_migration.py). Each
trial kills the command at one failpoint (:mod:`vnuma.services.failpoints`:
after the run is journaled, after a step's claims moved, after the domain
was defined on the destination, after libvirt finished a step) or, for a
live migration, while QEMU is migrating (the incoming domain already on the
peer). After every kill:

- the inventory holds each VM exactly once, on its old or its new host, with
  exactly the claims that placement implies (never both, never neither);
- libvirt holds each domain on at least one of the two daemons;
- ``vnuma reconcile`` reads both daemons and finds each VM where the
  inventory records it; what libvirt shows of a VM in flight elsewhere is
  named as the unfinished run's, and nothing is proposed;
- ``vnuma rebalance --resume`` ends where an uninterrupted run ends: every
  VM on the peer only, pinned as its new placement says, and a clean reconcile.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli
from tests.concurrency.consistency import inconsistencies
from tests.integration.conftest import SYSTEM_URI, remove_domain, virsh
from tests.integration.test_daemon_e2e import _vcpu_threads

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]

MEM = ("--vcpus", "1", "--memory", "64MiB", "--page-size", "4K")


def _names(uri: str, *flags: str) -> set[str]:
    return set(virsh("list", "--name", *flags, uri=uri).split())


def _remove_everywhere(peer_uri: str, prefix: str) -> None:
    for uri in (SYSTEM_URI, peer_uri):
        for name in _names(uri, "--all"):
            if name.startswith(prefix):
                remove_domain(uri, name)


def _unfinished(db: Path) -> bool:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT count(*) FROM rebalance_runs WHERE unfinished").fetchone()[0] > 0


def _setup(tmp_path: Path, peer_uri: str, prefix: str, vms: int, *, start: bool) -> Cli:
    cli = Cli(tmp_path / f"{prefix}inventory.db")
    cli.ok("host", "add", "src", "--uri", SYSTEM_URI)
    cli.ok("host", "add", "peer", "--uri", peer_uri)
    cli.ok("tenant", "create", "t")
    for i in range(vms):
        cli.ok("place", "t", *MEM, "--host", "src", "--name", f"{prefix}{i}")
        cli.ok("apply", f"{prefix}{i}", "--domain-type", "qemu", *(["--start"] if start else []))
    return cli


def _command(cli: Cli, argv: list[str], failpoint: str | None) -> subprocess.Popen[str]:
    env = {**os.environ, **({"VNUMA_FAILPOINT": failpoint} if failpoint else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "vnuma.cli", *cli.options, *argv],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def _after_kill(cli: Cli, peer_uri: str, vms: list[str]) -> int:
    """The inventory holds each VM once (old or new host, exact claims); libvirt holds it somewhere.

    Returns how many reconcile findings named the unfinished run."""
    assert inconsistencies(f"sqlite:///{cli.db}") == []
    listed = {row["vm"]: row["host"] for row in cli.ok("vm", "list", "--json").json()}
    assert sorted(listed) == sorted(vms)
    assert set(listed.values()) <= {"src", "peer"}
    for vm in vms:
        assert vm in _names(SYSTEM_URI, "--all") | _names(peer_uri, "--all"), f"{vm}: no libvirt holds it"
    # reconcile reads both daemons: a VM the run is moving is found where the inventory records it,
    # and whatever libvirt shows of it elsewhere is named as the run's, with nothing proposed.
    res = cli("reconcile", "--json")
    assert res.exit_code in (0, 9), res.stderr
    named = 0
    for h in res.json()["hosts"]:
        assert h["status"] == "checked", h
        for f in h["findings"]:
            if f["name"] in vms:
                assert _unfinished(cli.db), f
                assert f["action"] == "none" and "rebalance run" in f["note"], f
                named += 1
    return named


def _resumed(cli: Cli) -> None:
    if _unfinished(cli.db):
        cli.ok("rebalance", "--resume")
    assert not _unfinished(cli.db)


def test_migrate_killed_at_each_step_resumes_to_the_guest_running_pinned_on_the_peer(
    peer: tuple[str, Path], tmp_path: Path
) -> None:
    peer_uri, peer_dir = peer
    base = f"vkm{os.getpid()}-"
    points = ["run-opened", "step-started", "migrating", "libvirt-done"]
    named = 0
    try:
        for i, point in enumerate(points):
            prefix = f"{base}{i}-"
            vm = f"{prefix}0"
            cli = _setup(tmp_path, peer_uri, prefix, 1, start=True)
            argv = ["vm", "migrate", vm, "--to", "peer", "--live"]
            proc = _command(cli, argv, None if point == "migrating" else point)
            if point == "migrating":  # the incoming domain exists on the peer: QEMU is copying memory
                deadline = time.monotonic() + 60
                while vm not in _names(peer_uri) and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=120)
            assert proc.returncode == -signal.SIGKILL, f"{point}: not killed ({proc.returncode}): {proc.stderr}"
            named += _after_kill(cli, peer_uri, [vm])
            _wait_settled(peer_uri, vm)
            _resumed(cli)
            shown = cli.ok("vm", "show", vm, "--json").json()
            assert (shown["host"], shown["state"]) == ("peer", "running"), point
            assert vm not in _names(SYSTEM_URI, "--all") and vm in _names(peer_uri), point
            pid = int((peer_dir / "run" / "qemu" / f"{vm}.pid").read_text())
            assert _vcpu_threads(pid) == {0: str(shown["cells"][0]["pcpus"][0])}, point
            assert cli("reconcile").exit_code == 0, point
            _remove_everywhere(peer_uri, prefix)
        assert named > 0, "no kill left a VM in flight"
    finally:
        _remove_everywhere(peer_uri, base)


def _wait_settled(peer_uri: str, vm: str) -> None:
    """After a client died mid-migration, libvirt cancels it: wait until the domain runs on one side only."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        here, there = vm in _names(SYSTEM_URI), vm in _names(peer_uri)
        if here != there:
            return
        time.sleep(0.1)
    pytest.fail(f"{vm}: running on both daemons a minute after the kill")


def test_drain_killed_at_each_step_resumes_to_every_vm_on_the_peer(
    peer: tuple[str, Path], tmp_path: Path
) -> None:
    peer_uri, _ = peer
    base = f"vkd{os.getpid()}-"
    points = ["run-opened"] + [f"{p}:{n}" for n in (1, 2) for p in ("step-started", "defined-there", "libvirt-done")]
    named = 0
    try:
        for i, point in enumerate(points):
            prefix = f"{base}{i}-"
            vms = [f"{prefix}0", f"{prefix}1"]
            cli = _setup(tmp_path, peer_uri, prefix, 2, start=False)
            proc = _command(cli, ["host", "drain", "src", "--apply", "--yes"], point)
            proc.wait(timeout=120)
            assert proc.returncode == -signal.SIGKILL, f"{point}: not killed ({proc.returncode}): {proc.stderr}"
            named += _after_kill(cli, peer_uri, vms)
            _resumed(cli)
            for vm in vms:
                shown = cli.ok("vm", "show", vm, "--json").json()
                assert (shown["host"], shown["state"]) == ("peer", "defined"), point
                assert vm not in _names(SYSTEM_URI, "--all") and vm in _names(peer_uri, "--all"), point
                defined = virsh("dumpxml", vm, "--inactive", uri=peer_uri)
                pins = re.findall(r"<vcpupin vcpu='0' cpuset='(\d+)'/>", defined)
                assert pins == [str(shown["cells"][0]["pcpus"][0])], point
            assert cli("reconcile").exit_code == 0, point
            _remove_everywhere(peer_uri, prefix)
        assert named > 0, "no kill left a VM in flight"
    finally:
        _remove_everywhere(peer_uri, base)
