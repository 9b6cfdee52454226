"""`vnuma place --or`: a request with alternatives end to end: the alternative got in the JSON, `vm show` and the
inventory, a move that takes an earlier alternative (and gives the partitions back), --explain per alternative,
and bad alternatives refused with nothing written.

Two demo hosts (8 H100 PCIe GPUs each, 2 per cell) with the MIG geometry of their model kept.
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.cli.conftest import REPO, Cli, refused_unchanged

GEOMETRY = str(REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json")
SMALL = ["--vcpus", "4", "--memory", "8GiB"]
ASK = ["place", "t", *SMALL, "--gpus", "2", "--or", "mig=3g.40gb:2"]


@pytest.fixture
def fleet(cli: Cli) -> Cli:
    """h1 with 7 of its 8 GPUs held by VM ``big``; h2 cordoned."""
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("host", "add", "h2", "--demo")
    cli.ok("gpu-profile", "import", GEOMETRY)
    cli.ok("tenant", "create", "t")
    cli.ok("host", "cordon", "h2")
    cli.ok("place", "t", "--vcpus", "8", "--memory", "8GiB", "--gpus", "7", "--name", "big")
    return cli


def _partitions(db: object) -> list[tuple[str, str]]:
    with sqlite3.connect(str(db)) as conn:
        return conn.execute(
            "SELECT v.name, c.name FROM partition_claims c JOIN vms v ON v.id = c.vm_id ORDER BY c.start"
        ).fetchall()


def test_the_alternative_got_is_recorded_and_a_move_takes_the_earlier_one_where_it_fits(fleet: Cli) -> None:
    doc = fleet.ok(*ASK, "--name", "x", "--json").json()
    assert doc["alternative"] == 1 and doc["host"] == "h1"
    assert [d["kind"] for d in doc["devices"]] == ["mig", "mig"]
    assert doc["request"]["gpus"] == 2
    assert doc["request"]["alternatives"] == [{"mig": "3g.40gb:2", "vcpus": 4, "memory": "8GiB"}]
    shown = fleet.ok("vm", "show", "x", "--json").json()
    assert {k: v for k, v in shown.items() if k != "state"} == doc
    assert "alternative: 1 of 0-1 (mig=3g.40gb:2,vcpus=4,memory=8GiB)" in fleet.ok("vm", "show", "x").stdout
    assert _partitions(fleet.db) == [("x", "3g.40gb"), ("x", "3g.40gb")]

    fleet.ok("host", "uncordon", "h2")
    fleet.ok("vm", "migrate", "x", "--to", "h2", "--cold")
    moved = fleet.ok("vm", "show", "x", "--json").json()
    assert (moved["host"], moved["alternative"]) == ("h2", 0)
    assert [d["kind"] for d in moved["devices"]] == ["gpu", "gpu"]
    assert moved["request"] == doc["request"]  # the stored request keeps every alternative
    assert _partitions(fleet.db) == []


def test_a_drain_moves_the_vm_to_its_earlier_alternative_where_it_fits(fleet: Cli) -> None:
    """The drain's plan re-places the kept request by the same rule: on h2, whole GPUs fit again."""
    fleet.ok(*ASK, "--name", "x")
    fleet.ok("vm", "release", "big")
    fleet.ok("host", "uncordon", "h2")
    plan = fleet.ok("host", "drain", "h1", "--apply", "--yes", "--json").json()
    assert [(m["vm"], m["to"]["host"]) for m in plan["moves"]] == [("x", "h2")]
    moved = fleet.ok("vm", "show", "x", "--json").json()
    assert (moved["host"], moved["alternative"], [d["kind"] for d in moved["devices"]]) == ("h2", 0, ["gpu", "gpu"])
    assert _partitions(fleet.db) == []


def test_a_request_whose_first_choice_fits_gets_it_and_says_so(fleet: Cli) -> None:
    fleet.ok("host", "uncordon", "h2")
    doc = fleet.ok(*ASK, "--name", "x", "--json").json()
    assert (doc["host"], doc["alternative"]) == ("h2", 0)
    assert "alternative" not in fleet.ok("vm", "show", "big", "--json").json()  # no alternatives, no key


