"""``vnuma vm migrate --live`` between two real libvirtd instances on this machine.

The destination is the peer daemon scripts/test starts in its own mount
namespace (its own state directories, socket, host UUID and cgroup subtree):
libvirt takes it for another host and QEMU migrates the running TCG guest
over TCP. The VM's pCPU is reserved on the peer first, so the
destination XML (rendered from the new placement) must re-pin it: after
the move its QEMU threads' affinity, its memory binding and its cgroup are
read from /proc, the host side.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.integration.conftest import SYSTEM_URI, remove_domain, virsh
from tests.integration.test_daemon_e2e import _qemu_pid, _vcpu_threads

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]

MEM = ("--vcpus", "1", "--memory", "128MiB", "--page-size", "4K")


def _allowed(pid: int) -> str:
    match = re.search(r"^Cpus_allowed_list:\s*(\S+)", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert match
    return match.group(1)


def test_a_running_guest_migrates_live_to_another_libvirtd_and_is_pinned_there(
    libvirtd: str, peer: tuple[str, Path], tmp_path: Path
) -> None:
    peer_uri, peer_dir = peer
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "src", "--uri", libvirtd)
    cli.ok("host", "add", "peer", "--uri", peer_uri)
    cli.ok("tenant", "create", "mig")
    name = f"vnuma-mig-{os.getpid()}"
    try:
        placed = cli.ok("place", "mig", *MEM, "--host", "src", "--name", name, "--json").json()
        old_cpu = placed["cells"][0]["pcpus"][0]
        cli.ok("apply", name, "--start", "--domain-type", "qemu")
        src_pid = _qemu_pid(name)
        assert _vcpu_threads(src_pid) == {0: str(old_cpu)}
        # The same pCPU on the peer is kept for the host: the migrated guest must land on another one.
        cli.ok("host", "reserve", "peer", "--cpus", str(old_cpu))

        doc = cli.ok("vm", "migrate", name, "--to", "peer", "--live", "--json").json()
        assert [(s["kind"], s["status"]) for s in doc["run"]["steps"]] == [("migrate", "done")], doc
        new = cli.ok("vm", "show", name, "--json").json()
        assert (new["host"], new["state"]) == ("peer", "running")
        new_cpu, emulator = new["cells"][0]["pcpus"][0], new["emulator_pcpus"]
        assert new_cpu != old_cpu

        assert name not in virsh("list", "--all", "--name").split(), "still defined on the source"
        assert virsh("domstate", name, uri=peer_uri).strip() == "running"
        pid = int((peer_dir / "run" / "qemu" / f"{name}.pid").read_text())
        assert pid != src_pid and not Path(f"/proc/{src_pid}").exists()
        assert _vcpu_threads(pid) == {0: str(new_cpu)}
        assert _allowed(pid) == ",".join(str(c) for c in emulator)  # the emulator (main) thread
        maps = Path(f"/proc/{pid}/numa_maps").read_text()
        assert re.search(r"\bbind:0\b", maps), "guest memory is not bound to host node 0"
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        assert re.search(r":cpuset:/vnuma-peer/machine/", cgroups), cgroups
        # The persistent definition on the peer is the destination XML: pinned to the new pCPU.
        assert re.search(rf"^\s*0\s+{new_cpu}\s*$", virsh("vcpupin", name, "--config", uri=peer_uri), re.M)
        cli.ok("reconcile")
    finally:
        for uri in (SYSTEM_URI, peer_uri):
            remove_domain(uri, name)


def test_apply_keeps_the_uuid_of_a_domain_libvirt_already_holds(libvirtd: str, tmp_path: Path) -> None:
    """A domain defined earlier under another UUID (by an older vnuma, or adopted) keeps it when re-applied."""
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "src", "--uri", libvirtd)
    cli.ok("tenant", "create", "mig")
    name = f"vnuma-uuid-{os.getpid()}"
    held = "0f0e0d0c-0b0a-4908-8706-050403020100"
    try:
        cli.ok("place", "mig", *MEM, "--name", name)
        xml = cli.ok("render", name, "--domain-type", "qemu").stdout
        assert held not in xml
        (tmp_path / "old.xml").write_text(re.sub(r"<uuid>[^<]*</uuid>", f"<uuid>{held}</uuid>", xml))
        virsh("define", str(tmp_path / "old.xml"))
        cli.ok("apply", name, "--domain-type", "qemu")
        assert virsh("domuuid", name).strip() == held
    finally:
        remove_domain(SYSTEM_URI, name)
