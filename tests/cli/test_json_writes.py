"""``--json`` on the write commands: each prints the object it created or changed, as the read commands print it."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli

pytestmark = pytest.mark.libvirt


def test_tenant_writes_print_the_tenant(demo_pair: Cli) -> None:
    made = demo_pair.ok("tenant", "create", "t", "--isolation", "cell", "--max-gpus", "4", "--json").json()
    assert made == {
        "name": "t", "isolation": "cell", "max_vcpus": None, "max_gpus": 4, "llc_kib": None, "llc_ways": None,
        "mem_bw": None,
    }
    changed = demo_pair.ok("tenant", "update", "t", "--max-vcpus", "64", "--json").json()
    assert (changed["max_vcpus"], changed["before"]["max_vcpus"], changed["max_gpus"]) == (64, None, 4)
    assert demo_pair.ok("tenant", "remove", "t", "--json").json() == {"name": "t", "removed": True}


def test_vm_writes_print_the_vm_as_vm_show_does(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--name", "v")
    applied = demo_pair.ok("apply", "v", "--json").json()
    assert applied == demo_pair.ok("vm", "show", "v", "--json").json() and applied["state"] == "defined"
    assert demo_pair.ok("apply", "v", "--dry-run", "--json").json()["vm"] == "v"
    assert demo_pair.ok("vm", "start", "v", "--json").json()["state"] == "running"
    assert demo_pair.ok("vm", "stop", "v", "--json").json()["state"] == "stopped"
    assert demo_pair.ok("vm", "undefine", "v", "--json").json()["state"] == "placed"
    shown = demo_pair.ok("vm", "show", "v", "--json").json()
    released = demo_pair.ok("vm", "release", "v", "--json").json()
    assert released == {**shown, "released": True}
    assert demo_pair("vm", "show", "v").exit_code == 3


def test_host_writes_print_the_host(demo_pair: Cli) -> None:
    reserved = demo_pair.ok("host", "reserve", "a", "--cpus", "0-1", "--json").json()
    assert reserved == demo_pair.ok("host", "show", "a", "--json").json() and reserved["reserved_cpus"] == [0, 1]
    assert demo_pair.ok("host", "cordon", "a", "--json").json() == {"name": "a", "cordoned": True, "changed": True}
    assert demo_pair.ok("host", "cordon", "a", "--json").json()["changed"] is False
    assert demo_pair.ok("host", "uncordon", "a", "--json").json() == {"name": "a", "cordoned": False, "changed": True}
    assert demo_pair.ok("host", "remove", "b", "--json").json() == {"name": "b", "removed": True}


def test_db_upgrade_prints_the_status_it_reached(cli: Cli) -> None:
    doc = cli.ok("db", "upgrade", "--json").json()
    assert doc == cli.ok("db", "status", "--json").json() and doc["up_to_date"] is True
