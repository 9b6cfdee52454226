"""The HTTP API reads hosts as the CLI does: the parts left out in the import's answer and in `host show`,
`strict` refusing with the CLI's exit code and words; `vnuma --server` prints what the CLI prints locally."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import Service, start
from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

OFFLINE = REPO / "tests" / "data" / "hwloc" / "upstream" / "linux" / "offline-cpu0-node0.xml"
VIRCAPS = REPO / "tests" / "data" / "libvirt" / "vircaps2xmldata" / "vircaps-x86_64-basic.xml"


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cli, Cli, Service]]:
    """An inventory used directly, and a served one used through `--server` (an admin token)."""
    local = Cli(tmp_path / "local.db")
    local.ok("host", "list")
    served = Cli(tmp_path / "served.db")
    token = served.ok("token", "create", "root", "--role", "admin", "--json").json()["token"]
    base, proc = start(str(served.db), tmp_path / "serve.log", "--rate-limit", "0")
    client = Cli(tmp_path / "unused.db")
    client.options = ["--server", base]
    monkeypatch.setenv("VNUMA_TOKEN", token)
    service = Service(served, base, {"root": token}, proc, tmp_path / "serve.log")
    yield local, client, service
    service.close()


COMMANDS = [
    (["host", "import", "r630", "--hwloc", str(OFFLINE), "--strict"], 4),
    (["host", "import", "r630", "--hwloc", str(OFFLINE)], 0),
    (["host", "import", "lv", "--capabilities", str(VIRCAPS), "--json"], 0),
    (["host", "show", "r630"], 0),
    (["host", "show", "lv", "--json"], 0),
]


def test_through_the_service_a_host_import_says_and_shows_what_the_cli_does(
    pair: tuple[Cli, Cli, Service]
) -> None:
    local, client, service = pair
    for args, code in COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == code, (args, here.stderr)
    got = service.as_("root").get("/v1/hosts/r630")
    assert got.status_code == 200
    assert got.json()["left_out"] == [{"what": "PUs 4,6,8,10,12,14,16,18,20", "why": "in no NUMA node"}]
    assert got.json() == local.ok("host", "show", "r630", "--json").json()


def test_a_strict_import_body_is_refused_and_writes_nothing(pair: tuple[Cli, Cli, Service]) -> None:
    _local, _client, service = pair
    before = dump(service.cli.db)
    body = {"name": "r630", "hwloc": {"file": "offline.xml",
                                      "content_base64": base64.b64encode(OFFLINE.read_bytes()).decode()}}
    refused = service.as_("root").post("/v1/hosts/import", json={**body, "strict": True})
    assert refused.status_code == 422 and "would be left out: in no NUMA node" in refused.json()["detail"]
    assert dump(service.cli.db) == before
    added = service.as_("root").post("/v1/hosts/import", json=body)
    assert added.status_code == 201
    assert added.json()["left_out"] == [{"what": "PUs 4,6,8,10,12,14,16,18,20", "why": "in no NUMA node"}]
