"""``vnuma trace export`` and ``vnuma simulate --from-inventory``: the inventory as a trace (read back by the
trace loader), and a trace replayed on top of the inventory; nothing written either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli, refused_unchanged
from tests.dbdump import dump
from vnuma.sources.trace import load_trace

pytestmark = pytest.mark.libvirt

TRACE = REPO / "examples" / "traces" / "dual-socket-2cell.json"


@pytest.fixture
def busy(demo_pair: Cli) -> Cli:
    """demo_pair with a 2-GPU VM on a and a 2-cell VM of its own sizes on b."""
    demo_pair.ok("place", "x", "--gpus", "2", "--vcpus", "8", "--memory", "16GiB", "--host", "a", "--name", "g")
    demo_pair.ok("place", "x", "--cell-vcpus", "6,2", "--cell-memory", "6GiB,2GiB", "--page-size", "1G",
                 "--host", "b", "--name", "u")
    return demo_pair


def test_hosts_are_exported_as_they_are_now(busy: Cli, tmp_path: Path) -> None:
    before = dump(busy.db)
    text = busy.ok("trace", "export").stdout
    assert dump(busy.db) == before
    doc = json.loads(text)
    trace = load_trace(text.encode(), "export")  # the format's own loader accepts it
    assert [h.name for h in trace.hosts] == ["a", "b"] and doc["requests"] == []
    g = busy.ok("vm", "show", "g", "--json").json()
    cell = next(c for c in doc["hosts"][0]["cells"] if c["id"] == g["cells"][0]["host_cell"])
    assert not set(g["cells"][0]["pcpus"]) & set(cell["cpus"])  # held pCPUs are not free at the start
    assert not {d["address"] for d in g["devices"]} & set(cell["gpus"])
    pages = cell["hugepages"]["1048576"]
    assert pages["total"] - pages["free"] == 16
    assert "as they are now (2 VM(s))" in doc["description"]
    only_b = json.loads(busy.ok("trace", "export", "--hosts", "b").stdout)
    assert [h["name"] for h in only_b["hosts"]] == ["b"]


def test_with_vms_the_hosts_are_whole_and_the_vms_come_first(busy: Cli, tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    assert busy.ok("trace", "export", "--with-vms", "--out", str(out)).stdout.strip() == (
        f"wrote {out}: 2 hosts, 2 requests"
    )
    doc = json.loads(out.read_text())
    assert [(r["name"], r["vcpus"], r["gpus"], r["numa_nodes"]) for r in doc["requests"]] == [
        ("g", 8, 2, None), ("u", 8, 0, 2)
    ]
    # Each VM as it was asked: the guest cells of their own sizes too (version 1 has no key of its own for them).
    assert (doc["requests"][1]["cell_vcpus"], doc["requests"][1]["cell_memory"]) == ("6,2", "6GiB,2GiB")
    report = busy.ok("simulate", str(out), "--json").json()
    assert (report["placed"], report["requests"]) == (2, 2)


def test_a_trace_replayed_on_the_inventory_meets_its_vms(busy: Cli, tmp_path: Path) -> None:
    # The inventory's own hosts, whole, with a stream of 16-vCPU requests instead of its VMs.
    doc = json.loads(busy.ok("trace", "export", "--with-vms").stdout)
    doc["requests"] = [
        {"tenant": "t", "name": f"r{i}", "vcpus": 16, "memory_mib": 16384, "numa_nodes": 1,
         "cpu_policy": "dedicated", "thread_policy": "prefer", "page_size_kib": 1048576, "gpus": 0}
        for i in range(40)
    ]
    stream = tmp_path / "stream.json"
    stream.write_text(json.dumps(doc))
    before = dump(busy.db)
    alone = busy.ok("simulate", str(stream), "--json").json()
    on_top = busy.ok("simulate", str(stream), "--from-inventory", "--json").json()
    assert dump(busy.db) == before
    assert on_top["pcpus_total"] == alone["pcpus_total"] == 2 * 128
    assert 0 < on_top["placed"] < alone["placed"]  # the VMs already there take room
    other = busy.ok("simulate", str(TRACE), "--from-inventory", "--json").json()
    assert other["pcpus_total"] == 2 * 128  # a trace's own hosts are ignored


def test_bad_exports_and_replays_change_nothing(busy: Cli, tmp_path: Path) -> None:
    refused_unchanged(busy, ["trace", "export", "--hosts", "a,nosuch"], 3, "host 'nosuch' is not in the inventory")
    refused_unchanged(busy, ["trace", "export", "--out", str(tmp_path / "no" / "dir.json")], 4, "cannot write trace")
    clash = tmp_path / "clash.json"
    doc = json.loads(TRACE.read_text())
    doc["requests"][0]["name"] = "g"
    clash.write_text(json.dumps(doc))
    refused_unchanged(busy, ["simulate", str(clash), "--from-inventory"], 4, "trace VM name 'g' is also a VM")


def test_an_empty_inventory_has_nothing_to_export(cli: Cli) -> None:
    cli.ok("tenant", "create", "x")
    refused_unchanged(cli, ["trace", "export"], 4, "the inventory has no hosts to export")
