"""API fixtures: an inventory with two demo hosts, tenants and tokens, served by a real `vnuma serve` process."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import REPO, Cli

TOKENS = {  # name -> (role, tenant)
    "root": ("admin", None),
    "ops": ("operator", None),
    "watch": ("reader", None),
    "alice": ("tenant", "tenant-a"),
    "bob": ("tenant", "tenant-b"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    """A running `vnuma serve` over ``cli``'s inventory, and a bearer token per name in :data:`TOKENS`."""

    cli: Cli
    base: str
    tokens: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def as_(self, name: str | None) -> httpx.Client:
        """A client sending token ``name`` (None: no token)."""
        key = name or ""
        if key not in self.clients:
            headers = {"Authorization": f"Bearer {self.tokens[name]}"} if name else {}
            self.clients[key] = httpx.Client(base_url=self.base, headers=headers, timeout=60)
        return self.clients[key]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(
    db: str, log: Path, *extra: str, scheme: str = "http", verify: ssl.SSLContext | bool = True
) -> tuple[str, subprocess.Popen[bytes]]:
    """`vnuma --db DB serve` on a free port, once it answers; (base URL, process)."""
    port = free_port()
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "vnuma.cli", "--db", db, "serve", "--listen", f"127.0.0.1:{port}", *extra],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=os.environ.copy(),
        )
    base = f"{scheme}://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"vnuma serve exited {proc.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"{base}/openapi.json", timeout=2, verify=verify).status_code == 200:
                return base, proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"vnuma serve did not answer in 30 s: {log.read_text()}")


def prepared(cli: Cli) -> dict[str, str]:
    """Two demo hosts (4 cells x 32 pCPUs, 2 GPUs per cell) whose GPUs have a MIG geometry, tenants a and b, a
    VM of each; the tokens."""
    cli.ok("host", "add", "h1", "--demo")
    cli.ok("host", "add", "h2", "--demo")
    cli.ok("gpu-profile", "import", str(REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json"))
    for t in ("tenant-a", "tenant-b"):
        cli.ok("tenant", "create", t)
        cli.ok("place", t, "--vcpus", "4", "--memory", "8GiB", "--name", f"{t}-vm0")
    tokens = {}
    for name, (role, tenant) in TOKENS.items():
        args = ["token", "create", name, "--role", role, *(["--tenant", tenant] if tenant else [])]
        tokens[name] = cli.ok(*args, "--json").json()["token"]
    return tokens


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    log = tmp_path / "serve.log"
    base, proc = start(str(cli.db), log)
    svc = Service(cli, base, tokens, proc, log)
    yield svc
    svc.close()
