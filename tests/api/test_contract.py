"""The service answers with the CLI's documents: same state, same JSON, over real HTTP."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.api.conftest import Service
from tests.cli.conftest import Cli
from vnuma.api.problems import PROBLEMS

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_read_equals_the_cli_json(service: Service) -> None:
    cli, api = service.cli, service.as_("root")
    pairs = [
        (["host", "list"], "/v1/hosts"),
        (["host", "show", "h1"], "/v1/hosts/h1"),
        (["tenant", "list"], "/v1/tenants"),
        (["tenant", "show", "tenant-b"], "/v1/tenants/tenant-b"),
        (["vm", "list"], "/v1/vms"),
        (["vm", "list", "--tenant", "tenant-a"], "/v1/vms?tenant=tenant-a"),
        (["vm", "list", "--host", "h1"], "/v1/vms?host=h1"),
        (["vm", "show", "tenant-b-vm0"], "/v1/vms/tenant-b-vm0"),
        (["stats"], "/v1/stats"),
        (["stats", "--host", "h2"], "/v1/stats?host=h2"),
    ]
    for args, path in pairs:
        got = api.get(path)
        assert got.status_code == 200, (path, got.text)
        assert got.json() == cli.ok(*args, "--json").json(), path
    body = {"shapes": ["vcpus=16,memory=64GiB,gpus=2", "vcpus=4,memory=8GiB"], "count": 5}
    got = api.post("/v1/capacity", json=body)
    assert got.status_code == 200, got.text
    expected = cli.ok("capacity", *body["shapes"], "--count", "5", "--json").json()
    assert got.json() == expected and expected["fits"] == 5


def test_place_claims_what_the_cli_then_shows(service: Service) -> None:
    body = {"tenant": "tenant-a", "vcpus": 16, "memory": "64GiB", "gpus": 2, "numa_nodes": "auto",
            "page_size": "1G", "name": None, "dry_run": False, "explain": False}
    got = service.as_("ops").post("/v1/place", json=body)
    assert got.status_code == 201, got.text
    doc = got.json()
    assert doc["vm"] == "tenant-a-vm1" and doc["tenant"] == "tenant-a"
    assert sum(1 for d in doc["devices"] if d["kind"] == "gpu") == 2
    shown = service.cli.ok("vm", "show", doc["vm"], "--json").json()
    assert {k: v for k, v in shown.items() if k != "state"} == doc
    # The same options through the CLI make the same kind of answer (the next VM of the tenant).
    again = service.cli.ok("place", "tenant-a", "--vcpus", "16", "--memory", "64GiB", "--gpus", "2",
                           "--page-size", "1G", "--json").json()
    assert set(again) == set(doc) and again["vm"] == "tenant-a-vm2"


def test_dry_run_and_explain_claim_nothing(service: Service) -> None:
    before = service.cli.ok("vm", "list", "--json").json()
    got = service.as_("ops").post("/v1/place", json={"tenant": "tenant-b", "vcpus": 8, "memory": "16GiB",
                                                       "dry_run": True, "explain": True})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert {s["host"] for s in doc["explain"]["scores"]} == {"h1", "h2"}
    assert doc["explain"]["rejections"] == []
    assert service.cli.ok("vm", "list", "--json").json() == before
    cli = service.cli.ok("place", "tenant-b", "--vcpus", "8", "--memory", "16GiB", "--dry-run", "--explain", "--json")
    assert cli.json() == doc


def test_no_fit_is_409_with_every_hosts_reason(service: Service) -> None:
    got = service.as_("ops").post("/v1/place", json={"tenant": "tenant-a", "vcpus": 8, "memory": "16GiB",
                                                       "gpus": 9})
    assert got.status_code == 409
    assert got.headers["content-type"] == "application/problem+json"
    problem = got.json()
    assert problem["error"] == "NoPlacementError" and problem["exit_code"] == 5
    assert {r["host"] for r in problem["rejections"]} == {"h1", "h2"}
    cli = service.cli("place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--gpus", "9")
    assert cli.exit_code == 5 and problem["detail"] in cli.stderr and problem["hint"] in cli.stderr


def test_release_answers_the_vm_as_it_was(service: Service) -> None:
    shown = service.cli.ok("vm", "show", "tenant-a-vm0", "--json").json()
    got = service.as_("ops").post("/v1/vms/tenant-a-vm0/release", json={"undefine": False})
    assert got.status_code == 200, got.text
    assert got.json() == {**shown, "released": True}
    assert service.cli("vm", "show", "tenant-a-vm0").exit_code == 3


def test_tenant_writes_match_the_cli_documents(service: Service) -> None:
    root = service.as_("root")
    made = root.post("/v1/tenants", json={"name": "tenant-c", "isolation": "cell", "max_gpus": 4, "llc": "8MiB"})
    assert made.status_code == 201 and made.json() == {"name": "tenant-c", "isolation": "cell", "max_vcpus": None,
                                                       "max_gpus": 4, "llc_kib": 8192, "llc_ways": None,
                                                       "mem_bw": None}
    changed = root.patch("/v1/tenants/tenant-c", json={"max_gpus": None, "max_vcpus": 64, "llc_ways": 3,
                                                        "mem_bw": 30})
    assert changed.status_code == 200, changed.text
    assert changed.json() == {"name": "tenant-c", "isolation": "cell", "max_vcpus": 64, "max_gpus": None,
                              "llc_kib": None, "llc_ways": 3, "mem_bw": 30, "before": made.json()}
    assert root.get("/v1/tenants/tenant-c").json() == service.cli.ok("tenant", "show", "tenant-c", "--json").json()
    removed = root.delete("/v1/tenants/tenant-c")
    assert removed.json() == {"name": "tenant-c", "removed": True}
    assert service.cli("tenant", "show", "tenant-c").exit_code == 3


def test_changes_are_audited_under_the_tokens_name(service: Service) -> None:
    service.as_("alice").post("/v1/place", json={"vcpus": 2, "memory": "4GiB", "name": "audited"})
    service.as_("alice").post("/v1/place", json={"vcpus": 2, "memory": "4GiB", "gpus": 99, "name": "refused"})
    entries = service.cli.ok("log", "--tenant", "tenant-a", "--json").json()
    mine = [e for e in entries if e["user"] == "token:alice"]
    assert [e["outcome"] for e in mine] == ["ok", "refused"]
    assert mine[0]["command"] == "POST /v1/place" and mine[0]["machine"] == "127.0.0.1"
    assert any(c.get("vm") == "audited" for c in mine[0]["changes"])


def test_openapi_describes_the_routes_and_bodies(service: Service) -> None:
    doc = service.as_(None).get("/openapi.json").json()
    assert doc["info"]["version"] == "1"
    for path in ("/v1/place", "/v1/hosts", "/v1/hosts/{name}", "/v1/vms/{name}/release", "/v1/capacity",
                 "/v1/tokens"):
        assert path in doc["paths"], path
    place = doc["components"]["schemas"]["PlaceBody"]
    assert place["additionalProperties"] is False
    assert {"tenant", "vcpus", "memory", "gpus", "numa_nodes", "page_size", "name", "dry_run", "explain"} <= set(
        place["properties"]
    )


def test_the_manuals_table_is_the_status_table() -> None:
    text = API_PAGE.read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| (\d+) \|", text, re.M)
    table = {name: (int(exit_code), int(status)) for name, exit_code, status in rows}
    assert table == {cls.__name__: (cls.exit_code, status) for cls, status, _slug, _title in PROBLEMS}


def test_bandwidth_is_measured_by_the_service_for_operators(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    ops, watch = service.as_("ops"), service.as_("watch")
    refused = watch.post("/v1/stats/bandwidth", json={"interval": "10ms"})
    assert refused.status_code == 403
    got = ops.post("/v1/stats/bandwidth", json={"interval": "10ms"})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert set(doc) == {"taken_at", "interval_s", "vms", "domains", "warnings"} and doc["interval_s"] == 0.01
    assert doc["vms"] == []  # the demo hosts have no resctrl monitors
    bad = ops.post("/v1/stats/bandwidth", json={"interval": "soon"})
    assert bad.status_code == 422 and "bad --interval" in bad.text
    client = Cli(service.cli.db.parent / "unused.db")
    client.options = ["--server", service.base]
    monkeypatch.setenv("VNUMA_TOKEN", service.tokens["ops"])
    remote = client("stats", "--bandwidth", "--interval", "10ms", "--json")
    assert remote.exit_code == 0 and remote.json()["vms"] == [], remote.stderr
    files = client("stats", "--bandwidth", "--domstats", "a", "--domstats", "b")
    assert files.exit_code == 2 and "read where the command runs" in files.stderr
