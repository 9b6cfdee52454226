"""Fixtures for ``vnuma reconcile`` against libvirt's test driver, in-process.

``test:///default`` keeps its domains only while some connection to it is
open, and every test of the process shares them: the ``conn`` fixture holds
a connection for the test, then undefines every domain the test defined and
puts the driver's stock running domain ``test`` back if the test removed it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.conftest import Cli, cli, dumped  # noqa: F401 (fixtures reused)

URI = "test:///default"
STOCK = "test"
VM_ARGS = ("--vcpus", "2", "--memory", "512MiB", "--page-size", "4K", "--numa-nodes", "1")


@pytest.fixture
def without_stock(conn: Any) -> Any:
    """The driver without its stock domain ``test`` (restored by ``conn``): a host vnuma fully explains."""
    dom = conn.lookupByName(STOCK)
    if dom.isActive():
        dom.destroy()
    dom.undefine()
    return conn


def fleet(runner: Cli, *applied: tuple[str, str]) -> None:
    """Host h1 on the test driver, tenant acme, and one VM per (name, how): how is placed, defined or running."""
    runner.ok("host", "add", "h1", "--uri", URI)
    runner.ok("tenant", "create", "acme")
    for name, how in applied:
        runner.ok("place", "acme", *VM_ARGS, "--name", name)
        if how != "placed":
            runner.ok("apply", name, "--domain-type", "qemu", *(("--start",) if how == "running" else ()))


def findings(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Findings of a ``reconcile --json`` document by name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for host in doc["hosts"]:
        for f in host["findings"]:
            out.setdefault(f["name"], []).append(f)
    return out
