"""`/metrics`' `vnuma_device_state{host,device,kind,state}`: one series per passable device in its state, as
`vnuma device list` says it, following taints, claims and cleaning between scrapes (parsed with
prometheus_client's own parser)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.api.test_metrics import named, scrape
from tests.cli.conftest import REPO, Cli
from vnuma.api.app import create_app
from vnuma.services import make_settings

DATA = REPO / "tests" / "data"
DMESG = DATA / "nvidia-smi-health" / "written-dgx-like-dmesg.log"
SMALL = ("--vcpus", "2", "--memory", "2GiB", "--page-size", "4K")


def _states(client: TestClient) -> dict[tuple[str, str, str], str]:
    out = {}
    for labels, v in named(scrape(client), "vnuma_device_state").items():
        got = dict(labels)
        assert v == 1
        key = (got["host"], got["device"], got["kind"])
        assert key not in out  # one series per device
        out[key] = got["state"]
    return out


def test_each_device_is_one_series_in_its_state(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "dgx", "--capabilities", str(DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"),
           "--nodedev", str(DATA / "nodedev" / "dgx-like.xml"))
    cli.ok("tenant", "create", "t")
    cli.ok("host", "set", "dgx", "--after-release", "clean")
    with TestClient(create_app(make_settings(str(cli.db), {})), client=("127.0.0.1", 50000)) as client:
        listed = {(r["host"], r["address"], r["kind"]): r["state"] for r in cli.ok("device", "list", "--json").json()}
        assert _states(client) == listed and set(listed.values()) == {"free"}
        cli.ok("device", "health", "dgx", "--kernel-log", str(DMESG))
        placed = cli.ok("place", "t", "--gpus", "2", *SMALL, "--name", "a", "--json").json()
        gpus = [d["address"] for d in placed["devices"] if d["kind"] == "gpu"]
        cli.ok("place", "t", "--gpus", "1", *SMALL, "--name", "b")
        cli.ok("vm", "release", "b")
        got = _states(client)
        listed = {(r["host"], r["address"], r["kind"]): r["state"] for r in cli.ok("device", "list", "--json").json()}
        assert got == listed
        assert got[("dgx", "0000:a3:00.0", "gpu")] == "tainted" and got[("dgx", "0000:2b:00.0", "gpu")] == "tainted"
        assert [got[("dgx", g, "gpu")] for g in gpus] == ["claimed", "claimed"]
        assert sorted(got.values()).count("cleaning") == 1
