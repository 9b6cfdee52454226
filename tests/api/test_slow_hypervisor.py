"""A hypervisor that does not answer holds up only the request waiting on it: placements, reads and domain
changes on other hosts go on.

The slow hypervisor is real libvirt: host ``stuck``'s URI is a test-driver node file that is a named pipe. Its
contents are written into the pipe while the host is added; later, nothing writes, so libvirt's
``virConnectOpen`` blocks reading it, as a connection to a hung host blocks, until the test lets it through.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Service, prepared, start
from tests.cli.conftest import Cli
from vnuma.sources.demo import demo_capabilities_path, demo_node_path


class Pipe:
    """A named pipe that hands out the demo node file to each reader the test lets through."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path

    def feed(self) -> threading.Thread:
        """Write the node file into the pipe once (blocks in a thread until a reader opens it)."""

        def write() -> None:
            with self.path.open("wb") as pipe:
                pipe.write(demo_node_path().read_bytes())

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread


@pytest.fixture
def stuck(tmp_path: Path) -> tuple[Service, Pipe]:
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    pipe = Pipe(tmp_path / "stuck-node.xml")
    pipe.feed()
    cli.ok("host", "add", "stuck", "--uri", f"test://{pipe.path}", "--capabilities", str(demo_capabilities_path()))
    cli.ok("place", "tenant-a", "--vcpus", "4", "--memory", "8GiB", "--name", "slow-vm", "--host", "stuck")
    base, proc = start(str(cli.db), tmp_path / "serve.log")
    svc = Service(cli, base, tokens, proc, tmp_path / "serve.log")
    yield svc, pipe
    svc.close()


def test_a_hung_libvirt_blocks_only_its_own_request(stuck: tuple[Service, Pipe]) -> None:
    """Other requests are answered while the hung one is still waiting (they would time out behind it)."""
    svc, pipe = stuck
    ops = svc.as_("ops")
    with ThreadPoolExecutor(1) as pool:
        hung = pool.submit(ops.post, "/v1/vms/slow-vm/apply", json={"start": True})
        time.sleep(1.0)  # the apply is now inside virConnectOpen, waiting on the pipe
        assert not hung.done()
        with httpx.Client(base_url=svc.base, headers=ops.headers, timeout=20) as other:
            for i in range(5):
                got = other.post("/v1/place", json={
                    "tenant": "tenant-b", "vcpus": 2, "memory": "4GiB", "name": f"quick-{i}", "host": "h2"})
                assert got.status_code == 201, got.text
            assert other.post("/v1/vms/quick-0/apply", json={"start": True}).json()["state"] == "running"
            assert other.get("/v1/vms/quick-0").status_code == 200
            assert other.get("/v1/stats").status_code == 200
        assert not hung.done(), "the hung apply came back before libvirt was let through"
        pipe.feed()  # let libvirt read its node file: the apply goes on and starts the domain
        answer = hung.result(timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "running"
    states = {vm["vm"]: vm["state"] for vm in ops.get("/v1/vms").json()}
    assert states["slow-vm"] == "running" and states["quick-0"] == "running"
    assert sum(name.startswith("quick-") for name in states) == 5