def test_a_request_sized_by_its_gpus_sizes_a_partition_alternative_from_its_part_of_a_gpu(fleet: Cli) -> None:
    """``--gpus 2 --or mig=3g.40gb:2``: two 3g.40gb instances of the demo's 8-slice GPUs are one GPU's share
    (16 vCPUs and 80 GiB of 1G pages on a demo cell of 2 GPUs); the VM keeps that size for its alternative."""
    doc = fleet.ok("place", "t", "--gpus", "2", "--or", "mig=3g.40gb:2", "--name", "x", "--json").json()
    assert doc["alternative"] == 1 and [d["kind"] for d in doc["devices"]] == ["mig", "mig"]
    assert (sum(len(c["vcpus"]) for c in doc["cells"]), sum(c["memory_kib"] for c in doc["cells"])) == (16, 80 << 20)
    assert doc["request"]["alternatives"] == [{"mig": "3g.40gb:2", "vcpus": 16, "memory": "80GiB"}]
    assert (doc["request"]["vcpus"], doc["request"]["memory"]) == (None, None)  # the request itself: as asked


def test_explain_says_per_alternative_why_it_did_not_fit(fleet: Cli) -> None:
    out = fleet.ok(*ASK, "--name", "x", "--explain", "--dry-run").stdout
    assert "as asked: fits on no host" in out
    assert "alternative 1: placed" in out
    doc = fleet.ok(*ASK, "--name", "x", "--explain", "--dry-run", "--json").json()
    (unfit,) = doc["explain"]["alternatives"]
    assert (unfit["alternative"], unfit["asked"]) == (0, "as asked")
    assert {r["host"]: r["check"] for r in unfit["rejections"]} == {"h1": "gpus", "h2": "cordoned"}


def test_none_fitting_is_exit_5_naming_every_alternative(fleet: Cli) -> None:
    fleet.ok("place", "t", *SMALL, "--mig", "1g.10gb:1", "--name", "last")  # the one free GPU, now MIG
    args = ["place", "t", *SMALL, "--gpus", "2", "--or", "vgpu=none:1", "--or", "mig=7g.80gb"]
    refused_unchanged(fleet, [*args[:-4], "--or", "mig=7g.80gb"], 5, "none of its alternatives fits: as asked: ")
    res = fleet(*args[:-4], "--or", "mig=7g.80gb", "--json")
    assert res.exit_code == 5
    assert [u["alternative"] for u in res.json()["alternatives"]] == [0, 1]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--or", "mig=9g.99gb:2"], "VM 't-vm1': alternative 1 (mig=9g.99gb:2,vcpus=4,memory=8GiB): no GPU of the "
                                    "fleet offers MIG profile '9g.99gb'"),
        (["--or", "gpus=1", "--or", "vgpu=nope"], "alternative 2 (vgpu=nope,vcpus=4,memory=8GiB): no GPU of the "
                                                  "fleet offers vGPU type 'nope'"),
        (["--or", "page-size=2M"], "alternative 1 (page_size=2M): page_size cannot change in an alternative"),
        (["--or", "mig=3g.40gb:0"], "alternative 1 (mig=3g.40gb:0,vcpus=4,memory=8GiB): a VM takes 1 to 64"),
        (["--or", "gpus=1,mig=3g.40gb"], "--gpus with --mig is refused"),
        (["--or", "=2"], "bad --or '=2' (alternative 1)"),
    ],
    ids=["unknown-mig", "unknown-vgpu", "not-a-device", "zero", "gpus-and-mig", "no-key"],
)
def test_bad_alternatives_are_exit_4_naming_them_and_change_nothing(
    fleet: Cli, extra: list[str], words: str
) -> None:
    refused_unchanged(fleet, ["place", "t", *SMALL, "--gpus", "1", *extra], 4, words)


def test_a_real_process_says_one_line(fleet: Cli) -> None:
    res = fleet.process("place", "t", *SMALL, "--or", "mig=9g.99gb")
    assert res.exit_code == 4
    assert res.stderr.splitlines()[0].startswith("error: VM 't-vm1': alternative 1 (mig=9g.99gb,vcpus=4,memory=8GiB)")
