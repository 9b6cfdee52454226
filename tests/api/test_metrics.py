"""`GET /metrics`: the inventory's figures as Prometheus reads them (parsed with prometheus_client's own parser and
checked against the inventory), who may read them, and the service's latency histogram by route template."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import Service, prepared, start
from tests.cli.conftest import REPO, Cli
from tests.stats.conftest import resctrl_vms
from tests.watch.conftest import FLEET, make_fleet
from vnuma.api.app import create_app
from vnuma.api.metrics import Readers
from vnuma.inventory.access import open_access
from vnuma.services import make_settings
from vnuma.services.metrics import SETTLE_S, AuditTally, Kept

CAPS = REPO / "tests" / "data" / "capabilities"
RECORDED = REPO / "tests" / "data" / "domstats"
FIRST, SECOND = RECORDED / "rdt-first.txt", RECORDED / "rdt-second.txt"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def named(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


@pytest.fixture
def rdt(tmp_path: Path) -> Cli:
    """The resctrl host of tests/stats/test_bandwidth.py with its four VMs (a1, a2 of tenant-a; b1, b2 of
    tenant-b) and their bandwidth samples from the recorded domstats."""
    cli = resctrl_vms(Cli(tmp_path / "inventory.db"))
    cli.ok("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND))
    return cli


@pytest.fixture
def local(rdt: Cli) -> Iterator[TestClient]:
    """The application over ``rdt``'s inventory, asked from 127.0.0.1 (allowed by default)."""
    with TestClient(create_app(make_settings(str(rdt.db), {})), client=("127.0.0.1", 50000)) as client:
        yield client


def scrape(client: TestClient) -> Samples:
    got = client.get("/metrics")
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/plain; version=")
    return parse(got.text)


def test_the_answer_is_gzipped_when_asked(local: TestClient) -> None:
    plain = local.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    zipped = local.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) < len(plain.content) / 2
    assert named(parse(zipped.text), "vnuma_cell_pcpus_free") == named(parse(plain.text), "vnuma_cell_pcpus_free")


def test_a_vms_bandwidth_is_its_stored_sample(rdt: Cli, local: TestClient) -> None:
    with sqlite3.connect(rdt.db) as conn:
        stored = {vm: json.loads(domains) for vm, domains in conn.execute(
            "SELECT v.name, s.domains FROM bandwidth_samples s JOIN vms v ON v.id = s.vm_id")}
    got = scrape(local)
    assert set(stored) == {"a1", "a2", "b1", "b2"}
    for vm, domains in stored.items():
        tenant = "tenant-a" if vm.startswith("a") else "tenant-b"
        who = {"vm": vm, "tenant": tenant, "host": "rdt"}
        local_bps = sum(d[1] for d in domains)
        remote_bps = sum(d[2] - d[1] for d in domains)
        name = "vnuma_vm_memory_bandwidth_bytes_per_second"
        assert value(got, name, kind="local", **who) == local_bps
        assert value(got, name, kind="remote", **who) == remote_bps
        assert value(got, "vnuma_vm_remote_memory_ratio", **who) == pytest.approx(
            remote_bps / (local_bps + remote_bps))
    # a1 moves 4000 MB/s, 3600 of it local, and holds 8 MiB of its L3 (the recordings' figures).
    a1 = {"vm": "a1", "tenant": "tenant-a", "host": "rdt"}
    assert value(got, "vnuma_vm_memory_bandwidth_bytes_per_second", kind="remote", **a1) == 400e6
    assert value(got, "vnuma_vm_llc_occupancy_bytes", **a1) == 8 * 2**20
    assert value(got, "vnuma_vms", tenant="tenant-a", state="placed") == 2


