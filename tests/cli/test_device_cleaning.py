"""The configured cleaning command (``[devices] clean_command``): run for the devices a released VM left
cleaning; exit 0 cleans, a failure or a timeout leaves the device cleaning with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_device_states import CAPS, DGX, SMALL


def _configure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, timeout: float = 30) -> Path:
    tool = tmp_path / "reset-gpu"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    conf = tmp_path / "config.toml"
    conf.write_text(f'[devices]\nclean_command = "{tool} {{host}} {{device}}"\nclean_timeout = {timeout}\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(conf))
    return tmp_path / "cleaned"


@pytest.fixture
def used(cli: Cli) -> tuple[Cli, str]:
    """A host set to clean released devices, and the GPU a VM was placed on (not yet released)."""
    cli.ok("host", "import", "dgx", "--capabilities", str(CAPS), "--nodedev", str(DGX))
    cli.ok("tenant", "create", "t")
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
