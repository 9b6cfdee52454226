"""`vnuma place --mig / --vgpu`: GPU partitions end to end: the JSON contract, the claims, render, a whole-GPU
VM kept off a partitioned GPU, release, and bad input refused with nothing written.

The host is the demo host (8 H100 PCIe GPUs, 2 per cell) with the MIG geometry of its model kept
(`tests/data/gpu-profiles/demo-h100-pcie.json`: 8 memory slices, 3g.40gb at 0 or 4, 7g.80gb at 0).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, Cli, refused_unchanged

GEOMETRY = str(REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json")
SMALL = ["--vcpus", "4", "--memory", "8GiB"]


@pytest.fixture
def mig(cli: Cli) -> Cli:
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("gpu-profile", "import", GEOMETRY)
    cli.ok("tenant", "create", "tenant")
    return cli


def _partitions(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in doc["devices"] if d["kind"] in ("mig", "vgpu")]


def _gpu_cells(cli: Cli) -> dict[str, int]:
    host = cli.ok("host", "show", "h1", "--json").json()
    return {d["address"]: d["numa_node"] for d in host["devices"] if d["kind"] == "gpu"}


def _claims(db: Path) -> list[tuple[str, str, str, str, int | None, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT v.name, c.gpu, c.kind, c.name, c.start, c.uuid FROM partition_claims c "
            "JOIN vms v ON v.id = c.vm_id ORDER BY v.name, c.start"
        ).fetchall()


def test_mig_instances_are_placed_claimed_shown_rendered_and_released(mig: Cli) -> None:
    doc = mig.ok("place", "tenant", *SMALL, "--mig", "3g.40gb:2", "--name", "v1", "--json").json()
    parts = _partitions(doc)
    assert len(parts) == 2
    for p in parts:
        assert set(p) - {"host_cell"} == {"kind", "gpu", "vf", "profile", "start", "uuid", "guest_cell"}
        assert (p["kind"], p["profile"], p["vf"], p["guest_cell"]) == ("mig", "3g.40gb", None, 0)
    gpu = parts[0]["gpu"]
    assert {p["gpu"] for p in parts} == {gpu} and sorted(p["start"] for p in parts) == [0, 4]
    assert _gpu_cells(mig)[gpu] == doc["cells"][0]["host_cell"]  # a GPU of the VM's own cell
    assert _partitions(mig.ok("vm", "show", "v1", "--json").json()) == parts
    table = mig.ok("vm", "show", "v1").stdout
    assert all(f"mig 3g.40gb@{p['start']} on GPU {gpu} (mdev {p['uuid']}) -> guest cell 0" in table for p in parts)
    assert sorted(_claims(mig.db)) == sorted(("v1", gpu, "mig", "3g.40gb", p["start"], p["uuid"]) for p in parts)
    (claim,) = [c for e in mig.ok("log", "--vm", "v1", "--json").json() for c in e["changes"]]
    assert sorted(claim["partitions"]) == [f"mig 3g.40gb on {gpu}@0", f"mig 3g.40gb on {gpu}@4"]

    xml = mig.ok("render", "v1").stdout
    assert xml.count("<hostdev mode='subsystem' type='mdev'") == 2
    assert all(f"<address uuid='{p['uuid']}'/>" in xml for p in parts)

    whole = mig.ok("place", "tenant", "--gpus", "2", "--name", "v2", "--json").json()
    taken = [d["address"] for d in whole["devices"] if d["kind"] == "gpu"]
    assert len(taken) == 2 and gpu not in taken  # the partitioned GPU is never passed through whole

    full = mig("place", "tenant", *SMALL, "--mig", "7g.80gb", "--host", "h1", "--dry-run", "--json").json()
    assert all(p["gpu"] != gpu for p in _partitions(full))  # no room for 7g.80gb beside two 3g.40gb

    mig.ok("vm", "release", "v1")
    assert _claims(mig.db) == []
    again = mig.ok("place", "tenant", *SMALL, "--mig", "7g.80gb", "--name", "v3", "--json").json()
    assert [(p["gpu"], p["start"]) for p in _partitions(again)] == [(gpu, 0)]


def _gpu_use(cli: Cli) -> dict[str, tuple[str | None, dict[str, int]]]:
    host = cli.ok("host", "show", "h1", "--json").json()
    return {d["address"]: (d["mode"], {p["profile"]: p["free"] for p in d["partitions"] if "profile" in p})
            for d in host["devices"] if d["kind"] == "gpu"}


def test_host_show_gives_each_gpus_mode_and_what_the_claims_leave_free(mig: Cli) -> None:
    """Modes and free partitions follow the claims: a MIG GPU holding one 3g.40gb (at 4, so 4g.40gb at 0 stays
    creatable) has one 3g.40gb, one 4g.40gb and no 7g.80gb left; a GPU passed through whole is ``whole`` with
    nothing free; release returns them."""
    unclaimed = _gpu_use(mig)
    assert {mode for mode, _free in unclaimed.values()} == {None}
    assert all((f["3g.40gb"], f["4g.40gb"], f["7g.80gb"], f["1g.10gb"]) == (2, 1, 1, 7) for _m, f in unclaimed.values())
    part = _partitions(mig.ok("place", "tenant", *SMALL, "--mig", "3g.40gb", "--name", "p", "--json").json())[0]
    whole = mig.ok("place", "tenant", "--gpus", "1", "--name", "w", "--json").json()
    passed = next(d["address"] for d in whole["devices"] if d["kind"] == "gpu")
    use = _gpu_use(mig)
    assert part["start"] == 4
    mode, free = use[part["gpu"]]
    assert (mode, free["3g.40gb"], free["4g.40gb"], free["7g.80gb"], free["1g.10gb"]) == ("mig", 1, 1, 0, 4)
    assert use[passed] == ("whole", dict.fromkeys(free, 0))
    assert all(u == unclaimed[a] for a, u in use.items() if a not in (part["gpu"], passed))
    layouts = {d["address"]: d["layout"] for d in mig.ok("host", "show", "h1", "--json").json()["devices"]}
    assert layouts[part["gpu"]] == [{"vm": "p", "profile": "3g.40gb", "start": 4, "vf": None}]
    assert all(not held for a, held in layouts.items() if a != part["gpu"])
    table = mig.ok("host", "show", "h1").stdout
    assert "mig: 3g.40gb@4 (p)" in table
    assert "3g.40gb 1/2, 4g.40gb 1/1, 7g.80gb 0/1" in table and "3g.40gb 2/2, 4g.40gb 1/1, 7g.80gb 1/1" in table
    mig.ok("vm", "release", "p")
    mig.ok("vm", "release", "w")
    assert _gpu_use(mig) == unclaimed


def test_a_vm_show_of_a_vm_without_partitions_has_none(mig: Cli) -> None:
    doc = mig.ok("place", "tenant", "--gpus", "1", "--name", "w", "--json").json()
    assert _partitions(doc) == [] and _claims(mig.db) == []
    (claim,) = [c for e in mig.ok("log", "--vm", "w", "--json").json() for c in e["changes"]]
    assert "partitions" not in claim and len(claim["devices"]) == 1


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--mig", ""], 4, "bad --mig ''"),
        (["--mig", "3g.40gb:x"], 4, "bad --mig '3g.40gb:x'"),
        (["--vgpu", "a", "--mig", "b"], 4, "--vgpu and --mig exclude each other"),
        (["--gpus", "1", "--mig", "3g.40gb"], 4, "--gpus with --mig is refused"),
        (["--mig", "3g.40gb:0"], 4, "1 to 64 mig partitions"),
        (["--mig", "9g.99gb"], 4, "error: VM 'tenant-vm1': no GPU of the fleet offers MIG profile '9g.99gb'"),
    ],
    ids=["empty", "bad-count", "vgpu-and-mig", "gpus-and-mig", "zero", "unknown-profile"],
)
def test_bad_partition_asks_are_refused_and_change_nothing(
    mig: Cli, args: list[str], code: int, words: str
) -> None:
    mig.ok("place", "tenant", *SMALL, "--mig", "3g.40gb", "--name", "v1")
    refused_unchanged(mig, ["place", "tenant", *SMALL, *args], code, words)


def test_mig_without_a_kept_geometry_names_the_import(cli: Cli) -> None:
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("tenant", "create", "tenant")
    refused_unchanged(cli, ["place", "tenant", *SMALL, "--mig", "3g.40gb"], 4, "vnuma gpu-profile import")


def test_a_real_process_exits_4_on_both_kinds(mig: Cli) -> None:
    res = mig.process("place", "tenant", *SMALL, "--vgpu", "a", "--mig", "b")
    assert res.exit_code == 4
    assert res.stderr.splitlines()[0] == "error: --vgpu and --mig exclude each other: a VM takes partitions of one kind"


def test_every_move_keeps_the_partitions_and_moves_their_claims(mig: Cli) -> None:
    mig.ok("host", "add", "h2", "--demo")
    mig.ok("place", "tenant", *SMALL, "--mig", "3g.40gb:2", "--host", "h1", "--name", "m")
    mig.ok("vm", "repin", "m", "--cells", "2")
    repinned = mig.ok("vm", "show", "m", "--json").json()
    parts = _partitions(repinned)
    assert [p["profile"] for p in parts] == ["3g.40gb"] * 2
    assert {_gpu_cells(mig)[p["gpu"]] for p in parts} == {2} == {p["host_cell"] for p in parts}
    mig.ok("vm", "migrate", "m", "--to", "h2", "--cold")
    moved = mig.ok("vm", "show", "m", "--json").json()
    assert moved["host"] == "h2" and len(_partitions(moved)) == 2
    assert {p["uuid"] for p in _partitions(moved)} == {p["uuid"] for p in parts}  # the same mediated devices
    with sqlite3.connect(mig.db) as conn:
        hosts = conn.execute(
            "SELECT DISTINCT h.name FROM partition_claims c JOIN hosts h ON h.id = c.host_id"
        ).fetchall()
    assert hosts == [("h2",)]
    assert sorted(_claims(mig.db)) == sorted(
        ("m", p["gpu"], "mig", "3g.40gb", p["start"], p["uuid"]) for p in _partitions(moved)
    )


def test_a_host_whose_gpus_offer_no_partitions_still_shows_which_are_whole(cli: Cli) -> None:
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("tenant", "create", "tenant")
    doc = cli.ok("place", "tenant", "--gpus", "2", "--name", "w", "--json").json()
    taken = {d["address"] for d in doc["devices"] if d["kind"] == "gpu"}
    shown = cli.ok("host", "show", "h1", "--json").json()
    gpus = {d["address"]: (d["mode"], d["partitions"]) for d in shown["devices"] if d["kind"] == "gpu"}
    assert len(gpus) == 8 and len(taken) == 2
    assert gpus == {a: ("whole" if a in taken else None, []) for a in gpus}
