"""``vnuma stats``: JSON contract and the VM/host filters."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli

pytestmark = pytest.mark.libvirt


def test_stats_json_reports_cells_fragmentation_and_locality(cli: Cli) -> None:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--gpus", "1", "--name", "g1")
    cli.ok("place", "a", "--vcpus", "4", "--memory", "8GiB", "--name", "s1")
    doc = cli.ok("stats", "--json").json()
    assert set(doc) == {"hosts", "vms", "warnings"} and doc["warnings"] == []
    (host,) = doc["hosts"]
    claimed = sum(c["pcpus"]["claimed"] for c in host["cells"])
    vms = {v["vm"]: v for v in doc["vms"]}
    shown = {v["vm"]: v for v in cli.ok("vm", "list", "--json").json()}
    assert claimed == sum(len(c["pcpus"]) for v in shown.values() for c in v["cells"])
    assert [f["cells"] for f in host["fragmentation"]] == list(range(1, min(4, len(host["cells"])) + 1))
    assert vms["g1"]["devices_local"] == 1.0 and vms["s1"]["devices_local"] is None
    assert vms["g1"]["measured"] is None and vms["g1"]["bandwidth"] is None
    one = cli.ok("stats", "g1", "--json").json()
    assert [v["vm"] for v in one["vms"]] == ["g1"]
    assert cli.ok("stats").stdout.count("gpu-node-1") >= 1


def test_stats_unknown_vm_is_not_found(cli: Cli) -> None:
    res = cli("stats", "nope")
    assert res.exit_code == 3 and "nope" in res.stderr
