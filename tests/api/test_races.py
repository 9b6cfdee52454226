"""Two `vnuma serve` processes and a CLI placing on one inventory: nothing double-booked; a worker killed
by SIGKILL mid-place leaves a complete VM or none. SQLite and PostgreSQL (the ``url`` fixture)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import start
from tests.cli.conftest import REPO
from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import make_fleet, recorded_vms
from vnuma.services import Settings
from vnuma.services.tokens import Role, create_token

CLIENTS = 8
PLACEMENTS = 20
ANSWERS = {201, 409, 503}  # placed; no fit or lost every claim attempt; inventory locked (SQLite)


def _body(rng: random.Random, name: str) -> dict[str, Any]:
    return {"tenant": rng.choice(("acme", "beta")), "vcpus": rng.choice((1, 2, 2, 4, 6)),
            "memory": f"{rng.choice((1, 2, 4))}GiB", "gpus": rng.choice((0, 0, 0, 1)), "page_size": "1G",
            "name": name}


@pytest.mark.slow
def test_two_services_and_a_cli_never_double_book(url: str, tmp_path: Path) -> None:
    make_fleet(url)
    _token, secret = create_token(Settings(db_url=url), "racer", Role.OPERATOR)
    services = [start(url, tmp_path / f"serve-{i}.log", "--rate-limit", "0")[0:2] for i in range(2)]
    held: dict[str, dict[str, Any]] = {}
    answers: list[int] = []
    problems: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(CLIENTS + 1)

    def client(k: int) -> None:
        rng = random.Random(1000 + k)
        with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=120) as http:
            go.wait()
            mine: list[str] = []
            for i in range(PLACEMENTS):
                base = services[(k + i) % 2][0]
                if mine and rng.random() < 0.3:  # release one of its own, so the hosts never stay full
                    name = mine.pop(rng.randrange(len(mine)))
                    got = http.post(f"{base}/v1/vms/{name}/release", json={})
                    with lock:
                        if got.status_code != 200:
                            problems.append(f"release {name}: {got.status_code} {got.text}")
                        held.pop(name, None)
                    continue
                name = f"c{k}-{i}"
                got = http.post(f"{base}/v1/place", json=_body(rng, name))
                with lock:
                    answers.append(got.status_code)
                    if got.status_code == 201:
                        held[name] = got.json()
                        mine.append(name)
                    elif got.status_code not in ANSWERS or "problem+json" not in got.headers["content-type"]:
                        problems.append(f"place {name}: {got.status_code} {got.text}")

    def cli() -> None:
        go.wait()
        for i in range(6):
            proc = subprocess.run(
                [sys.executable, "-m", "vnuma.cli", "--db", url, "place", "acme", "--vcpus", "2", "--memory",
                 "2GiB", "--page-size", "1G", "--name", f"cli-{i}", "--json"],
                capture_output=True, text=True, cwd=REPO, timeout=300, env=os.environ.copy(),
            )
            with lock:
                if proc.returncode == 0:
                    held[f"cli-{i}"] = __import__("json").loads(proc.stdout)
                elif proc.returncode not in (5, 6, 9):
                    problems.append(f"cli place: exit {proc.returncode}: {proc.stderr}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)] + [threading.Thread(target=cli)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        for _base, proc in services:
            proc.terminate()
            proc.wait(10)
    assert problems == []
    assert answers.count(201) > 0 and set(answers) <= ANSWERS
    assert recorded_vms(url) == held  # exactly the VMs the clients were told they got, each as answered
    assert inconsistencies(url) == []  # no pCPU, page or device held twice; every claim row whole


@pytest.mark.slow
def test_a_worker_killed_mid_place_leaves_a_whole_vm_or_none(url: str, tmp_path: Path) -> None:
    make_fleet(url)
    _token, secret = create_token(Settings(db_url=url), "killer", Role.OPERATOR)
    rng = random.Random(20261204)
    killed_before = killed_after = 0
    for trial in range(8):
        base, proc = start(url, tmp_path / "serve.log", "--rate-limit", "0")
        name = f"k{trial}"
        outcome: list[int] = []

        def place(base: str = base, name: str = name, outcome: list[int] = outcome, seed: int = trial) -> None:
            try:
                got = httpx.post(f"{base}/v1/place", json=_body(random.Random(seed), name), timeout=30,
                                 headers={"Authorization": f"Bearer {secret}"})
                outcome.append(got.status_code)
            except httpx.TransportError:
                outcome.append(0)  # the connection died with the worker

        caller = threading.Thread(target=place)
        caller.start()
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        caller.join(60)
        vms = recorded_vms(url)
        if outcome == [201]:
            assert name in vms
        if name in vms:
            killed_after += 1
        else:
            killed_before += 1
        assert inconsistencies(url) == [], f"trial {trial}"
    assert killed_before + killed_after == 8
