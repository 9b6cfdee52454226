"""End to end on a real libvirtd: a TCG guest placed, applied and started by vnuma.

Verified from the host side, not from vnuma: the QEMU vCPU threads' allowed
CPUs, the guest RAM's NUMA binding and hugepages in /proc/PID/numa_maps, and
the host's free hugepage count.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.integration.conftest import virsh

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]


def _free_2m_pages() -> int:
    text = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").read_text()
    return int(text)


def _qemu_pid(name: str) -> int:
    return int(Path(f"/run/libvirt/qemu/{name}.pid").read_text().strip())


def _vcpu_threads(pid: int) -> dict[int, str]:
    """vCPU index -> Cpus_allowed_list of its QEMU thread (``CPU n/TCG`` or ``CPU n/KVM``)."""
    out: dict[int, str] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        match = re.match(r"CPU (\d+)/(TCG|KVM)", (task / "comm").read_text().strip())
        if match:
            status = (task / "status").read_text()
            allowed = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M)
            assert allowed
            out[int(match.group(1))] = allowed.group(1)
    return out


@pytest.fixture
def e2e(libvirtd: str, tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "local", "--uri", libvirtd)
    cli.ok("tenant", "create", "e2e")
    return cli


def test_placed_guest_runs_where_vnuma_put_it(e2e: Cli) -> None:
    name = f"vnuma-e2e-{os.getpid()}"
    host = e2e.ok("host", "show", "local", "--json").json()
    node = host["cells"][0]["id"]
    free_before = _free_2m_pages()
    if free_before < 64:
        pytest.fail(f"need 64 free 2 MiB hugepages, the host has {free_before} (scripts/test reserves 128)")
    placed = e2e.ok(
        "place", "e2e", "--vcpus", "2", "--memory", "128MiB", "--page-size", "2M", "--name", name, "--json"
    ).json()
    cell = placed["cells"][0]
    assert cell["host_cell"] == node and cell["page_size_kib"] == 2048
    try:
        assert e2e.ok("apply", name, "--start", "--domain-type", "qemu").stdout.strip().endswith("running")
        assert e2e.ok("vm", "show", name, "--json").json()["state"] == "running"
        pid = _qemu_pid(name)
        threads = _vcpu_threads(pid)
        assert threads == {v: str(p) for v, p in zip(cell["vcpus"], cell["pcpus"], strict=True)}
        maps = Path(f"/proc/{pid}/numa_maps").read_text().splitlines()
        ram = [line for line in maps if "huge" in line and "ram-node0" in line]
        assert ram, "guest RAM is not backed by hugetlbfs"
        assert f"bind:{node}" in ram[0] and f"N{node}=64" in ram[0]
        assert _free_2m_pages() == free_before - 64
        assert "strict" in virsh("numatune", name)
        e2e.ok("vm", "stop", name)
        assert e2e.ok("vm", "show", name, "--json").json()["state"] == "stopped"
        released = e2e("vm", "release", name)
        assert released.exit_code == 9 and "--undefine" in released.stderr
        e2e.ok("vm", "undefine", name)
        e2e.ok("vm", "release", name)
        assert _free_2m_pages() == free_before
        assert name not in virsh("list", "--all", "--name").split()
    finally:
        if name in virsh("list", "--name").split():
            virsh("destroy", name)
        if name in virsh("list", "--all", "--name").split():
            virsh("undefine", name)
