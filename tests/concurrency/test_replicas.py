"""Two `vnuma serve` replicas (separate ports, each its own warm ledger) and CLI processes on one PostgreSQL
inventory, as operators run them behind a load balancer (docs/operations.md).

* placing, moving and releasing through both replicas and the CLI at once books nothing twice (the
  independent audit of :mod:`.consistency`), and the inventory holds exactly the VMs the callers were told;
* a claim made through one replica (or the CLI) is seen by the other at its very next request: its
  decision (a dry run, decided on its warm ledger alone) never proposes those pCPUs or GPUs, its real
  placement never takes them, and its VM reads list the VM;
* a replica killed by SIGKILL mid-claim (the ``claimed`` failpoint, and at random moments while its
  claims are in flight) leaves each VM whole or absent, and the other replica keeps serving;
* a failover's dropped connections cost the replicas nothing: their next requests connect again.

Real processes only: ``python -m vnuma.cli serve`` and ``python -m vnuma.cli`` against the database of the
``pg_url`` fixture (``VNUMA_TEST_PG``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import start
from tests.cli.conftest import REPO
from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import make_fleet, recorded_vms
from vnuma.services import Settings
from vnuma.services.failpoints import ENV as FAILPOINT
from vnuma.services.tokens import Role, create_token

ANSWERS = {201, 409, 503}  # placed; no fit or lost every claim attempt; inventory unreachable
MOVED = {200, 409, 503}  # moved; no room on the target or lost the race
CLI_EXITS = {0, 5, 9}  # done, no fit, inventory busy
CLIENTS = 8


@dataclass
class Replicas:
    """Two serving processes on one inventory and an operator token valid on both."""

    url: str
    tmp: Path
    secret: str
    bases: list[str]
    procs: list[subprocess.Popen[bytes]]

    def http(self) -> httpx.Client:
        return httpx.Client(headers={"Authorization": f"Bearer {self.secret}"}, timeout=120)

    def spawn(self, log: str, env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[bytes]]:
        """One more replica (``env``: extra environment, e.g. a failpoint)."""
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            base, proc = start(self.url, self.tmp / log, "--rate-limit", "0")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.procs.append(proc)
        return base, proc


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[Replicas]:
    make_fleet(pg_url)
    _token, secret = create_token(Settings(db_url=pg_url), "replicas", Role.OPERATOR)
    found = Replicas(pg_url, tmp_path, secret, [], [])
    for i in range(2):
        found.bases.append(found.spawn(f"serve-{i}.log")[0])
    yield found
    for proc in found.procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vnuma.cli", "--db", url, *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={k: v for k, v in os.environ.items() if k != FAILPOINT})


def _body(rng: random.Random, name: str) -> dict[str, Any]:
    return {"tenant": rng.choice(("acme", "beta")), "vcpus": rng.choice((1, 2, 2, 4, 6)),
            "memory": f"{rng.choice((1, 2, 4))}GiB", "gpus": rng.choice((0, 0, 0, 1)), "page_size": "1G",
            "name": name}


def _held(doc: dict[str, Any]) -> tuple[set[int], set[str]]:
    """The pCPUs (vCPUs' and emulator's) and the device addresses a placement document holds."""
    cpus = {c for cell in doc["cells"] for c in cell["pcpus"]} | set(doc.get("emulator_pcpus") or ())
    return cpus, {d["address"] for d in doc["devices"]}


@pytest.mark.slow
def test_replicas_and_cli_place_move_and_release_without_double_booking(replicas: Replicas) -> None:
    held: set[str] = set()
    problems: list[str] = []
    placed: list[int] = []
    moved: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(CLIENTS + 1)

    def client(k: int) -> None:
        rng = random.Random(3700 + k)
        mine: dict[str, str] = {}  # VM -> its host
        with replicas.http() as http:
            go.wait()
            for i in range(16):
                base = replicas.bases[(k + i) % 2]  # a load balancer's round robin
                roll = rng.random()
                if mine and roll < 0.25:
                    name = rng.choice(sorted(mine))
                    del mine[name]
                    got = http.post(f"{base}/v1/vms/{name}/release", json={})
                    with lock:
                        held.discard(name)
                        if got.status_code != 200:
                            problems.append(f"release {name}: {got.status_code} {got.text}")
                    continue
                if mine and roll < 0.5:
                    name = rng.choice(sorted(mine))
                    to = rng.choice([h for h in ("host-0", "host-1", "host-2") if h != mine[name]])
                    got = http.post(f"{base}/v1/vms/{name}/migrate", json={"to": to})
                    if got.status_code == 200:
                        mine[name] = to
                        moved.append(name)
                    elif got.status_code not in MOVED:
                        with lock:
                            problems.append(f"migrate {name} to {to}: {got.status_code} {got.text}")
                    continue
                name = f"c{k}-{i}"
                # Large memory in 1 GiB pages: the hosts' page pools run full, the pools no unique index guards.
                got = http.post(f"{base}/v1/place", json={**_body(rng, name), "memory": f"{rng.choice((4, 6, 8))}GiB"})
                with lock:
                    placed.append(got.status_code)
                    if got.status_code == 201:
                        held.add(name)
                        mine[name] = got.json()["host"]
                    elif got.status_code not in ANSWERS:
                        problems.append(f"place {name}: {got.status_code} {got.text}")

    def operator() -> None:
        go.wait()
        for i in range(4):
            host = f"host-{i % 3}"
            steps = [("place", "beta", "--vcpus", "2", "--memory", "2GiB", "--page-size", "1G", "--name", f"cli-{i}",
                      "--host", host),
                     ("vm", "migrate", f"cli-{i}", "--to", f"host-{(i + 1) % 3}")]
            if i % 2:
                steps.append(("vm", "release", f"cli-{i}"))
            for args in steps:
                proc = _cli(replicas.url, *args)
                with lock:
                    if proc.returncode not in CLI_EXITS or "Traceback" in proc.stderr:
                        problems.append(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
                    elif proc.returncode == 0 and args[0] == "place":
                        held.add(f"cli-{i}")
                    elif proc.returncode == 0 and args[1] == "migrate":
                        # A CLI move among the replicas' requests is a move too: the clients' own moves mostly
                        # find the pools full (0-3 per run, so "some move happened" failed about 1 run in 6).
                        moved.append(f"cli-{i}")
                    elif proc.returncode == 0 and args[1] == "release":
                        held.discard(f"cli-{i}")
                if proc.returncode != 0 and args[0] == "place":
                    break

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)] + [threading.Thread(target=operator)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    assert problems == []
    assert placed.count(201) > 0 and moved
    assert set(recorded_vms(replicas.url)) == held  # exactly the VMs the callers were told they hold
    assert inconsistencies(replicas.url) == []  # no pCPU, page or device held twice; every claim row whole


def _seen_by(http: httpx.Client, base: str, vm: dict[str, Any], probe: dict[str, Any]) -> None:
    """``base``'s next requests see ``vm``: a dry run of ``probe`` (same host) and its real placement keep off
    the VM's pCPUs and GPUs, and the VM reads list it."""
    cpus, devices = _held(vm)
    dry = http.post(f"{base}/v1/place", json={**probe, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["host"] == vm["host"]
    dry_cpus, dry_devices = _held(dry.json())
    assert not dry_cpus & cpus and not dry_devices & devices, f"{base}'s ledger missed {vm['vm']}"
    got = http.post(f"{base}/v1/place", json=probe)
    assert got.status_code == 201, got.text
    got_cpus, got_devices = _held(got.json())
    assert not got_cpus & cpus and not got_devices & devices
    shown = http.get(f"{base}/v1/vms/{vm['vm']}")
    assert shown.status_code == 200 and shown.json()["host"] == vm["host"]
    listed = http.get(f"{base}/v1/vms", params={"host": vm["host"]})
    assert vm["vm"] in {v["vm"] for v in listed.json()}


def _ask(name: str, host: str) -> dict[str, Any]:
    return {"tenant": "acme", "vcpus": 6, "memory": "4GiB", "page_size": "1G", "gpus": 1, "host": host,
            "name": name}


@pytest.mark.slow
def test_each_replica_sees_the_others_claims_at_its_next_request(replicas: Replicas) -> None:
    a, b = replicas.bases
    with replicas.http() as http:
        for base in (a, b):  # both ledgers warm before the other's claims
            assert http.post(f"{base}/v1/place", json={**_ask("warm", "host-0"), "dry_run": True}).status_code == 200
        for i, (first, second) in enumerate(((a, b), (b, a))):
            host = f"host-{i}"
            claimed = http.post(f"{first}/v1/place", json=_ask(f"first-{i}", host))
            assert claimed.status_code == 201, claimed.text
            _seen_by(http, second, claimed.json(), _ask(f"second-{i}", host))
        proc = _cli(replicas.url, "place", "acme", "--vcpus", "6", "--memory", "4GiB", "--page-size", "1G",
                    "--gpus", "1", "--host", "host-2", "--name", "by-cli", "--json")
        assert proc.returncode == 0, proc.stderr
        for n, base in enumerate((a, b)):
            _seen_by(http, base, json.loads(proc.stdout), _ask(f"after-cli-{n}", "host-2"))
    assert inconsistencies(replicas.url) == []


@pytest.mark.slow
def test_a_replica_killed_mid_claim_leaves_the_vm_whole_and_the_other_keeps_serving(replicas: Replicas) -> None:
    """The ``claimed`` failpoint kills the replica right after its claim committed, before it answers."""
    survivor = replicas.bases[1]
    doomed, proc = replicas.spawn("doomed.log", {FAILPOINT: "claimed"})
    with replicas.http() as http:
        warm = http.post(f"{survivor}/v1/place", json={**_ask("warm", "host-0"), "dry_run": True})
        assert warm.status_code == 200  # the survivor's ledger is built before the claim it must learn of
        with pytest.raises(httpx.TransportError):
            http.post(f"{doomed}/v1/place", json=_ask("orphan", "host-0"))
        assert proc.wait(30) == -signal.SIGKILL
        vms = recorded_vms(replicas.url)
        assert "orphan" in vms and inconsistencies(replicas.url) == []  # whole: every claim row with it
        _seen_by(http, survivor, vms["orphan"], _ask("after-kill", "host-0"))
    assert inconsistencies(replicas.url) == []


@pytest.mark.slow
def test_replicas_killed_at_random_moments_leave_vms_whole_or_absent(replicas: Replicas) -> None:
    """Each trial a third replica takes placements while the survivor serves others; it is killed by SIGKILL
    at a random moment: each VM it was asked for is whole or absent, the survivor answered every request."""
    rng = random.Random(20261207)
    survivor = replicas.bases[0]
    asked: list[str] = []
    answered: dict[str, int] = {}
    problems: list[str] = []
    cut: list[str] = []  # requests whose connection died with their replica
    with replicas.http() as http:
        for trial in range(4):
            doomed, proc = replicas.spawn(f"doomed-{trial}.log")
            stop = threading.Event()

            def place(base: str, prefix: str, seed: int, stop: threading.Event = stop) -> None:
                pick = random.Random(seed)
                for i in range(6):
                    if stop.is_set():
                        return
                    name = f"{prefix}-{i}"
                    asked.append(name)
                    try:
                        got = http.post(f"{base}/v1/place", json=_body(pick, name))
                        answered[name] = got.status_code
                        if got.status_code not in ANSWERS:
                            problems.append(f"place {name} through {base}: {got.status_code} {got.text}")
                        if got.status_code == 201 and pick.random() < 0.5:
                            http.post(f"{base}/v1/vms/{name}/release", json={})
                    except httpx.TransportError:
                        cut.append(name)  # the connection died with the replica
                        return

            racers = [threading.Thread(target=place, args=(doomed, f"d{trial}", trial)),
                      threading.Thread(target=place, args=(survivor, f"s{trial}", 100 + trial))]
            for t in racers:
                t.start()
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            stop.set()
            for t in racers:
                t.join(300)
            assert inconsistencies(replicas.url) == [], f"trial {trial}"  # whole or absent, nothing half-claimed
            assert all(answered.get(n) is not None for n in asked if n.startswith("s")), "the survivor stopped"
        assert problems == [] and cut, f"no request was in flight when its replica was killed: {answered}"
        final = http.post(f"{survivor}/v1/place", json=_ask("last", "host-1"))
        assert final.status_code in (201, 409), final.text
    assert inconsistencies(replicas.url) == []


@pytest.mark.slow
def test_replicas_serve_on_after_their_database_connections_drop(replicas: Replicas) -> None:
    """A PostgreSQL failover (or restart) drops every connection the replicas keep open between requests: their
    next requests connect again and are served; nothing they did before is lost."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    with replicas.http() as http:
        for n, base in enumerate(replicas.bases):  # both replicas hold open connections now
            assert http.post(f"{base}/v1/place", json=_ask(f"before-{n}", f"host-{n}")).status_code == 201
        engine = create_engine(replicas.url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:  # each session ended (waited for) before the next requests
                dropped = conn.execute(text(
                    "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": make_url(replicas.url).database},
                ).scalar()
        finally:
            engine.dispose()
        assert dropped and dropped >= 2
        for n, base in enumerate(replicas.bases):
            got = http.post(f"{base}/v1/place", json=_ask(f"after-{n}", f"host-{n}"))
            assert got.status_code == 201, got.text
            moved = http.post(f"{base}/v1/vms/before-{n}/migrate", json={"to": "host-2"})
            assert moved.status_code == 200, moved.text
            assert http.post(f"{base}/v1/vms/after-{n}/release", json={}).status_code == 200
    assert sorted(recorded_vms(replicas.url)) == ["before-0", "before-1"]
    assert inconsistencies(replicas.url) == []


@pytest.mark.slow
def test_claims_wait_for_each_other_whatever_the_servers_default_isolation(replicas: Replicas) -> None:
    """Claims on one host through two replicas wait for each other's host lock and all succeed, also on a
    server whose ``default_transaction_isolation`` is ``repeatable read`` (vnuma's writes set READ COMMITTED:
    at the server's default they failed with serialization errors, answered 503)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(replicas.url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            name = make_url(replicas.url).database
            conn.execute(text(f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'"))
    finally:
        engine.dispose()
    bases = [replicas.spawn(f"rr-{i}.log")[0] for i in range(2)]  # new sessions: the new default
    answers: list[tuple[int, str]] = []
    go = threading.Barrier(8)

    def client(k: int) -> None:
        with replicas.http() as http:
            go.wait()
            for i in range(3):
                body = {"tenant": "beta", "vcpus": 1, "memory": "1GiB", "page_size": "1G", "host": "host-0",
                        "name": f"v{k}-{i}"}
                got = http.post(f"{bases[k % 2]}/v1/place", json=body)
                answers.append((got.status_code, got.text))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [a for a in answers if a[0] != 201] == []
    assert len(recorded_vms(replicas.url)) == 24
    assert inconsistencies(replicas.url) == []
