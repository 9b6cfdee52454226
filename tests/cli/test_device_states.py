"""``vnuma device taint|untaint|clean|set|list`` and ``host set --after-release``: states kept, claims refused,
bad input refused with one line, its own exit code and nothing written."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, refused_unchanged

SMALL = ("--vcpus", "2", "--memory", "2GiB", "--page-size", "4K")


def _gpus(cli: Cli, state: str | None = None) -> list[str]:
    rows = cli.ok("device", "list", "--json", *(("--state", state) if state else ())).json()
    return [r["address"] for r in rows if r["kind"] == "gpu"]


def test_a_tainted_gpu_is_listed_and_never_placed_on(dgx: Cli) -> None:
    gpus = _gpus(dgx)
    doc = dgx.ok("device", "taint", "dgx", gpus[0], "--reason", "Xid 79", "--json").json()
    assert (doc["state"], doc["reason"], doc["effect"], doc["changed"]) == ("tainted", "Xid 79", "no-schedule", True)
    assert doc["by"] and doc["since"]
    listed = dgx.ok("device", "list", "--state", "tainted", "--json").json()
    assert [(r["address"], r["reason"]) for r in listed] == [(gpus[0], "Xid 79")]
    res = dgx("place", "t", "--gpus", str(len(gpus)), *SMALL, "--name", "all")
    assert res.exit_code == 5
    placed = dgx.ok("place", "t", "--gpus", str(len(gpus) - 1), *SMALL, "--name", "rest", "--json").json()
    assert gpus[0] not in {d["address"] for d in placed["devices"]}
    dgx.ok("vm", "release", "rest")
    dgx.ok("device", "untaint", "dgx", gpus[0])
    assert _gpus(dgx, "tainted") == []
    dgx.ok("place", "t", "--gpus", str(len(gpus)), *SMALL, "--name", "all")


def test_a_vm_holding_a_gpu_stays_when_it_is_tainted(dgx: Cli) -> None:
    placed = dgx.ok("place", "t", "--gpus", "1", *SMALL, "--name", "a", "--json").json()
    gpu = next(d["address"] for d in placed["devices"] if d["kind"] == "gpu")
    dgx.ok("device", "taint", "dgx", gpu, "--reason", "row remapping failure")
    row = next(r for r in dgx.ok("device", "list", "--json").json() if r["address"] == gpu)
    assert (row["state"], row["vm"]) == ("tainted", "a")
    assert dgx.ok("vm", "show", "a", "--json").json()["host"] == "dgx"


def test_cleaning_blocks_claims_until_cleaned(dgx: Cli) -> None:
    dgx.ok("host", "set", "dgx", "--after-release", "clean")
    gpus = _gpus(dgx)
    placed = dgx.ok("place", "t", "--gpus", "1", *SMALL, "--name", "a", "--json").json()
    gpu = next(d["address"] for d in placed["devices"] if d["kind"] == "gpu")
    dgx.ok("vm", "release", "a")
    assert _gpus(dgx, "cleaning") == [gpu]
    assert dgx("place", "t", "--gpus", str(len(gpus)), *SMALL, "--name", "b").exit_code == 5
    doc = dgx.ok("device", "clean", "dgx", gpu, "--json").json()
    assert doc["state"] is None and doc["cleaning_s"] >= 0
    dgx.ok("place", "t", "--gpus", str(len(gpus)), *SMALL, "--name", "b")


def test_a_device_set_to_free_on_a_cleaning_host_is_free_at_once(dgx: Cli) -> None:
    dgx.ok("host", "set", "dgx", "--after-release", "clean")
    placed = dgx.ok("place", "t", "--gpus", "1", *SMALL, "--name", "a", "--json").json()
    gpu = next(d["address"] for d in placed["devices"] if d["kind"] == "gpu")
    dgx.ok("device", "set", "dgx", gpu, "--after-release", "free")
    dgx.ok("vm", "release", "a")
    assert _gpus(dgx, "cleaning") == []


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["device", "taint", "dgx", "0000:99:00.0", "--reason", "x"], 3, "has no GPU or NIC 0000:99:00.0"),
        (["device", "taint", "nosuch", "0000:13:00.0", "--reason", "x"], 3, "host 'nosuch'"),
        (["device", "taint", "dgx", "0000:13:00.0", "--reason", " "], 4, "a taint needs a reason"),
        (["device", "taint", "dgx", "0000:13:00.0", "--reason", "x", "--effect", "evict"], 4, "unknown --effect"),
        (["device", "untaint", "dgx", "0000:13:00.0"], 14, "is not tainted: nothing to untaint"),
        (["device", "clean", "dgx", "0000:13:00.0"], 14, "is not cleaning: nothing to clean"),
        (["host", "set", "dgx", "--after-release", "wipe"], 4, "unknown --after-release 'wipe'"),
        (["device", "list", "--state", "broken"], 4, "unknown device state 'broken'"),
    ],
    ids=["unknown-device", "unknown-host", "empty-reason", "bad-effect", "untaint-untainted", "clean-not-cleaning",
         "bad-after-release", "bad-state"],
)
def test_bad_input_is_one_line_its_exit_code_and_nothing_written(
    dgx: Cli, args: list[str], code: int, words: str
) -> None:
    refused_unchanged(dgx, args, code, words)
