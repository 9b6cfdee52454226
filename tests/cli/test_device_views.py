"""Tainted and cleaning devices in the views: ``host show``, ``stats``, the host picture, ``capacity``,
``simulate --from-inventory`` and traces show them as such and never count them free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

SMALL = ("--vcpus", "4", "--memory", "4GiB")
SHAPE = "vcpus=1,memory=1GiB,gpus=1"


@pytest.fixture
def marked(demo_pair: Cli) -> Cli:
    """Host a with one GPU tainted and one cleaning (released by a VM on a host set to clean)."""
    demo_pair.ok("host", "set", "a", "--after-release", "clean")
    demo_pair.ok("place", "x", *SMALL, "--gpus", "1", "--host", "a", "--name", "v")
    demo_pair.ok("vm", "release", "v")
    demo_pair.ok("device", "taint", "a", "0000:27:00.0", "--reason", "Xid 48")
    return demo_pair


def _request(i: int) -> dict[str, object]:
    return {"name": f"r{i}", "tenant": "x", "vcpus": 1, "memory_mib": 1024, "numa_nodes": 1,
            "cpu_policy": "dedicated", "thread_policy": "prefer", "page_size_kib": 1048576, "gpus": 1}


def _fit(cli: Cli, *args: str) -> int:
    return int(cli.ok("capacity", SHAPE, "--json", *args).json()["fits"])


def test_host_show_and_stats_show_them_as_such(marked: Cli) -> None:
    shown = marked.ok("host", "show", "a").stdout
    assert "device states (tainted and cleaning devices take no new claims; after release: clean)" in shown
    assert "0000:17:00.0  cleaning  released by VM 'v'" in shown
    assert "0000:27:00.0  tainted   Xid 48" in shown
    doc = marked.ok("host", "show", "a", "--json").json()
    states = {d["address"]: d["state"] for d in doc["device_states"]["devices"]}
    assert states == {"0000:17:00.0": "cleaning", "0000:27:00.0": "tainted"}
    cells = marked.ok("stats", "--host", "a", "--json").json()["hosts"][0]["cells"]
    assert cells[0]["gpus"] == {"total": 2, "free": 0, "tainted": 1, "cleaning": 1, "idle_blocked": 2}
    assert "0/2 (1 tainted, 1 cleaning)" in marked.ok("stats", "--host", "a").stdout


def test_the_host_picture_draws_them_as_such(marked: Cli, tmp_path: Path) -> None:
    svg = tmp_path / "a.svg"
    marked.ok("host", "show", "a", "--svg", str(svg))
    text = svg.read_text()
    assert "0000:27:00.0 (0x10de:0x2331): tainted (Xid 48)" in text
    assert "0000:17:00.0 (0x10de:0x2331): cleaning (released by VM &#x27;v&#x27;)" in text or \
        "0000:17:00.0 (0x10de:0x2331): cleaning (released by VM 'v')" in text


def test_the_fleet_picture_draws_them_as_such(marked: Cli, tmp_path: Path) -> None:
    from lxml import etree

    svg = tmp_path / "fleet.svg"
    marked.ok("stats", "--svg", str(svg))
    root = etree.parse(str(svg)).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    squares = {el.get("id"): el.get("class") for el in root.iterfind(".//s:rect", ns)
               if "-gpu-" in (el.get("id") or "")}
    row_a = sorted(str(c) for i, c in squares.items() if i.startswith("row-0-cell-0-"))
    assert row_a == ["cleaning", "tainted"]  # host a's cell 0: both GPUs, neither free nor claimed
    assert "cell 0: GPU 1 of 2: tainted" in svg.read_text()


def test_capacity_and_a_replay_on_the_inventory_do_not_count_them(marked: Cli, tmp_path: Path) -> None:
    assert _fit(marked, "--host", "a") == 6
    assert _fit(marked, "--host", "b") == 8
    trace = tmp_path / "eight.json"
    doc = {"format": "numa-placement-trace", "version": 1, "scenario": "s", "seed": None, "description": "",
           "hosts": [], "requests": [_request(i)
                                     for i in range(16)]}
    trace.write_text(json.dumps(doc))
    report = marked.ok("simulate", str(trace), "--from-inventory", "--json").json()
    assert report["placed"] == 14


def test_a_trace_carries_the_device_states_and_a_replay_keeps_off_them(marked: Cli, tmp_path: Path) -> None:
    whole = marked.ok("trace", "export", "--with-vms").json()
    a = next(h for h in whole["hosts"] if h["name"] == "a")
    assert a["device_states"] == {"tainted": {"0000:27:00.0": "Xid 48"}, "cleaning": ["0000:17:00.0"]}
    whole["requests"] = [_request(i)
                         for i in range(16)]
    path = tmp_path / "whole.json"
    path.write_text(json.dumps(whole))
    assert marked.ok("simulate", str(path), "--json").json()["placed"] == 14
    now = marked.ok("trace", "export").json()
    a_now = next(h for h in now["hosts"] if h["name"] == "a")
    assert "device_states" not in a_now
    assert sum(len(c["gpus"]) for c in a_now["cells"]) == 6