def test_free_capacity_follows_the_claims_as_stats_and_host_show_count_them(rdt: Cli, local: TestClient) -> None:
    def cells() -> dict[str, float]:
        return {dict(labels)["cell"]: v for labels, v in named(scrape(local), "vnuma_cell_pcpus_free").items()}

    def stats_free() -> dict[str, float]:
        (host,) = rdt.ok("stats", "--json").json()["hosts"]
        return {str(c["cell"]): c["pcpus"]["free"] for c in host["cells"]}

    before = cells()
    assert before == stats_free()
    doc = rdt.ok("place", "tenant-b", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--name", "b3",
                 "--json").json()
    (cell,) = doc["cells"]
    after = cells()
    assert after == stats_free()
    assert after[str(cell["host_cell"])] == before[str(cell["host_cell"])] - len(cell["pcpus"])
    classes = rdt.ok("host", "show", "rdt", "--json").json()["resctrl"]["classes"]
    got = scrape(local)
    assert value(got, "vnuma_host_resctrl_classes_of_service", host="rdt") == classes["total"] == 7
    assert value(got, "vnuma_host_resctrl_classes_of_service_free", host="rdt") == 7 - classes["used"] == 3
    assert value(got, "vnuma_host_cordoned", host="rdt") == 0
    rdt.ok("host", "cordon", "rdt")
    assert value(scrape(local), "vnuma_host_cordoned", host="rdt") == 1


def test_placements_refusals_and_moves_are_counted_from_the_inventory(rdt: Cli, local: TestClient) -> None:
    got = scrape(local)
    assert value(got, "vnuma_placements_total") == 4
    assert named(got, "vnuma_placement_refusals_total") == {} and named(got, "vnuma_moves_total") == {}
    assert rdt("place", "tenant-a", "--vcpus", "200", "--memory", "2GiB").exit_code == 5
    rdt.ok("place", "tenant-a", "--vcpus", "1", "--memory", "1GiB", "--page-size", "2M")
    rdt.ok("rebalance", "--objective", "bandwidth", "--max-moves", "1", "--apply", "--yes")
    got = scrape(local)
    assert value(got, "vnuma_placements_total") == 5
    assert named(got, "vnuma_placement_refusals_total") == {(("check", "cell-cpus"),): 1}
    assert named(got, "vnuma_moves_total") == {(("objective", "bandwidth"),): 1}
    # Another process on the same inventory (a replica, the service after a restart) says the same.
    with TestClient(create_app(make_settings(str(rdt.db), {})), client=("127.0.0.1", 50001)) as other:
        again = scrape(other)
    for name in ("vnuma_placements_total", "vnuma_placement_refusals_total", "vnuma_moves_total"):
        assert named(again, name) == named(got, name)


