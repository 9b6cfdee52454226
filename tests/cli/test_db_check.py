"""`vnuma db check`: an inventory vnuma wrote is consistent; a claim row or summary column changed behind its back
is named (host, VM, what, kept, expected), exit 16, and nothing is written — on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests.cli.conftest import REPO, Result
from vnuma.cli import app
from vnuma.inventory import upgrade
from vnuma.inventory.db import make_engine

CAPS = REPO / "tests" / "data" / "capabilities"
GEOMETRY = REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json"


def _run(url: str, *args: str) -> Result:
    res = CliRunner().invoke(app, ["--db", url, *args], catch_exceptions=False)
    return Result(res.exit_code, res.stdout, res.stderr)


def _ok(url: str, *args: str) -> Result:
    res = _run(url, *args)
    assert res.exit_code == 0, (args, res.stdout, res.stderr)
    return res


@pytest.fixture
def fleet(url: str) -> str:
    """A demo GPU host with a kept MIG geometry and a host with cache and bandwidth allocation, and VMs holding
    every kind of claim: pinned pCPUs, hugepages, whole GPUs, a MIG partition, cache ways and a bandwidth cap."""
    upgrade(url)
    _ok(url, "host", "add", "gpu", "--demo")
    _ok(url, "host", "import", "rdt", "--capabilities", str(CAPS / "x86-2cell-smt-resctrl.xml"))
    _ok(url, "host", "reserve", "rdt", "--llc-ways", "2")
    _ok(url, "gpu-profile", "import", str(GEOMETRY))
    _ok(url, "tenant", "create", "acme")
    _ok(url, "place", "acme", "--name", "whole", "--vcpus", "8", "--memory", "16GiB", "--page-size", "1G",
        "--gpus", "2")
    _ok(url, "place", "acme", "--name", "mig", "--mig", "3g.40gb")
    _ok(url, "place", "acme", "--name", "sliced", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M",
        "--llc-ways", "2", "--mem-bw", "20", "--host", "rdt")
    return url


def _tables(url: str) -> dict[str, list[Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {t: sorted(map(tuple, conn.execute(text(f"SELECT * FROM {t}"))), key=repr)
                    for t in ("hosts", "vms", "cpu_claims", "page_claims", "device_claims", "resctrl_claims",
                              "partition_claims")}
    finally:
        engine.dispose()


def _tamper(url: str, sql: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text(sql)).rowcount == 1
    finally:
        engine.dispose()


def test_what_vnuma_wrote_is_consistent(fleet: str) -> None:
    res = _ok(fleet, "db", "check", "--json")
    assert res.json() == {"hosts": 2, "vms": 3, "problems": []}
    assert _ok(fleet, "db", "check").stdout == "inventory consistent: 2 host(s), 3 VM(s) checked\n"


VM_OF = "(SELECT id FROM vms WHERE name = '{vm}')"
TAMPERING = [
    pytest.param(
        f"DELETE FROM cpu_claims WHERE vm_id = {VM_OF.format(vm='whole')} "
        f"AND cpu_id = (SELECT MIN(cpu_id) FROM cpu_claims WHERE vm_id = {VM_OF.format(vm='whole')})",
        ("gpu", "whole", "cpu claims"), id="a-pinned-cpu-lost"),
    pytest.param(f"UPDATE page_claims SET count = count + 1 WHERE vm_id = {VM_OF.format(vm='whole')}",
                 ("gpu", "whole", "page claims"), id="pages-grown"),
    pytest.param(
        f"DELETE FROM device_claims WHERE vm_id = {VM_OF.format(vm='whole')} "
        f"AND address = (SELECT MIN(address) FROM device_claims WHERE vm_id = {VM_OF.format(vm='whole')})",
        ("gpu", "whole", "device claims"), id="a-gpu-freed"),
    pytest.param(f"UPDATE partition_claims SET start = start + 1 WHERE vm_id = {VM_OF.format(vm='mig')}",
                 ("gpu", "mig", "partition claims"), id="a-mig-slice-moved"),
    pytest.param(f"UPDATE resctrl_claims SET mem_bw = 90 WHERE vm_id = {VM_OF.format(vm='sliced')}",
                 ("rdt", "sliced", "slice claims"), id="a-cap-raised"),
    pytest.param("""UPDATE vms SET placement = '{"vm": "mig"}' WHERE name = 'mig'""", ("gpu", "mig", "placement"),
                 id="a-placement-unreadable"),
    pytest.param("UPDATE hosts SET n_cpus = 1 WHERE name = 'rdt'", ("rdt", None, "n_cpus"), id="a-summary-column"),
    pytest.param("UPDATE hosts SET topology_digest = 'abc' WHERE name = 'rdt'", ("rdt", None, "topology_digest"),
                 id="a-digest"),
    pytest.param("UPDATE hosts SET fig_threads_used = fig_threads_used + 2 WHERE name = 'gpu'",
                 ("gpu", None, "fig_threads_used"), id="a-kept-figure"),
]


@pytest.mark.parametrize(("sql", "named"), TAMPERING)
def test_a_row_changed_behind_vnumas_back_is_named_and_nothing_is_written(
    fleet: str, sql: str, named: tuple[str, str | None, str]
) -> None:
    _tamper(fleet, sql)
    before = _tables(fleet)
    res = _run(fleet, "db", "check", "--json")
    assert res.exit_code == 16, res.stderr
    problems = res.json()["problems"]
    assert [(p["host"], p["vm"], p["what"]) for p in problems] == [named]
    assert problems[0]["kept"] != problems[0]["expected"]
    assert res.stderr.splitlines()[0] == f"error: inventory inconsistent: 1 disagreement(s) on host(s) {named[0]}"
    assert res.stderr.splitlines()[1].startswith("hint: ")
    assert _tables(fleet) == before
    table = _run(fleet, "db", "check")
    assert table.exit_code == 16
    assert table.stdout.splitlines()[0].split() == ["HOST", "VM", "WHAT", "KEPT", "EXPECTED"]
