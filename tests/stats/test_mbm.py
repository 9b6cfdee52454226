"""Memory-bandwidth monitor figures: libvirt's flat stats keys, and what stats makes of a VM without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli.conftest import Cli
from vnuma.sources.mbm import NodeBandwidth, local_share, parse_memory_bandwidth

# As `virsh domstats --memory` prints it (libvirt's own example in the patch that added it).
RECORDED: dict[str, object] = {
    "memory.bandwidth.monitor.count": 2,
    "memory.bandwidth.monitor.0.name": "vcpus_0-4",
    "memory.bandwidth.monitor.0.vcpus": "0-4",
    "memory.bandwidth.monitor.0.node.count": 2,
    "memory.bandwidth.monitor.0.node.0.id": 0,
    "memory.bandwidth.monitor.0.node.0.bytes.total": 10208067584,
    "memory.bandwidth.monitor.0.node.0.bytes.local": 4807114752,
    "memory.bandwidth.monitor.0.node.1.id": 1,
    "memory.bandwidth.monitor.0.node.1.bytes.total": 8693735424,
    "memory.bandwidth.monitor.0.node.1.bytes.local": 5850161152,
    "memory.bandwidth.monitor.1.name": "vcpus_7",
    "memory.bandwidth.monitor.1.vcpus": "7",
    "memory.bandwidth.monitor.1.node.count": 2,
    "memory.bandwidth.monitor.1.node.0.id": 0,
    "memory.bandwidth.monitor.1.node.0.bytes.total": 853811200,
    "memory.bandwidth.monitor.1.node.0.bytes.local": 290701312,
    "memory.bandwidth.monitor.1.node.1.id": 1,
    "memory.bandwidth.monitor.1.node.1.bytes.total": 406044672,
    "memory.bandwidth.monitor.1.node.1.bytes.local": 229425152,
}


def test_recorded_stats_parse_into_monitors_and_a_local_share() -> None:
    first, second = parse_memory_bandwidth(RECORDED)
    assert (first.name, first.vcpus, second.vcpus) == ("vcpus_0-4", "0-4", "7")
    assert first.nodes == (NodeBandwidth(0, 4807114752, 10208067584), NodeBandwidth(1, 5850161152, 8693735424))
    local, total, share = local_share((first, second))
    assert local == 4807114752 + 5850161152 + 290701312 + 229425152
    assert total == 10208067584 + 8693735424 + 853811200 + 406044672
    assert share == pytest.approx(local / total)


def test_no_monitors_and_broken_keys_give_nothing_rather_than_an_error() -> None:
    assert parse_memory_bandwidth({}) == ()
    assert local_share(()) == (0, 0, None)
    broken = {
        **RECORDED,
        "memory.bandwidth.monitor.0.node.1.bytes.local": "many",
        "memory.bandwidth.monitor.1.node.count": -3,
    }
    first, second = parse_memory_bandwidth(broken)
    assert [n.node for n in first.nodes] == [0] and second.nodes == ()


@given(st.dictionaries(st.sampled_from(sorted(RECORDED)), st.one_of(st.integers(-5, 2**70), st.text(max_size=5))))
def test_any_values_parse_without_raising_and_the_share_stays_in_range(stats: dict[str, Any]) -> None:
    _local, _total, share = local_share(parse_memory_bandwidth(stats))
    assert share is None or 0.0 <= share <= 1.0


@pytest.mark.libvirt
def test_running_vm_without_monitors_reports_no_bandwidth(running: Cli) -> None:
    cli = running
    (vm,) = cli.ok("stats", "--json").json()["vms"]
    assert vm["state"] == "running" and vm["bandwidth"] is None
    assert "MBM LOCAL" in cli.ok("stats").stdout


@pytest.mark.libvirt
def test_unreachable_libvirt_is_a_warning_and_the_inventory_figures_still_show(running: Cli, tmp_path: Path) -> None:
    cli = running
    import sqlite3

    db = sqlite3.connect(cli.db)  # the host's libvirt goes away after it was recorded
    with db:
        db.execute("UPDATE hosts SET uri = ?", (f"test://{tmp_path}/gone.xml",))
    db.close()
    res = cli("stats", "--json")
    assert res.exit_code == 0
    doc = res.json()
    assert doc["vms"][0]["bandwidth"] is None and len(doc["warnings"]) == 1
    assert "host h: no memory-bandwidth figures" in res.stderr