def test_the_latency_histogram_is_labelled_with_the_route_template(rdt: Cli, local: TestClient) -> None:
    settings = make_settings(str(rdt.db), {})
    from vnuma.services.tokens import Role, create_token

    _made, secret = create_token(settings, "prom", Role.READER)
    for vm in ("a1", "a2", "b1"):
        assert local.get(f"/v1/vms/{vm}", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    assert local.get("/no/such/path").status_code == 404
    got = scrape(local)
    counts = named(got, "vnuma_api_request_duration_seconds_count")
    assert counts[(("method", "GET"), ("route", "/v1/vms/{name}"))] == 3
    assert counts[(("method", "GET"), ("route", "(unmatched)"))] == 1
    assert not any("a1" in v or "/no/such" in v for labels in counts for _k, v in labels)
    assert value(got, "vnuma_api_requests_total", method="GET", route="/v1/vms/{name}", status="200") == 3
    buckets = named(got, "vnuma_api_request_duration_seconds_bucket")
    assert buckets[(("le", "+Inf"), ("method", "GET"), ("route", "/v1/vms/{name}"))] == 3


def test_an_unreadable_inventory_is_inventory_up_0_not_an_error(rdt: Cli, local: TestClient) -> None:
    assert value(scrape(local), "vnuma_inventory_up") == 1
    with sqlite3.connect(rdt.db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'elsewhere'")
    got = scrape(local)
    assert value(got, "vnuma_inventory_up") == 0 and named(got, "vnuma_cell_pcpus_free") == {}


def test_addresses_allowed_without_a_token() -> None:
    default = Readers("127.0.0.0/8, ::1")
    assert default.address_allowed("127.0.0.1") and default.address_allowed("::1")
    assert default.address_allowed("::ffff:127.0.0.1")  # IPv4 on a dual-stack socket
    assert not default.address_allowed("10.1.2.3") and not default.address_allowed("testclient")
    assert not default.address_allowed(None)
    assert Readers("10.20.0.0/16,192.0.2.7").address_allowed("10.20.3.4")
    assert not Readers("none").address_allowed("127.0.0.1")


def test_a_bad_metrics_allow_is_a_configuration_error(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    bad = cli.process("config", "show", env={"VNUMA_METRICS_ALLOW": "127.0.0.0/8, localhost"})
    assert bad.exit_code == 4
    assert "bad VNUMA_METRICS_ALLOW '127.0.0.0/8, localhost': 'localhost' is no address or CIDR" in bad.stderr
    assert cli.ok("config", "show", "--json").json()["metrics_allow"] == {
        "value": "127.0.0.0/8, ::1", "source": "default", "file": None}


def test_the_audit_tally_counts_late_commits_and_reads_only_new_rows(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("tenant", "create", "t")
    now = datetime.now(UTC)
    old = (now - timedelta(seconds=2 * SETTLE_S)).isoformat(timespec="microseconds")
    fresh = now.isoformat(timespec="microseconds")

    def log(row_id: int, at: str, outcome: str, changes: list[dict[str, str]]) -> None:
        with sqlite3.connect(cli.db) as conn:
            conn.execute(
                "INSERT INTO audit_log (id, invocation, at, username, machine, command, outcome, changes, vms, "
                "hosts, tenants) VALUES (?, 'i', ?, 'u', 'm', 'c', ?, ?, '', '', '')",
                (row_id, at, outcome, json.dumps({"changes": changes}, sort_keys=True)))

    log(1000, old, "ok", [{"op": "claim", "vm": "x"}])
    log(1001, old, "refused", [{"op": "attempt", "check": "cell-cpus"}])
    log(1010, fresh, "refused", [{"op": "attempt", "check": "gpus"}])
    tally = AuditTally()
    with open_access(f"sqlite:///{cli.db}") as access, access.begin(False) as x:
        assert tally.read(x, now) == (1, {"cell-cpus": 1, "gpus": 1})
    log(1005, fresh, "ok", [{"op": "claim", "vm": "y"}])  # committed after 1010 was read: still counted
    log(1006, old, "refused", [{"op": "attempt"}])  # a refusal that is no placement's: not counted
    with open_access(f"sqlite:///{cli.db}") as access, access.begin(False) as x:
        assert tally.read(x, now) == (2, {"cell-cpus": 1, "gpus": 1})
        later = now + timedelta(seconds=2 * SETTLE_S)
        assert tally.read(x, later) == (2, {"cell-cpus": 1, "gpus": 1})  # folded in: the same totals
        assert tally.read(x, later) == (2, {"cell-cpus": 1, "gpus": 1})


@pytest.fixture
def guarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    """A real `vnuma serve` whose /metrics no address may read without a token (metrics_allow from the
    environment)."""
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    monkeypatch.setenv("VNUMA_METRICS_ALLOW", "10.0.0.0/8")
    log = tmp_path / "serve.log"
    base, proc = start(str(cli.db), log)
    svc = Service(cli, base, tokens, proc, log)
    yield svc
    svc.close()


def test_metrics_over_real_http_from_an_allowed_address_without_a_token(service: Service) -> None:
    got = service.as_(None).get("/metrics")
    assert got.status_code == 200
    samples = parse(got.text)
    assert value(samples, "vnuma_placements_total") == 2
    partitions = named(samples, "vnuma_gpu_partitions_free")
    assert partitions and {dict(labels)["host"] for labels in partitions} == {"h1", "h2"}
    assert all(dict(labels)["profile"] for labels in partitions)
    refused = service.as_("ops").post("/v1/place", json={"tenant": "tenant-a", "vcpus": 4000, "memory": "4GiB"})
    assert refused.status_code == 409
    checks = named(parse(service.as_(None).get("/metrics").text), "vnuma_placement_refusals_total")
    assert checks == {(("check", refused.json()["causes"][0]["check"]),): 1}


def test_metrics_from_another_address_need_a_fleet_reading_token(guarded: Service) -> None:
    assert guarded.as_(None).get("/metrics").status_code == 401
    assert guarded.as_("alice").get("/metrics").status_code == 403  # a tenant token: the figures show every tenant
    for name in ("watch", "ops", "root"):
        got = guarded.as_(name).get("/metrics")
        assert got.status_code == 200 and "vnuma_cell_pcpus_free" in got.text


def test_every_worker_answers_with_all_workers_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where serve keeps the workers' shared figures
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    log = tmp_path / "serve.log"
    base, proc = start(str(cli.db), log, "--workers", "2")
    svc = Service(cli, base, tokens, proc, log)
    try:
        headers = {"Authorization": f"Bearer {tokens['watch']}"}
        for _ in range(20):  # a connection each: the workers share them out
            assert httpx.get(f"{base}/v1/vms", headers=headers, timeout=60).status_code == 200
        for _ in range(6):
            counts = named(parse(httpx.get(f"{base}/metrics", timeout=60).text), "vnuma_api_requests_total")
            assert counts[(("method", "GET"), ("route", "/v1/vms"), ("status", "200"))] == 20
        assert [p.name[:14] for p in scratch.iterdir()] == ["vnuma-metrics-"]
    finally:
        svc.close()
    assert not list(scratch.iterdir())  # removed when serving ended


def test_the_figures_are_the_same_on_sqlite_and_postgresql(url: str) -> None:
    from tests.builders import make_host
    from vnuma.errors import NoPlacementError
    from vnuma.inventory import open_inventory
    from vnuma.inventory.db import upgrade
    from vnuma.inventory.samples import Sample, record_samples
    from vnuma.placement.model import Isolation, Tenant, VmRequest
    from vnuma.placement.objectives import Strategy
    from vnuma.services import Settings, audit
    from vnuma.services.metrics import read_figures
    from vnuma.services.placing import place_vm, require_chosen
    from vnuma.topology import KIB_PER_GIB

    upgrade(url)
    settings = Settings(db_url=url)
    with open_inventory(url) as inv:
        inv.add_host(make_host("h1", cells=2, cores_per_cell=4, smt=2))
        inv.add_tenant(Tenant("acme", Isolation.CORE))
    chosen = place_vm(settings, VmRequest("v1", "acme", 2, 2 * KIB_PER_GIB), Strategy.PACK, dry_run=False)[1].chosen
    assert chosen is not None
    big = VmRequest("v2", "acme", 64, 2 * KIB_PER_GIB)
    with pytest.raises(NoPlacementError) as refused:
        require_chosen(big, place_vm(settings, big, Strategy.PACK, dry_run=False)[1])
    audit.log_outcome(settings, "refused", str(refused.value), {"tenant": "acme"}, cause=refused.value)
    with open_access(url) as access, access.begin(True) as x:
        record_samples(x, [Sample("v1", "h1", "2026-12-07T03:00:00+00:00", 2000, ((0, 700, 1000),), ((0, 4096),))])
    got = read_figures(settings, Kept())
    assert (got.claims, got.refusals, got.moves) == (1, {"cell-cpus": 1}, {})
    (vm,) = got.vms
    assert (vm.vm, vm.tenant, vm.host, vm.state, vm.local_bps, vm.remote_bps, vm.llc_bytes) == (
        "v1", "acme", "h1", "placed", 700, 300, 4096)
    assert vm.sampled_at == datetime(2026, 12, 7, 3, tzinfo=UTC).timestamp()
    (cell,) = [c for c in got.cells if c.cell == chosen.cells[0].host_cell]
    assert cell.pcpus_free == cell.pcpus - len(chosen.cells[0].pcpus)
    with open_inventory(url) as inv:
        inv.add_host(make_host("h2", cells=2, cores_per_cell=4, smt=2))
    with open_access(url) as access, access.begin(True) as x:  # a sample taken where the VM is not (it moved)
        record_samples(x, [Sample("v1", "h2", "2026-12-07T03:01:00+00:00", 2000, ((0, 1, 2),), ((0, 1),))])
    (vm,) = read_figures(settings, Kept()).vms
    assert (vm.host, vm.local_bps, vm.remote_bps, vm.remote_ratio, vm.llc_bytes) == ("h1", None, None, None, None)


def test_the_watchs_open_events_are_exported_one_series_each(tmp_path: Path) -> None:
    fleet = make_fleet(Cli(tmp_path / "inventory.db"))
    with TestClient(create_app(make_settings(str(fleet.db), {})), client=("127.0.0.1", 50002)) as client:
        assert named(scrape(client), "vnuma_events_active") == {}
        fleet.ok("watch", "--domstats-dir", str(FLEET))  # opens 3 events and closes 2 (tests/watch/test_replay.py)
        opened = {(e["rule"], e["host"], e["vm"]) for e in fleet.ok("events", "--json").json() if not e["closed_at"]}
        assert opened == {("remote", "rdt", "b2")}
        assert named(scrape(client), "vnuma_events_active") == {
            (("cell", ""), ("host", "rdt"), ("rule", "remote"), ("vm", "b2")): 1.0,
        }
