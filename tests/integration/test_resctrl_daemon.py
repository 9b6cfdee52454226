"""A cache slice on a real libvirtd that cannot give it: libvirt's refusal is one clear vnuma error (exit 8),
and the VM's state and claims stay as they were.

The inventory is told the host has CAT and MBA (its own capabilities with an L3 bank and a bandwidth domain
added, as `host add --capabilities` takes them), so vnuma places and renders the slice. The test machine
runs TCG guests, and libvirt (9.0) refuses a ``<cachetune>`` in a non-KVM domain when it is defined ("cachetune
is only supported for KVM domains"); a KVM host without /sys/fs/resctrl would refuse it at start instead.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.integration.conftest import remove_domain, virsh
from vnuma.sources.capabilities import parse_capabilities
from vnuma.topology import format_cpuset

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]


def _with_resctrl(capabilities: str) -> str:
    cpus = format_cpuset(parse_capabilities(capabilities.encode(), name="local").cpu_ids)
    bare = re.sub(r"<cache>.*?</cache>|<memory_bandwidth>.*?</memory_bandwidth>", "", capabilities, flags=re.S)
    added = (
        f"<cache><bank id='0' level='3' type='both' size='16' unit='MiB' cpus='{cpus}'>"
        "<control granularity='1' unit='MiB' type='both' maxAllocs='16'/></bank></cache>"
        f"<memory_bandwidth><node id='0' cpus='{cpus}'><control granularity='10' min='10' maxAllocs='8'/></node>"
        "</memory_bandwidth>"
    )
    return bare.replace("</topology>", "</topology>" + added, 1)


def test_libvirts_refusal_of_a_slice_is_one_clear_error_and_changes_nothing(libvirtd: str, tmp_path: Path) -> None:
    caps = tmp_path / "caps.xml"
    caps.write_text(_with_resctrl(virsh("capabilities")))
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "local", "--uri", libvirtd, "--capabilities", str(caps))
    cli.ok("host", "reserve", "local", "--llc-ways", "2")
    cli.ok("tenant", "create", "e2e")
    name = f"vnuma-rdt-{os.getpid()}"
    placed = cli.ok("place", "e2e", "--vcpus", "1", "--memory", "128MiB", "--page-size", "4K", "--llc", "3MiB",
                    "--mem-bw", "20", "--name", name, "--json").json()
    assert placed["llc"] == [{"cache": 0, "ways": 3}] and placed["mem_bw"] == [{"domain": 0, "cap": 20}]
    try:
        applied = cli("apply", name, "--domain-type", "qemu", "--start")
        assert applied.exit_code == 8, applied.stderr
        lines = applied.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "cachetune" in lines[0], applied.stderr
        assert cli.ok("vm", "show", name, "--json").json()["state"] == "placed"
        with sqlite3.connect(cli.db) as conn:
            held = conn.execute("SELECT domain_id, ways, mem_bw FROM resctrl_claims").fetchall()
        assert held == [(0, 3, 20)]
        assert name not in virsh("list", "--all", "--name").split()
    finally:
        remove_domain(libvirtd, name)
    cli.ok("vm", "release", name)
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM resctrl_claims").fetchone() == (0,)
