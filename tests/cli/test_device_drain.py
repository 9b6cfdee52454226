"""``vnuma device taint --effect drain``: a journaled run moves exactly the VMs holding the device off it and
leaves the host's other VMs alone; a VM that fits nowhere stays, named (exit 5 unless --partial); killed with
SIGKILL half way, the run is finished by ``rebalance --resume`` or undone by ``--abort``."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli

SMALL = ("--vcpus", "4", "--memory", "4GiB")


def _vms(cli: Cli) -> dict[str, dict[str, object]]:
    return {p["vm"]: p for p in cli.ok("vm", "list", "--json").json()}


def _gpus(p: dict[str, object]) -> list[str]:
    return [d["address"] for d in p["devices"] if d["kind"] == "gpu"]  # type: ignore[attr-defined]


@pytest.fixture
def busy(demo_pair: Cli) -> Cli:
    """On host a: g1 and g2 with a GPU each, c1 with none; host b empty."""
    for name, gpus in (("g1", "1"), ("g2", "1"), ("c1", "0")):
        demo_pair.ok("place", "x", *SMALL, "--gpus", gpus, "--host", "a", "--name", name)
    return demo_pair


def test_a_device_drain_moves_exactly_the_vms_holding_it(busy: Cli) -> None:
    before = _vms(busy)
    gpu = _gpus(before["g1"])[0]
    done = busy("device", "taint", "a", gpu, "--reason", "Xid 79", "--effect", "drain", "--apply", "--yes", "--json")
    assert done.exit_code == 0, done.stderr
    doc = done.json()
    assert [m["vm"] for m in doc["moves"]] == ["g1"] and doc["left"] == []
    assert doc["taint"]["state"] == "tainted" and doc["taint"]["effect"] == "drain"
    assert [s["status"] for s in doc["run"]["steps"]] == ["done"]
    after = _vms(busy)
    assert gpu not in _gpus(after["g1"]) and len(_gpus(after["g1"])) == 1
    assert {vm: after[vm] for vm in ("g2", "c1")} == {vm: before[vm] for vm in ("g2", "c1")}
    assert all(gpu not in _gpus(p) for p in after.values())


def test_a_vm_that_fits_nowhere_without_the_device_stays_named(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", *SMALL, "--gpus", "8", "--host", "a", "--name", "big")
    demo_pair.ok("place", "x", *SMALL, "--gpus", "8", "--host", "b", "--name", "other")
    gpu = _gpus(_vms(demo_pair)["big"])[0]
    before = _vms(demo_pair)
    refused = demo_pair("device", "taint", "a", gpu, "--reason", "ECC", "--effect", "drain", "--apply", "--yes")
    assert refused.exit_code == 5
    assert f"device {gpu} of host a: 1 VM cannot leave it (big: fits nowhere without device {gpu}" in refused.stderr
    assert _vms(demo_pair) == before
    partial = demo_pair("device", "taint", "a", gpu, "--reason", "ECC", "--effect", "drain", "--partial", "--json")
    assert partial.exit_code == 0 and [v["vm"] for v in partial.json()["left"]] == ["big"]
    assert _vms(demo_pair) == before


@pytest.mark.parametrize("finish", ["--resume", "--abort"])
def test_a_device_drain_killed_half_way_is_finished_or_undone(
    busy: Cli, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    before = _vms(busy)
    gpu = _gpus(before["g1"])[0]
    monkeypatch.setenv("VNUMA_FAILPOINT", "step-started:1")
    killed = busy.process("device", "taint", "a", gpu, "--reason", "Xid 79", "--effect", "drain", "--apply", "--yes")
    assert killed.exit_code == -9, killed.stderr
    monkeypatch.delenv("VNUMA_FAILPOINT")
    assert gpu not in _gpus(_vms(busy)["g1"])  # the step's claims moved, the run is unfinished
    busy.ok("rebalance", finish)
    after = _vms(busy)
    if finish == "--resume":
        assert gpu not in _gpus(after["g1"])
    else:
        assert after["g1"] == before["g1"]  # back onto the tainted device it held
    assert {vm: after[vm] for vm in ("g2", "c1")} == {vm: before[vm] for vm in ("g2", "c1")}
    row = next(r for r in busy.ok("device", "list", "--json").json() if r["address"] == gpu and r["host"] == "a")
    assert row["state"] == "tainted"
    rows = busy.ok("device", "list", "--host", "a", "--state", "free", "--json").json()
    free = [r for r in rows if r["kind"] == "gpu"]
    placed = busy.ok("place", "x", *SMALL, "--gpus", str(len(free)), "--host", "a", "--json").json()
    assert gpu not in _gpus(placed)


@pytest.mark.parametrize("finish", ["--resume", "--abort"])
def test_a_drained_gpu_partitions_vms_leave_it_and_an_abort_brings_them_back(
    demo_pair: Cli, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    """Two VMs hold MIG instances on one GPU: the drain moves both off it (one step each); killed after the first
    step's claims moved, --resume moves the second too, --abort puts the first back onto its instance there."""
    from tests.cli.test_place_partitions import GEOMETRY

    demo_pair.ok("gpu-profile", "import", GEOMETRY)
    for name in ("m1", "m2"):
        demo_pair.ok("place", "x", *SMALL, "--mig", "3g.40gb", "--host", "a", "--name", name)
    before = _vms(demo_pair)
    gpus = {d["gpu"] for vm in ("m1", "m2") for d in before[vm]["devices"] if d["kind"] == "mig"}
    assert len(gpus) == 1
    gpu = gpus.pop()
    monkeypatch.setenv("VNUMA_FAILPOINT", "step-started:1")
    killed = demo_pair.process("device", "taint", "a", gpu, "--reason", "ECC", "--effect", "drain", "--apply", "--yes")
    assert killed.exit_code == -9, killed.stderr
    monkeypatch.delenv("VNUMA_FAILPOINT")
    demo_pair.ok("rebalance", finish)
    after = _vms(demo_pair)
    on_gpu = sorted(vm for vm in ("m1", "m2") if any(d.get("gpu") == gpu for d in after[vm]["devices"]))
    if finish == "--resume":
        assert on_gpu == []
    else:
        assert after == before
