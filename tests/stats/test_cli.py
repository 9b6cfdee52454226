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


def test_the_largest_free_block_names_the_pages_it_is_in(cli: Cli) -> None:
    """A laptop-like cell has 14.6 GiB in 4 KiB pages and 1 GiB of 2 MiB pages: its largest block is in 4 KiB
    pages, which the default page size (large) never places, and the table says so; the demo host's is in
    1 GiB pages."""
    from pathlib import Path

    caps = Path(__file__).resolve().parents[1] / "data" / "capabilities" / "laptop-1cell-minimal.xml"
    cli.ok("host", "import", "laptop", "--capabilities", str(caps))
    cli.ok("host", "add", "gpu-node-1", "--demo")
    doc = {h["host"]: h for h in cli.ok("stats", "--json").json()["hosts"]}
    assert {c["largest_free"]["page_size_kib"] for c in doc["laptop"]["cells"]} == {4}
    assert {c["largest_free"]["page_size_kib"] for c in doc["gpu-node-1"]["cells"]} == {1024**2}
    laptop = cli.ok("stats", "--host", "laptop").stdout
    demo = cli.ok("stats", "--host", "gpu-node-1").stdout
    assert " GiB of 4 KiB pages, 0 GPUs" in laptop and "of 1 GiB pages" not in laptop
    assert "160 GiB of 1 GiB pages, 2 GPUs" in demo
