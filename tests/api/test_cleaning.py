"""The cleaning command through the service: `vnuma serve` hands its `[devices] clean_command` to the routes
that move and release VMs, which run it for the devices those VMs left cleaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.conftest import Service, prepared, start
from tests.cli.conftest import Cli
from tests.cli.test_device_cleaning import _configure


def test_a_migrate_and_a_release_through_the_service_run_the_command_for_the_gpus_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = _configure(tmp_path, monkeypatch, f'echo "$1 $2" >> {tmp_path}/cleaned')
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    cli.ok("host", "set", "h1", "--after-release", "clean")
    placed = [cli.ok("place", "tenant-a", "--gpus", "1", "--vcpus", "2", "--memory", "2GiB", "--host", "h1",
                     "--name", name, "--json").json() for name in ("g1", "g2")]
    gpus = [next(d["address"] for d in p["devices"] if d["kind"] == "gpu") for p in placed]
    base, proc = start(str(cli.db), tmp_path / "serve.log")
    svc = Service(cli, base, tokens, proc, tmp_path / "serve.log")
    try:
        moved = svc.as_("ops").post("/v1/vms/g1/migrate", json={"to": "h2"})
        assert moved.status_code == 200, moved.text
        assert moved.json()["run"]["notes"] == [f"device {gpus[0]} of host h1 cleaned by the cleaning command"]
        assert marker.read_text() == f"h1 {gpus[0]}\n"
        released = svc.as_("ops").post("/v1/vms/g2/release", json={})
        assert released.status_code == 200, released.text
        assert released.json()["notes"] == [f"device {gpus[1]} of host h1 cleaned by the cleaning command"]
        assert marker.read_text() == f"h1 {gpus[0]}\nh1 {gpus[1]}\n"
    finally:
        svc.close()
    states = {r["address"]: r["state"] for r in cli.ok("device", "list", "--host", "h1", "--json").json()}
    assert states[gpus[0]] == states[gpus[1]] == "free"
