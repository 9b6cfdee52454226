"""`vnuma --server URL`: through a service, a command prints exactly what it prints on the inventory itself.

Two inventories are made alike; one is served. Each command runs on the
other directly and on the served one through `--server`: same exit code, same
stdout, same stderr, line for line, for reads, writes, refusals and errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import Service, prepared, start
from tests.cli.conftest import REPO, Cli
from vnuma.sources.demo import demo_capabilities_path

DATA = REPO / "tests" / "data"
CAPS = demo_capabilities_path()


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cli, Cli, Service]]:
    local = Cli(tmp_path / "local.db")
    prepared(local)
    served = Cli(tmp_path / "served.db")
    tokens = prepared(served)
    base, proc = start(str(served.db), tmp_path / "serve.log", "--rate-limit", "0")
    client = Cli(tmp_path / "unused.db")
    client.options = ["--server", base]
    monkeypatch.setenv("VNUMA_TOKEN", tokens["root"])
    service = Service(served, base, tokens, proc, tmp_path / "serve.log")
    yield local, client, service
    service.close()


COMMANDS = [
    ["host", "list"], ["host", "list", "--json"], ["host", "show", "h1"], ["host", "show", "h2", "--json"],
    ["host", "show", "nosuch"],
    ["tenant", "list"], ["tenant", "show", "tenant-a", "--json"], ["tenant", "show", "nobody"],
    ["tenant", "create", "tenant-c", "--isolation", "cell", "--max-gpus", "4"],
    ["tenant", "create", "tenant-c"],
    ["tenant", "update", "tenant-c", "--max-gpus", "none", "--max-vcpus", "32", "--json"],
    ["tenant", "update", "tenant-c"],
    ["tenant", "update", "tenant-c", "--llc", "4MiB", "--mem-bw", "20", "--json"],
    ["tenant", "update", "tenant-c", "--llc", "none", "--mem-bw", "none"],
    ["place", "tenant-c", "--vcpus", "8", "--memory", "16GiB", "--page-size", "1G"],
    ["place", "tenant-a", "--gpus", "2", "--vcpus", "16", "--memory", "64GiB", "--page-size", "1G", "--json"],
    ["place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--dry-run", "--explain"],
    ["place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--dry-run", "--explain", "--json"],
    ["place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--gpus", "9"],
    ["place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--gpus", "9", "--json"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--mig", "7g.80gb:9"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--mig", "7g.80gb:9", "--json"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4XB"],
    ["place", "nobody", "--vcpus", "2", "--memory", "4GiB"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--name", "tenant-b-vm0"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--llc-ways", "2", "--mem-bw", "20"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--mem-bw", "150"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--cold-memory", "8GiB", "--cold-tier", "cxl"],
    ["host", "reserve", "h1", "--llc-ways", "2"],
    ["host", "cordon", "h2"], ["host", "cordon", "h2", "--json"],
    ["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--host", "h2"],
    ["host", "uncordon", "h2"],
    ["device", "taint", "h2", "0000:17:00.0", "--reason", "Xid 79"], ["device", "untaint", "h2", "0000:17:00.0"],
    ["device", "untaint", "h2", "0000:17:00.0"], ["device", "taint", "h2", "0000:99:00.0", "--reason", "x"],
    ["device", "list", "--host", "h2", "--state", "free"], ["host", "set", "h2", "--after-release", "clean"],
    ["host", "set", "h2", "--after-release", "free", "--json"],
    ["vm", "list"], ["vm", "list", "--tenant", "tenant-a", "--json"], ["vm", "list", "--host", "nosuch"],
    ["vm", "show", "tenant-a-vm1"], ["vm", "show", "tenant-a-vm1", "--json"], ["vm", "show", "nosuch"],
    ["vm", "guest-view", "tenant-a-vm1"], ["vm", "guest-view", "tenant-a-vm0", "--json"],
    ["vm", "guest-view", "nosuch"],
    ["stats"], ["stats", "--json"], ["stats", "--host", "h1"],
    ["capacity", "vcpus=16,memory=64GiB,gpus=2", "--count", "3"],
    ["capacity", "vcpus=16,memory=64GiB,gpus=2", "vcpus=2,memory=4GiB", "--json"],
    ["capacity", "vcpus=16,colour=red"],
    ["rebalance", "--max-moves", "2"], ["rebalance", "--objective", "fragmentation", "--json"],
    ["rebalance", "--make-room-for", "vcpus=16,memory=32GiB,gpus=9", "--max-moves", "1"],
    ["rebalance", "--make-room-for", "vcpus=16,memory=32GiB,gpus=9", "--max-moves", "1", "--json"],
    ["rebalance", "--make-room-for", "vcpus=2,memory=2GiB", "--json"],
    ["render", "tenant-a-vm0"], ["render", "tenant-a-vm0", "--threads", "1", "--json"], ["render", "nosuch"],
    ["apply", "tenant-a-vm0", "--dry-run"], ["apply", "tenant-a-vm0", "--start"], ["apply", "tenant-b-vm0", "--json"],
    ["vm", "stop", "tenant-a-vm0"], ["vm", "start", "tenant-b-vm0", "--json"], ["vm", "stop", "tenant-b-vm0"],
    ["vm", "repin", "tenant-a-vm0", "--cells", "3", "--dry-run"], ["vm", "repin", "tenant-a-vm0", "--cells", "3"],
    ["vm", "repin", "tenant-a-vm0", "--cells", "3", "--json"], ["vm", "repin", "nosuch"],
    ["vm", "migrate", "tenant-b-vm0", "--to", "h2", "--dry-run", "--json"],
    ["vm", "migrate", "tenant-b-vm0", "--to", "h2", "--cold"], ["vm", "migrate", "tenant-b-vm0", "--to", "nosuch"],
    ["vm", "migrate", "tenant-b-vm0", "--to", "h2"],
    ["rebalance", "--objective", "fragmentation", "--apply"],
    ["rebalance", "--objective", "fragmentation", "--apply", "--yes", "--json"],
    ["rebalance", "--resume"], ["rebalance", "--abort", "--json"],
    ["host", "drain", "h2", "--max-moves", "0"], ["host", "drain", "h2", "--json"], ["host", "uncordon", "h2"],
    ["host", "drain", "h1", "--apply"], ["host", "drain", "h1", "--apply", "--yes", "--allow-restart"],
    ["host", "drain", "h1", "--apply", "--yes"], ["host", "uncordon", "h1"],
    ["place", "tenant-b", "--vcpus", "4", "--memory", "8GiB", "--host", "h2", "--name", "stays"],
    ["host", "cordon", "h1"], ["host", "drain", "h2", "--json"], ["host", "drain", "h2"],
    ["host", "uncordon", "h1"], ["host", "uncordon", "h2"], ["vm", "release", "stays"],
    ["host", "add", "h3", "--demo"], ["host", "add", "h3", "--demo"], ["host", "reserve", "h3", "--cpus", "0-1"],
    ["host", "reserve", "h3", "--cpus", "0-1", "--json"], ["host", "refresh", "h3"], ["host", "remove", "h3"],
    ["host", "remove", "h1"],  # emptied by the drain above
    ["host", "import", "h4", "--hwloc", str(DATA / "hwloc" / "2pkg-snc-smt-cxl-gpu.xml"), "--json"],
    ["host", "import", "h5", "--capabilities", str(CAPS), "--nodedev", str(DATA / "nodedev" / "gpu-h100.xml")],
    ["host", "import", "h5", "--capabilities", str(CAPS)],
    ["host", "import", "h6", "--capabilities", str(DATA / "nosuch.xml")],
    ["host", "import", "h6", "--hwloc", str(DATA / "nodedev" / "gpu-h100.xml")],
    ["host", "show", "h5", "--json"],
    ["vm", "release", "tenant-c-vm1"], ["vm", "release", "tenant-a-vm1", "--json"],
    ["tenant", "remove", "tenant-c"], ["tenant", "remove", "tenant-a"],
]


EXPECTED_CODES = [
    0, 0, 0, 0, 3,
    0, 0, 3,
    0, 9, 0, 4, 0, 0,
    0, 0, 0, 0, 5, 5, 5, 5, 4, 3, 9, 5, 4, 5, 4,
    0, 0, 5, 0,
    0, 0, 14, 3, 0, 0, 0,
    0, 0, 3, 0, 0, 3,
    0, 0, 3,
    0, 0, 0,
    0, 0, 4,
    0, 0, 5, 5, 0,
    0, 0, 3,
    0, 0, 0,
    0, 0, 0,
    0, 0, 0, 3, 0, 0, 3, 4,
    4, 0, 3, 3,
    0, 0, 0, 4, 0, 0, 0,
    0, 0, 5, 5, 0, 0, 0,
    0, 9, 0,
    0, 0, 0,
    0,
    0, 0, 9, 4, 4, 0,
    0, 0, 0, 9,
]


def test_every_served_command_prints_what_it_prints_locally(pair: tuple[Cli, Cli, Service]) -> None:
    local, client, _service = pair
    codes, outs = [], {}
    for args in COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        codes.append(here.exit_code)
        outs[" ".join(args)] = here.stdout + here.stderr
    # Plans were carried out by the service, journaled, their steps reported as the CLI reports them.
    assert "run 1: done\nstep 1 tenant-a-vm0 (redefine): started" in outs["vm repin tenant-a-vm0 --cells 3"]
    assert "run 2: done" in outs["vm migrate tenant-b-vm0 --to h2 --cold"]
    assert '"run": {' in outs["rebalance --objective fragmentation --apply --yes --json"]
    assert "nothing was changed" in outs["rebalance --objective fragmentation --apply"]
    wrong = [(a, c, e) for a, c, e in zip(COMMANDS, codes, EXPECTED_CODES, strict=True) if c != e]
    assert wrong == []


SMALL = ("--vcpus", "2", "--memory", "4GiB")
GROUP_COMMANDS = [
    (["place", "tenant-a", *SMALL, "--group", "duo", "--affinity", "host", "--host", "h1", "--name", "d1"], 0),
    (["place", "tenant-b", *SMALL, "--group", "duo", "--affinity", "host", "--name", "d2", "--json"], 0),
    (["place", "tenant-a", *SMALL, "--group", "duo", "--name", "d3", "--strategy", "first-fit"], 0),
    (["place", "tenant-a", *SMALL, "--group", "duo", "--anti-affinity", "host", "--name", "d4"], 12),
    (["place", "tenant-a", *SMALL, "--group", "duo", "--anti-affinity", "host", "--name", "d4", "--json"], 12),
    (["place", "tenant-a", *SMALL, "--group", "duo", "--affinity", "host", "--host", "h2", "--explain"], 5),
    (["place", "tenant-a", *SMALL, "--group", "duo", "--affinity", "host", "--host", "h2", "--json"], 5),
    (["place", "tenant-a", *SMALL, "--affinity", "host"], 2),
    (["vm", "show", "d1"], 0), (["vm", "show", "d2", "--json"], 0), (["vm", "list", "--json"], 0),
    (["vm", "migrate", "d1", "--to", "h2", "--dry-run"], 5),
    (["host", "drain", "h1", "--json"], 0),  # the plan moves the group's VMs together, to h2
    (["host", "uncordon", "h1"], 0),
]


def test_replica_groups_through_the_service_print_what_they_print_locally(pair: tuple[Cli, Cli, Service]) -> None:
    """--affinity goes through --server as "affinity" in the place body; a group asked both ways is exit 12
    (HTTP 409, error GroupModeError) either way."""
    local, client, service = pair
    for args, code in GROUP_COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == code, (args, here.stderr)
    assert {vm: local("vm", "show", vm, "--json").json()["host"] for vm in ("d1", "d2", "d3")} == {
        "d1": "h1", "d2": "h1", "d3": "h1"
    }
    http = service.as_("root")
    body = {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "group": "duo", "anti_affinity": "host"}
    got = http.post("/v1/place", json=body)
    assert got.status_code == 409 and got.json()["error"] == "GroupModeError" and got.json()["exit_code"] == 12
    assert got.json()["type"] == "urn:vnuma:problem:group-mode"
    assert http.post("/v1/place", json={**body, "anti_affinity": None, "affinity": "rack"}).status_code == 422
    both = http.post("/v1/place", json={**body, "affinity": "host"})
    assert both.status_code == 422 and "exclude each other" in both.json()["detail"]


PARTITION_COMMANDS = [
    (["place", "tenant-a", *SMALL, "--mig", "3g.40gb:2", "--host", "h1", "--name", "m1", "--json"], 0),
    (["place", "tenant-a", *SMALL, "--mig", "7g.80gb", "--host", "h1", "--name", "m2"], 0),
    (["vm", "show", "m1", "--json"], 0),
    (["host", "show", "h1"], 0),  # each GPU's mode, layout and free partitions, as the claims leave them
    (["host", "show", "h1", "--json"], 0),
    (["place", "tenant-a", *SMALL, "--mig", "3g.40gb:x"], 4),
    (["place", "tenant-a", *SMALL, "--vgpu", "a", "--mig", "b"], 4),
    (["place", "tenant-a", *SMALL, "--gpus", "1", "--mig", "3g.40gb"], 4),
    (["place", "tenant-a", *SMALL, "--mig", "9g.99gb", "--json"], 4),  # no GPU of the fleet offers it: bad input
    (["place", "tenant-a", *SMALL, "--vgpu", "nvidia-1049"], 4),
    (["vm", "release", "m1", "--json"], 0),
]


def test_gpu_partitions_through_the_service_print_what_they_print_locally(pair: tuple[Cli, Cli, Service]) -> None:
    """--vgpu and --mig go through --server as "vgpu" and "mig" in the place body."""
    local, client, service = pair
    for args, code in PARTITION_COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == code, (args, here.stderr)
    layouts = [d["layout"] for d in local("host", "show", "h1", "--json").json()["devices"] if d["layout"]]
    assert sorted(h["profile"] for held in layouts for h in held) == ["7g.80gb"]  # m1 released
    shown = local("vm", "show", "m2", "--json").json()
    assert [(d["kind"], d["profile"]) for d in shown["devices"]] == [("mig", "7g.80gb")]
    http = service.as_("root")
    body = {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "mig": 2}  # a string, as on the command line
    assert http.post("/v1/place", json=body).status_code == 422


ALTERNATIVE_COMMANDS = [
    (["place", "tenant-a", *SMALL, "--gpus", "4", "--numa-nodes", "1", "--or", "mig=3g.40gb:2", "--or", "gpus=1",
      "--dry-run", "--explain"], 0),
    (["place", "tenant-a", *SMALL, "--gpus", "4", "--numa-nodes", "1", "--or", "mig=3g.40gb:2", "--name", "a1",
      "--explain", "--json"], 0),
    (["vm", "show", "a1"], 0),
    (["vm", "show", "a1", "--json"], 0),
    (["place", "tenant-a", *SMALL, "--gpus", "4", "--numa-nodes", "1", "--or", "gpus=3"], 5),
    (["place", "tenant-a", *SMALL, "--gpus", "4", "--numa-nodes", "1", "--or", "gpus=3", "--json"], 5),
    (["place", "tenant-a", *SMALL, "--or", "mig=9g.99gb"], 4),
    (["place", "tenant-a", *SMALL, "--or", "numa-nodes=2", "--json"], 4),
]


def test_alternatives_through_the_service_print_what_they_print_locally(pair: tuple[Cli, Cli, Service]) -> None:
    """--or goes through --server as "alternatives" in the place body (its texts); the alternative got, the
    explain and the refusal per alternative come back as the CLI prints them on the inventory itself."""
    local, client, _service = pair
    for args, code in ALTERNATIVE_COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == code, (args, here.stderr)
    assert local("vm", "show", "a1", "--json").json()["alternative"] == 1
    refused = local("place", "tenant-a", *SMALL, "--gpus", "4", "--numa-nodes", "1", "--or", "gpus=3", "--json")
    assert [u["alternative"] for u in refused.json()["alternatives"]] == [0, 1]


def test_commands_the_service_does_not_serve_say_so(pair: tuple[Cli, Cli, Service]) -> None:
    _local, client, _service = pair
    for args in (["trace", "export"], ["db", "status"], ["simulate", "x.json"], ["reconcile"]):
        res = client(*args)
        assert res.exit_code == 4 and "does not run through --server" in res.stderr, args
    for args, words in (
        (["place", "tenant-a", "--vcpus", "2", "--memory", "4GiB", "--rebalance"], "--rebalance runs where"),
        (["host", "add", "h3", "--capabilities", "caps.xml"], "reads no files"),
        (["host", "refresh", "--all"], "--all runs where"),
        (["render", "tenant-a-vm0", "--template", "t.j2"], "--template is read where"),
        (["stats", "--svg", "x.svg"], "pictures are drawn where"),
    ):
        res = client(*args)
        assert res.exit_code == 2 and words in res.stderr, args


def test_the_token_and_the_service_decide(pair: tuple[Cli, Cli, Service], monkeypatch: pytest.MonkeyPatch) -> None:
    _local, client, service = pair
    monkeypatch.setenv("VNUMA_TOKEN", service.tokens["alice"])
    res = client("place", "tenant-b", "--vcpus", "2", "--memory", "4GiB")
    assert res.exit_code == 11 and "acts for tenant 'tenant-a' only" in res.stderr
    assert client("vm", "show", "tenant-b-vm0").exit_code == 3
    assert [line.split()[0] for line in client("vm", "list").stdout.splitlines()[1:]] == ["tenant-a-vm0"]
    monkeypatch.setenv("VNUMA_TOKEN", "nonsense")
    res = client("host", "list")
    assert res.exit_code == 10 and res.stderr.startswith("error: malformed token")
    client.options = ["--server", "http://127.0.0.1:9"]
    res = client("host", "list")
    assert res.exit_code == 6 and "cannot be reached" in res.stderr and "Traceback" not in res.stderr


def test_the_log_and_tokens_through_the_service_are_the_served_inventorys(pair: tuple[Cli, Cli, Service]) -> None:
    """What these print depends on who asks (the log records the service's callers; a token's secret is new
    each time): through the service they equal the served inventory's own, read there."""
    _local, client, service = pair
    made = client("token", "create", "ci-bot", "--role", "tenant", "--tenant", "tenant-a", "--expires", "90d")
    assert made.exit_code == 0 and made.stdout.startswith("vnuma_")
    assert "token ci-bot (tenant, tenant tenant-a): shown once" in made.stderr
    assert client("token", "create", "ci-bot", "--role", "reader").exit_code == 9
    assert client("token", "create", "x", "--role", "reader", "--expires", "soon").exit_code == 4
    for args in (["token", "list"], ["token", "list", "--json"], ["log", "--json"], ["log", "--since", "1h"],
                 ["log", "--vm", "tenant-a-vm0", "--json"]):
        there, here = client(*args), service.cli(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
    assert "token:root" in client("log", "--limit", "3").stdout  # the creation above, done by token root
    revoked = client("token", "revoke", "ci-bot", "--json")
    assert revoked.exit_code == 0 and revoked.json()["revoked_at"]
    assert client("log", "--limit", "0").exit_code == 4


VIRCAPS = DATA / "libvirt" / "vircaps2xmldata" / "vircaps-x86_64-resctrl.xml"  # libvirt's: maxAllocs 4


def test_host_show_counts_classes_of_service_alike_through_the_service(pair: tuple[Cli, Cli, Service]) -> None:
    """``host show`` (table and JSON), ``host reserve --json`` and GET /v1/hosts/NAME carry the host-wide
    classes of service the VMs' slices leave, through --server as on the inventory itself."""
    local, client, service = pair
    # libvirt's file lists pools larger than its cells: the import keeps the 1 GiB pages (one on cell 0, two on
    # cell 1) and no 4 KiB ones, so these VMs take 1 GiB pages.
    slice_ = ["place", "tenant-a", "--vcpus", "1", "--memory", "1GiB", "--page-size", "1G", "--host", "rdt"]
    steps = [
        ["host", "import", "rdt", "--capabilities", str(VIRCAPS)], ["host", "reserve", "rdt", "--llc-ways", "2"],
        [*slice_, "--llc-ways", "2", "--name", "s1"], [*slice_, "--name", "plain"],
    ]
    for args in [*steps, ["host", "show", "rdt"], ["host", "show", "rdt", "--json"],
                 ["host", "reserve", "rdt", "--mem-bw-limit", "90", "--json"]]:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == 0, (args, here.stderr)
    assert "resctrl classes of service: 2 of 3 left" in local("host", "show", "rdt").stdout
    doc = local("host", "show", "rdt", "--json").json()
    assert doc["resctrl"]["classes"] == {"used": 1, "total": 3}
    assert local("host", "reserve", "rdt", "--mem-bw-limit", "100", "--json").json() == {
        **doc, "resctrl_policy": {"llc_default_ways": 2, "mem_bw_limit": 100}
    }
    got = service.as_("root").get("/v1/hosts/rdt")
    assert got.status_code == 200 and got.json()["resctrl"]["classes"] == {"used": 1, "total": 3}


def test_a_device_drain_through_the_service_prints_what_it_prints_locally(pair: tuple[Cli, Cli, Service]) -> None:
    """`device taint --effect drain` through --server: the service taints, plans and (with --apply --yes)
    carries the run out; the same lines and codes as on the inventory itself, refusals included."""
    local, client, _service = pair

    def alike(runs: list[tuple[list[str], int]]) -> None:
        for args, code in runs:
            here, there = local(*args), client(*args)
            assert (there.exit_code, there.stderr) == (here.exit_code, here.stderr), args
            assert _unstamped(there.stdout) == _unstamped(here.stdout), args
            assert here.exit_code == code, (args, here.stderr)

    for cli in (local, client):
        cli.ok("place", "tenant-a", *SMALL, "--gpus", "1", "--host", "h1", "--name", "g1")
        cli.ok("place", "tenant-b", *SMALL, "--gpus", "1", "--host", "h1", "--name", "g2")
    gpu, other = (next(d["address"] for d in local.ok("vm", "show", vm, "--json").json()["devices"]
                       if d["kind"] == "gpu") for vm in ("g1", "g2"))
    drain = ["device", "taint", "h1", gpu, "--reason", "Xid 79", "--effect", "drain"]
    alike([
        (drain, 0), ([*drain, "--json"], 0), ([*drain, "--apply"], 4),
        ([*drain, "--apply", "--yes", "--json"], 0), (["vm", "show", "g1", "--json"], 0),
        (["device", "list", "--host", "h1", "--state", "tainted", "--json"], 0),
    ])
    assert gpu not in [d["address"] for d in local.ok("vm", "show", "g1", "--json").json()["devices"]]
    free = [d["address"] for d in local.ok("device", "list", "--host", "h1", "--state", "free", "--json").json()
            if d["kind"] == "gpu"]
    for cli in (local, client):
        cli.ok("host", "cordon", "h2")
        for address in free:  # g2 then fits nowhere but on its own GPU
            cli.ok("device", "taint", "h1", address, "--reason", "spare")
    stuck = ["device", "taint", "h1", other, "--reason", "Xid 79", "--effect", "drain"]
    alike([(stuck, 5), ([*stuck, "--json"], 5), ([*stuck, "--partial", "--json"], 0)])


def _unstamped(stdout: str) -> object:
    """A command's output without who tainted and when (the user here, ``token:NAME`` through the service)."""
    import json
    import re

    if not stdout.startswith(("{", "[")):
        return stdout
    return json.loads(re.sub(r'"(by|since)": "[^"]*"', r'"\1": ""', stdout))
