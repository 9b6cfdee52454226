"""The configured cleaning command (``[devices] clean_command``): run for the devices a released VM left
cleaning; exit 0 cleans, a failure or a timeout leaves the device cleaning with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import DGX_CAPS, DGX_NODEDEV, Cli
from tests.cli.test_device_states import SMALL


def _configure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, timeout: float = 30) -> Path:
    tool = tmp_path / "reset-gpu"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    conf = tmp_path / "config.toml"
    conf.write_text(f'[devices]\nclean_command = "{tool} {{host}} {{device}}"\nclean_timeout = {timeout}\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(conf))
    return tmp_path / "cleaned"


@pytest.fixture
def used(dgx: Cli) -> tuple[Cli, str]:
    """A host set to clean released devices, and the GPU a VM was placed on (not yet released)."""
    cli = dgx
    cli.ok("host", "set", "dgx", "--after-release", "clean")
    placed = cli.ok("place", "t", "--gpus", "1", *SMALL, "--name", "a", "--json").json()
    return cli, next(d["address"] for d in placed["devices"] if d["kind"] == "gpu")


def _row(cli: Cli, gpu: str) -> dict[str, object]:
    return next(r for r in cli.ok("device", "list", "--json").json() if r["address"] == gpu)


def test_a_command_that_exits_0_cleans_the_released_device(
    used: tuple[Cli, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, gpu = used
    marker = _configure(tmp_path, monkeypatch, f'echo "$1 $2" >> {tmp_path}/cleaned')
    res = cli.ok("vm", "release", "a")
    assert f"device {gpu} of host dgx cleaned by the cleaning command" in res.stderr
    assert marker.read_text() == f"dgx {gpu}\n"
    row = _row(cli, gpu)
    assert row["state"] == "free" and isinstance(row["cleaning_s"], float)


def test_a_failing_command_leaves_the_device_cleaning_with_the_reason(
    used: tuple[Cli, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, gpu = used
    _configure(tmp_path, monkeypatch, 'echo "nvidia-smi: GPU reset failed" >&2; exit 3')
    res = cli.ok("vm", "release", "a")
    assert "stays cleaning: cleaning command exited 3: nvidia-smi: GPU reset failed" in res.stderr
    row = _row(cli, gpu)
    assert (row["state"], row["reason"]) == ("cleaning", "cleaning command exited 3: nvidia-smi: GPU reset failed")
    refused = cli("device", "clean", "dgx", gpu, "--command")
    assert refused.exit_code == 14 and "stays cleaning: cleaning command exited 3" in refused.stderr
    assert _row(cli, gpu)["state"] == "cleaning"
    cli.ok("device", "clean", "dgx", gpu)  # cleaned by hand
    assert _row(cli, gpu)["state"] == "free"


def test_a_command_that_times_out_leaves_the_device_cleaning(
    used: tuple[Cli, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, gpu = used
    _configure(tmp_path, monkeypatch, "exec sleep 30", timeout=0.2)
    res = cli.ok("vm", "release", "a")
    assert "stays cleaning: cleaning command timed out after 0.2 s" in res.stderr
    assert _row(cli, gpu)["reason"] == "cleaning command timed out after 0.2 s"
    every = [r for r in cli.ok("device", "list", "--json").json() if r["kind"] == "gpu"]
    assert cli("place", "t", "--gpus", str(len(every)), *SMALL).exit_code == 5


def test_clean_command_without_a_configured_command_is_refused(used: tuple[Cli, str]) -> None:
    cli, gpu = used
    cli.ok("vm", "release", "a")
    res = cli("device", "clean", "dgx", gpu, "--command")
    assert res.exit_code == 4 and "no cleaning command is configured" in res.stderr
    assert _row(cli, gpu)["state"] == "cleaning"


def _gpu_of(placed: dict[str, object]) -> str:
    return next(d["address"] for d in placed["devices"] if d["kind"] == "gpu")  # type: ignore[attr-defined,index]


@pytest.fixture
def moving(used: tuple[Cli, str]) -> tuple[Cli, str, str]:
    """``used`` with a second host, and a GPU another VM left cleaning before any command was configured."""
    cli, gpu = used
    cli.ok("host", "import", "dgx-2", "--capabilities", str(DGX_CAPS), "--nodedev", str(DGX_NODEDEV))
    other = _gpu_of(cli.ok("place", "t", "--gpus", "1", *SMALL, "--name", "b", "--host", "dgx", "--json").json())
    cli.ok("vm", "release", "b")
    assert _row(cli, other)["state"] == "cleaning"
    return cli, gpu, other


def test_a_migrate_off_a_cleaning_host_runs_the_command_for_the_gpu_it_left_only(
    moving: tuple[Cli, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, gpu, other = moving
    marker = _configure(tmp_path, monkeypatch, f'echo "$1 $2" >> {tmp_path}/cleaned')
    res = cli.ok("vm", "migrate", "a", "--to", "dgx-2")
    assert f"device {gpu} of host dgx cleaned by the cleaning command" in res.stderr
    assert marker.read_text() == f"dgx {gpu}\n"  # not for the GPU that was cleaning already
    rows = {(r["host"], r["address"]): r for r in cli.ok("device", "list", "--json").json()}
    assert rows[("dgx", gpu)]["state"] == "free" and rows[("dgx", other)]["state"] == "cleaning"


def test_a_failing_command_after_a_rebalance_step_leaves_the_gpu_cleaning_and_the_run_done(
    moving: tuple[Cli, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, gpu, other = moving
    _configure(tmp_path, monkeypatch, f'echo "$1 $2" >> {tmp_path}/cleaned; echo "reset failed" >&2; exit 3')
    cli.ok("host", "cordon", "dgx")
    res = cli.ok("host", "drain", "dgx", "--apply", "--yes", "--json")
    assert res.json()["run"]["status"] == "done"
    assert res.json()["run"]["notes"] == [f"device {gpu} of host dgx stays cleaning: cleaning command exited 3: "
                                          "reset failed"]
    assert (tmp_path / "cleaned").read_text() == f"dgx {gpu}\n"  # not for `other`, cleaning already
    assert _row(cli, other)["state"] == "cleaning"
    row = _row(cli, gpu)
    assert (row["state"], row["reason"]) == ("cleaning", "cleaning command exited 3: reset failed")


def test_an_aborted_device_drain_cleans_the_gpu_its_undone_step_left(
    demo_pair: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On libvirt's test driver, killed half way: --abort moves the VM back onto the tainted GPU (which stays
    tainted, never cleaned), and the command runs for the GPU the undone step left, only that one."""
    cli = demo_pair
    for host in ("a", "b"):
        cli.ok("host", "set", host, "--after-release", "clean")
    gpu = _gpu_of(cli.ok("place", "x", *SMALL, "--gpus", "1", "--host", "a", "--name", "g1", "--json").json())
    marker = _configure(tmp_path, monkeypatch, f'echo "$1 $2" >> {tmp_path}/cleaned')
    monkeypatch.setenv("VNUMA_FAILPOINT", "step-started:1")
    killed = cli.process("device", "taint", "a", gpu, "--reason", "Xid 79", "--effect", "drain", "--apply", "--yes")
    assert killed.exit_code == -9, killed.stderr
    monkeypatch.delenv("VNUMA_FAILPOINT")
    moved = next(v for v in cli.ok("vm", "list", "--json").json() if v["vm"] == "g1")
    to = (moved["host"], _gpu_of(moved))
    res = cli.ok("rebalance", "--abort", "--json")
    assert marker.read_text() == f"{to[0]} {to[1]}\n"
    assert res.json()["run"]["notes"] == [f"device {to[1]} of host {to[0]} cleaned by the cleaning command"]
    states = {(r["host"], r["address"]): r["state"] for r in cli.ok("device", "list", "--json").json()}
    assert (states[("a", gpu)], states[to]) == ("tainted", "free")
