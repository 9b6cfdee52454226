"""``vnuma device health HOST --nvidia-smi FILE --kernel-log FILE``: saved health files taint the GPUs they
show known-bad conditions on, claims then keep off them, and bad input changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged

DATA = Path(__file__).resolve().parent.parent / "data"
HEALTH = DATA / "nvidia-smi-health"
NVSMI = HEALTH / "written-dgx-like-v12.xml"
DMESG = HEALTH / "written-dgx-like-dmesg.log"
OTHER = HEALTH / "written-h100-8gpu-v12.xml"
SMALL = ("--vcpus", "2", "--memory", "2GiB", "--page-size", "4K")


def _tainted(cli: Cli) -> dict[str, tuple[str, str]]:
    return {r["address"]: (r["effect"], r["reason"])
            for r in cli.ok("device", "list", "--state", "tainted", "--json").json()}


def test_the_files_taint_the_gpus_they_show_and_claims_keep_off_them(dgx: Cli) -> None:
    gpus = [r["address"] for r in dgx.ok("device", "list", "--json").json() if r["kind"] == "gpu"]
    res = dgx.ok("device", "health", "dgx", "--nvidia-smi", str(NVSMI), "--kernel-log", str(DMESG), "--json")
    doc = res.json()
    assert {g["address"]: (g["conditions"], g["effect"], g["status"]) for g in doc["gpus"]} == {
        "0000:14:00.0": (["ecc-uncorrectable"], "drain", "tainted"),
        "0000:2b:00.0": (["xid-74", "remap-pending"], "no-schedule", "tainted"),
        "0000:2c:00.0": (["remap-failure"], "no-schedule", "tainted"),
        "0000:a3:00.0": (["xid-79"], "drain", "tainted"),
    }
    assert doc["unknown"] == ["0000:e1:00.0"]
    assert "--effect drain --apply" in next(g["drain"] for g in doc["gpus"] if g["address"] == "0000:a3:00.0")
    tainted = _tainted(dgx)
    assert tainted == {g["address"]: (g["effect"], g["reason"]) for g in doc["gpus"]}
    rows = {r["address"]: r for r in dgx.ok("device", "list", "--json").json()}
    assert rows["0000:14:00.0"]["by"] and rows["0000:14:00.0"]["since"]
    healthy = [g for g in gpus if g not in tainted]
    assert dgx("place", "t", "--gpus", str(len(healthy) + 1), *SMALL, "--name", "x").exit_code == 5
    placed = dgx.ok("place", "t", "--gpus", str(len(healthy)), *SMALL, "--name", "all", "--json").json()
    assert {d["address"] for d in placed["devices"] if d["kind"] == "gpu"} == set(healthy)


def test_read_again_it_changes_nothing_and_a_stronger_effect_is_kept(dgx: Cli) -> None:
    dgx.ok("device", "taint", "dgx", "0000:2c:00.0", "--reason", "row remapping failed", "--effect", "drain")
    dgx.ok("device", "health", "dgx", "--nvidia-smi", str(NVSMI))
    before = _tainted(dgx)
    assert before["0000:2c:00.0"] == ("drain", "row remapping failed")
    doc = dgx.ok("device", "health", "dgx", "--nvidia-smi", str(NVSMI), "--json").json()
    assert {g["status"] for g in doc["gpus"]} == {"already"}
    assert _tainted(dgx) == before


def test_a_taint_with_another_reason_is_replaced_keeping_drain(dgx: Cli) -> None:
    dgx.ok("device", "taint", "dgx", "0000:2b:00.0", "--reason", "odd", "--effect", "drain")
    doc = dgx.ok("device", "health", "dgx", "--nvidia-smi", str(NVSMI), "--json").json()
    row = next(g for g in doc["gpus"] if g["address"] == "0000:2b:00.0")
    assert (row["status"], row["effect"]) == ("tainted", "drain")
    assert _tainted(dgx)["0000:2b:00.0"] == ("drain", "row remapping pending (GPU reset needed)")


def test_dry_run_writes_nothing(dgx: Cli) -> None:
    doc = dgx.ok("device", "health", "dgx", "--kernel-log", str(DMESG), "--dry-run", "--json").json()
    assert {g["status"] for g in doc["gpus"]} == {"would-taint"}
    assert _tainted(dgx) == {}


def test_the_table_says_each_gpu_and_how_to_drain(dgx: Cli) -> None:
    res = dgx.ok("device", "health", "dgx", "--kernel-log", str(DMESG))
    assert "0000:a3:00.0  xid-79" in res.stdout and "tainted now" in res.stdout
    assert "vnuma device taint dgx 0000:a3:00.0 --reason 'GPU has fallen off the bus (Xid 79)' --effect drain " \
           "--apply" in res.stdout
    assert "0000:e1:00.0" in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--kernel-log", str(DMESG), "--nvidia-smi", str(OTHER)], 4, "not host 'dgx''s"),
        (["--nvidia-smi", str(HEALTH / "missing.xml")], 4, "no such nvidia-smi file"),
        (["--kernel-log", str(HEALTH)], 4, "is a directory"),
        (["--nvidia-smi", str(HEALTH / "README.md")], 4, "malformed XML"),
        ([], 2, "--nvidia-smi FILE or --kernel-log FILE"),
    ],
    ids=["another-hosts-file", "missing-file", "a-directory", "no-document", "no-file"],
)
def test_bad_input_changes_nothing(dgx: Cli, args: list[str], code: int, words: str) -> None:
    refused_unchanged(dgx, ["device", "health", "dgx", *args], code, words)


def test_a_bad_config_is_refused_before_the_files_are_read(dgx: Cli, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vnuma.toml"
    path.write_text('[device_health]\nxid-79 = "evict"\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(path))
    refused_unchanged(dgx, ["device", "health", "dgx", "--kernel-log", str(tmp_path / "missing.log")], 4,
                      "[device_health] xid-79: 'evict' is no effect")


def test_report_only_conditions_taint_nothing(dgx: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vnuma.toml"
    path.write_text('[device_health]\nxid-79 = "none"\nxid-74 = "none"\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(path))
    doc = dgx.ok("device", "health", "dgx", "--kernel-log", str(DMESG), "--json").json()
    assert {g["address"]: (g["status"], g["effect"]) for g in doc["gpus"]} == {
        "0000:2b:00.0": ("report-only", None), "0000:a3:00.0": ("report-only", None)}
    assert _tainted(dgx) == {}


def test_through_a_server_it_is_refused(dgx: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VNUMA_SERVER", "http://127.0.0.1:9")  # never asked: the refusal comes first
    refused_unchanged(dgx, ["device", "health", "dgx", "--kernel-log", str(DMESG)], 4,
                      "`vnuma device health` does not run through --server")
