"""``vnuma tenant``, ``vnuma place`` and ``vnuma vm``: contracts scripts rely on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

pytestmark = pytest.mark.libvirt

PLACE_KEYS = {"vm", "tenant", "host", "cells", "emulator_pcpus", "devices"}
CELL_KEYS = {"guest_cell", "host_cell", "vcpus", "pcpus", "memory_mib", "page_size_kib"}


@pytest.fixture
def demo(cli: Cli) -> Cli:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "tenant-a")
    return cli


def test_place_gpus_only_gets_the_gpus_share_of_their_cell(demo: Cli) -> None:
    placed = demo.ok("place", "tenant-a", "--gpus", "2", "--name", "llm-1", "--json").json()
    assert placed.keys() >= PLACE_KEYS
    assert (placed["vm"], placed["tenant"], placed["host"]) == ("llm-1", "tenant-a", "gpu-node-1")
    assert len(placed["cells"]) == 1
    cell = placed["cells"][0]
    assert cell.keys() >= CELL_KEYS
    # The demo cell: 32 pCPUs and 2 GPUs -> 2 GPUs take the whole cell's share.
    assert len(cell["vcpus"]) == len(cell["pcpus"]) == 32
    gpus = [d for d in placed["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == 2 and {d["guest_cell"] for d in gpus} == {0}
    host = demo.ok("host", "show", "gpu-node-1", "--json").json()
    gpu_cells = {d["address"]: d["numa_node"] for d in host["devices"]}
    assert {gpu_cells[d["address"]] for d in gpus} == {cell["host_cell"]}
    shown = demo.ok("vm", "show", "llm-1", "--json").json()
    assert shown["state"] == "placed"
    assert {k: shown[k] for k in PLACE_KEYS} == {k: placed[k] for k in PLACE_KEYS}


def test_two_placements_never_share_a_pcpu_or_gpu(demo: Cli) -> None:
    a = demo.ok("place", "tenant-a", "--gpus", "1", "--json").json()
    b = demo.ok("place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--json").json()
    c = demo.ok("place", "tenant-a", "--gpus", "2", "--json").json()
    pcpus = [p for vm in (a, b, c) for cell in vm["cells"] for p in cell["pcpus"]]
    assert len(pcpus) == len(set(pcpus))
    gpus = [d["address"] for vm in (a, b, c) for d in vm["devices"]]
    assert len(gpus) == len(set(gpus))
    names = [v["vm"] for v in demo.ok("vm", "list", "--json").json()]
    assert sorted(names) == sorted([a["vm"], b["vm"], c["vm"]])


def test_dry_run_claims_nothing(demo: Cli, dumped: Callable[[Path], list[str]]) -> None:
    before = dumped(demo.db)
    demo.ok("place", "tenant-a", "--gpus", "2", "--dry-run", "--json")
    assert dumped(demo.db) == before


def test_no_fit_is_exit_5_with_json_rejections(demo: Cli, dumped: Callable[[Path], list[str]]) -> None:
    before = dumped(demo.db)
    res = demo.process("place", "tenant-a", "--vcpus", "512", "--memory", "8GiB", "--name", "huge", "--json")
    assert res.exit_code == 5
    assert "huge" in res.stderr.splitlines()[0]
    import json

    body = json.loads(res.stdout)
    assert body["error"] and body["rejections"][0]["host"] == "gpu-node-1"
    assert body["rejections"][0]["reason"]
    assert dumped(demo.db) == before


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["place", "nobody", "--vcpus", "2", "--memory", "4GiB"], 3, "vnuma tenant create nobody"),
        (["place", "tenant-a", "--vcpus", "0", "--memory", "4GiB"], 4, "vCPU"),
        (["place", "tenant-a", "--vcpus", "2"], 4, "memory"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4"], 4, "unit"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "3MiB", "--page-size", "2M"], 4, "page"),
        (["place", "tenant-a", "--gpus", "99"], 4, "GPU"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--host", "nohost"], 3, "nohost"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--numa-nodes", "x"], 4, "numa-nodes"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--numa-nodes", "\u00b2"], 4, "numa-nodes"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--name", "a<b"], 4, "name"),
        (["vm", "show", "nope"], 3, "nope"),
        (["vm", "release", "nope"], 3, "nope"),
        (["tenant", "create", "tenant-a"], 9, "tenant-a"),
        (["place", "tenant-a", "--gpus", "-1"], 4, "GPU count -1 is negative"),
        (["place", "tenant-a", "--vcpus", "2", "--memory", "1.3GiB"], 4,
         "bad size '1.3GiB': 1363148.8 KiB is not a whole number of KiB"),
    ],
    ids=["unknown-tenant", "zero-vcpus", "no-memory", "no-unit", "not-whole-pages", "too-many-gpus",
         "unknown-host", "bad-numa-nodes", "superscript-numa-nodes", "bad-name", "unknown-vm", "release-unknown",
         "duplicate-tenant", "negative-gpus-alone", "fraction-of-a-kib"],
)
def test_bad_requests_exit_cleanly_and_write_nothing(
    demo: Cli, args: list[str], code: int, needle: str, dumped: Callable[[Path], list[str]]
) -> None:
    before = dumped(demo.db)
    res = demo.process(*args)
    assert res.exit_code == code, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert needle in res.stderr
    assert dumped(demo.db) == before


def test_a_fraction_of_a_unit_that_is_whole_kib_is_a_size(demo: Cli) -> None:
    placed = demo.ok("place", "tenant-a", "--vcpus", "2", "--memory", "1.5GiB", "--page-size", "2M", "--json")
    assert sum(c["memory_mib"] for c in placed.json()["cells"]) == 1536


def test_release_frees_claims_and_tenant_removal_waits_for_it(demo: Cli) -> None:
    first = demo.ok("place", "tenant-a", "--gpus", "2", "--name", "a1", "--json").json()
    res = demo("tenant", "remove", "tenant-a")
    assert res.exit_code == 9
    demo.ok("vm", "release", "a1")
    again = demo.ok("place", "tenant-a", "--gpus", "2", "--name", "a2", "--json").json()
    assert again["cells"][0]["pcpus"] == first["cells"][0]["pcpus"]
    demo.ok("vm", "release", "a2")
    demo.ok("tenant", "remove", "tenant-a")
    assert demo.ok("tenant", "list", "--json").json() == []


def test_tenant_quota_is_enforced(demo: Cli) -> None:
    demo.ok("tenant", "create", "small", "--max-gpus", "1")
    demo.ok("place", "small", "--gpus", "1")
    res = demo("place", "small", "--gpus", "1")
    assert res.exit_code != 0
    assert "quota" in res.stderr.lower()
    row = demo.ok("tenant", "show", "small", "--json").json()
    assert (row["gpus"], row["max_gpus"], row["vms"]) == (1, 1, 1)


def test_no_fit_names_the_generated_vm(demo: Cli) -> None:
    res = demo.process("place", "tenant-a", "--vcpus", "512", "--memory", "8GiB")
    assert res.exit_code == 5
    assert "'tenant-a-vm1'" in res.stderr.splitlines()[0]


def test_isolate_siblings_are_claimed_in_the_database(demo: Cli) -> None:
    import sqlite3

    placed = demo.ok(
        "place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--thread-policy", "isolate", "--json"
    ).json()
    pins = set(placed["cells"][0]["pcpus"])
    host = demo.ok("host", "show", "gpu-node-1", "--json").json()
    siblings = {s for cell in host["cells"] for cpu in cell["cpus"] if cpu["id"] in pins for s in cpu["siblings"]}
    assert len(siblings) == 4 and pins < siblings
    con = sqlite3.connect(demo.db)
    rows = con.execute("SELECT cpu_id FROM cpu_claims WHERE exclusive").fetchall()
    con.close()
    assert {r[0] for r in rows} == siblings
