"""`POST /v1/place` under load: a running `vnuma serve` on a PostgreSQL inventory, 1, 8 and 32 clients.

The fleet is `bench_fleet.py`'s hardware model (4 cells x 16 cores x 2
threads, 2 GPUs per cell), ``--hosts`` copies in a scratch database on the
server ``--pg`` names (default ``$VNUMA_TEST_PG``; created and dropped). The
service runs as its own process (``--workers`` uvicorn workers, no rate
limit); each client is a thread with its own HTTP connection placing
``--requests`` VMs (4 vCPUs, 16 GiB in 1 GiB pages) one after another.
Prints, per client count: placements per second, p50 and p99 latency, the
answers other than 201, beside the issue's goal (p99 <= 20 ms at 8 clients
on 1,000 hosts), and where the CPU went: milliseconds per request of the
service (its workers included), of PostgreSQL (every ``postgres`` process on
this machine: run it on its own) and of the load generator, and how busy
that kept the machine's CPUs.

    .venv/bin/python bench/bench_api.py [--hosts 1000] [--workers 1] [--clients 1,8,32] [--requests 25]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
from bench_fleet import fleet_host
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from vnuma.inventory import open_inventory
from vnuma.inventory.db import upgrade
from vnuma.placement.model import Isolation, Tenant
from vnuma.services import Settings
from vnuma.services.tokens import Role, create_token

GOAL_P99_MS = 20.0


def build(url: str, hosts: int) -> None:
    """``hosts`` copies of the fleet host and tenant acme in the database at ``url``."""
    upgrade(url)
    with open_inventory(url) as inv:
        inv.add_host(fleet_host())
        inv.add_tenant(Tenant("acme", Isolation.CORE))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cols = [r[0] for r in conn.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'hosts' "
                "AND column_name NOT IN ('id', 'name')")]
            names = ", ".join(cols)
            conn.exec_driver_sql(
                f"INSERT INTO hosts (name, {names}) SELECT 'host-' || lpad(g::text, 5, '0'), {names} "
                f"FROM hosts, generate_series(1, {hosts - 1}) AS g WHERE name = 'host-00000'"
            )
    finally:
        engine.dispose()


def serve(url: str, workers: int, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "vnuma.cli", "--db", url, "serve", "--listen", f"127.0.0.1:{port}",
             "--workers", str(workers), "--rate-limit", "0"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200:
                return base, proc
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"the service did not start: {log.read_text()}")


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_stats() -> list[tuple[int, int, str, float]]:
    """(pid, parent pid, command, CPU seconds) of every process (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        out.append((int(entry), int(fields[1]), comm, (int(fields[11]) + int(fields[12])) / _TICK))
    return out


def cpu_seconds(service: int) -> dict[str, float]:
    """CPU seconds so far of the service (its process and its workers), of PostgreSQL (every ``postgres``
    process) and of this load generator."""
    stats = _proc_stats()
    mine = os.times()
    return {
        "service": sum(cpu for pid, ppid, _c, cpu in stats if service in (pid, ppid)),
        "postgres": sum(cpu for _p, _pp, comm, cpu in stats if comm == "postgres"),
        "clients": mine.user + mine.system,
    }


def load(base: str, token: str, clients: int, requests: int, tag: str) -> tuple[float, list[float], Counter[int]]:
    """``clients`` threads x ``requests`` placements; (wall seconds, latencies in ms, answers)."""
    latencies: list[float] = []
    answers: Counter[int] = Counter()
    lock = threading.Lock()
    go = threading.Barrier(clients)

    def client(k: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
            go.wait()
            for i in range(requests):
                body = {"tenant": "acme", "vcpus": 4, "memory": "16GiB", "page_size": "1G",
                        "name": f"{tag}-{k}-{i}"}
                start = time.perf_counter()
                status = http.post("/v1/place", json=body).status_code
                took = (time.perf_counter() - start) * 1000
                with lock:
                    latencies.append(took)
                    answers[status] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, latencies, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--requests", type=int, default=25)
    parser.add_argument("--pg", default=os.environ.get("VNUMA_TEST_PG"))
    args = parser.parse_args()
    if not args.pg:
        raise SystemExit("give --pg URL or set VNUMA_TEST_PG (a PostgreSQL server)")
    name = f"vnuma_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = make_url(args.pg).set(database=name).render_as_string(hide_password=False)
    proc = None
    try:
        build(url, args.hosts)
        _t, token = create_token(Settings(db_url=url), "bench", Role.OPERATOR)
        with tempfile.TemporaryDirectory() as tmp:
            base, proc = serve(url, args.workers, Path(tmp) / "serve.log")
            load(base, token, 1, 3, "warm")  # first requests pay the imports
            print(f"inventory: {args.hosts} hosts (PostgreSQL); service: {args.workers} worker(s)\n")
            print("| clients | placements | per second | p50 ms | p99 ms | other answers | goal p99 ms "
                  "| CPU ms per placement: service / PostgreSQL / clients | CPUs busy |")
            print("|---|---|---|---|---|---|---|---|---|")
            for clients in (int(c) for c in args.clients.split(",")):
                before = cpu_seconds(proc.pid)
                wall, lat, answers = load(base, token, clients, args.requests, f"c{clients}")
                used = {k: v - before[k] for k, v in cpu_seconds(proc.pid).items()}
                lat.sort()
                p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
                other = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()) if k != 201) or "-"
                each = " / ".join(f"{1000 * used[k] / max(1, len(lat)):.1f}" for k in used)
                busy = sum(used.values()) / (wall * (os.cpu_count() or 1))
                print(f"| {clients} | {answers[201]} | {answers[201] / wall:.1f} | {statistics.median(lat):.1f} "
                      f"| {p99:.1f} | {other} | {GOAL_P99_MS:.0f} | {each} | {busy:.0%} |", flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


if __name__ == "__main__":
    main()
