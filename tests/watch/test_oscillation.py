"""No oscillation: two VMs whose loads alternate (tests/data/watch/alternating) are moved apart at most once per
cooldown and never swapped back; over hours of the same alternation the moves stop (convergence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.watch.conftest import CAPS, REPO

ALTERNATING = REPO / "tests" / "data" / "watch" / "alternating"
EPOCH_S = 7200
"""Each further replay of the series starts two hours after the one before (past the cooldown and the hour)."""


def _inventory(cli: Cli) -> Cli:
    """Host rdt, x (tenant-x) and y (tenant-y) on L3 domain 0, w (tenant-x) on domain 1: what the series names."""
    cli.ok("host", "import", "rdt", "--capabilities", str(CAPS))
    cli.ok("host", "reserve", "rdt", "--llc-ways", "2")
    for tenant in ("tenant-x", "tenant-y"):
        cli.ok("tenant", "create", tenant)
    for name, tenant in (("x", "tenant-x"), ("y", "tenant-y"), ("w", "tenant-x")):
        cli.ok("place", tenant, "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--llc-ways", "2",
               "--host", "rdt", "--name", name)
    cli.ok("vm", "repin", "w", "--cells", "1")
    assert _cells(cli) == {"x": [0], "y": [0], "w": [1]}  # as recorded
    return cli


def _cells(cli: Cli) -> dict[str, list[int]]:
    return {v["vm"]: [c["host_cell"] for c in cli.ok("vm", "show", v["vm"], "--json").json()["cells"]]
            for v in cli.ok("vm", "list", "--json").json()}


def _shifted(tmp: Path, epoch: int) -> Path:
    out = tmp / f"epoch-{epoch}"
    out.mkdir()
    for path in ALTERNATING.glob("*.txt"):
        host, at = path.stem.split("@")
        (out / f"{host}@{int(at) + epoch * EPOCH_S}.txt").write_text(path.read_text())
    return out


def _moves(cli: Cli) -> list[dict[str, Any]]:
    return sorted((a for e in cli.ok("events", "--json").json() for a in e["actions"] if a["status"] == "applied"),
                  key=lambda a: a["at"])


@pytest.mark.parametrize("cooldown", [None, "1m"], ids=["default", "shortest"])
def test_alternating_loads_move_each_vm_at_most_once_per_cooldown_and_converge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cooldown: str | None,
) -> None:
    if cooldown is not None:
        config = tmp_path / "vnuma.toml"
        config.write_text(f'[watch]\ncooldown = "{cooldown}"\n')
        monkeypatch.setenv("VNUMA_CONFIG", str(config))
    cli = _inventory(Cli(tmp_path / "inventory.db"))
    per_epoch = []
    for epoch in range(4):  # eight hours of the same alternation
        cli.ok("watch", "--domstats-dir", str(_shifted(tmp_path, epoch)), "--act", "apply")
        per_epoch.append(len(_moves(cli)))
        if epoch == 0:
            settled = _cells(cli)
    moves = _moves(cli)
    assert moves, "the alternation moves something once"
    assert per_epoch == [per_epoch[0]] * 4  # converged: nothing more moves after the first ten minutes
    assert _cells(cli) == settled
    by_vm: dict[str, list[dict[str, Any]]] = {}
    for m in moves:
        by_vm.setdefault(m["vm"], []).append(m)
    assert all(len(ms) == 1 for ms in by_vm.values())  # at most one move per VM per cooldown (and per run)
    assert set(by_vm) <= {"x", "y", "w"}
