"""``vnuma tenant update``: quotas and isolation change, refused with the reason when VMs break it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import make_host
from tests.cli.conftest import Cli
from tests.sources.capswriter import capabilities_xml


@pytest.fixture
def two(cli: Cli, tmp_path: Path) -> Cli:
    """One small host (2 cells x 4 cores x 2 threads), tenants a (none) and b (none)."""
    caps = tmp_path / "caps.xml"
    host = make_host("h", cells=2, cores_per_cell=4, smt=2, memory_gib=16, hugepages_2m_gib=2, hugepages_1g_gib=8)
    caps.write_text(capabilities_xml(host))
    cli.ok("host", "import", "h", "--capabilities", str(caps))
    cli.ok("tenant", "create", "a", "--isolation", "none")
    cli.ok("tenant", "create", "b", "--isolation", "none")
    return cli


def test_quotas_change_and_a_quota_below_usage_refuses_growth_only(two: Cli) -> None:
    two.ok("place", "a", "--vcpus", "4", "--memory", "2GiB", "--name", "a1")
    res = two.ok("tenant", "update", "a", "--max-vcpus", "2", "--max-gpus", "0")
    assert res.stdout == "updated tenant a: max vCPUs unlimited -> 2, max GPUs unlimited -> 0\n"
    shown = two.ok("tenant", "show", "a", "--json").json()
    assert (shown["max_vcpus"], shown["max_gpus"], shown["vcpus"]) == (2, 0, 4)
    over = two("place", "a", "--vcpus", "1", "--memory", "1GiB")
    assert over.exit_code == 9 and "4 vCPUs in use + 1 asked would exceed the quota of 2" in over.stderr
    assert two.ok("vm", "list", "--json").json()[0]["vm"] == "a1"  # nothing moved
    two.ok("tenant", "update", "a", "--max-vcpus", "none")
    assert two.ok("tenant", "show", "a", "--json").json()["max_vcpus"] is None
    two.ok("place", "a", "--vcpus", "1", "--memory", "1GiB", "--name", "a2")


def test_a_stricter_isolation_is_refused_while_a_core_is_shared(two: Cli, dumped: Callable[[Path], list[str]]) -> None:
    two.ok("place", "a", "--vcpus", "1", "--memory", "1GiB", "--numa-nodes", "1", "--name", "a1")
    two.ok("place", "b", "--vcpus", "1", "--memory", "1GiB", "--numa-nodes", "1", "--name", "b1")
    pins = {v["vm"]: v["cells"][0]["pcpus"] for v in two.ok("vm", "list", "--json").json()}
    before = dumped(two.db)
    res = two("tenant", "update", "b", "--isolation", "core")
    assert res.exit_code == 9, res.stderr
    line = res.stderr.splitlines()[0]
    assert line.startswith("error: tenant 'b' cannot have core isolation: ")
    assert "VM 'b1'" in line and "with tenant 'a'" in line and "physical core" in line, (line, pins)
    assert res.stderr.splitlines()[1] == "hint: move or release VM 'b1' first (vnuma vm release b1)"
    assert dumped(two.db) == before
    two.ok("vm", "release", "a1")
    assert two.ok("tenant", "update", "b", "--isolation", "core").stdout == (
        "updated tenant b: isolation none -> core\n"
    )


def test_cell_isolation_is_refused_while_another_tenant_shares_the_cell(two: Cli) -> None:
    two.ok("tenant", "update", "a", "--isolation", "core")
    two.ok("tenant", "update", "b", "--isolation", "core")
    two.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--numa-nodes", "1", "--name", "a1")
    two.ok("place", "b", "--vcpus", "2", "--memory", "1GiB", "--numa-nodes", "1", "--name", "b1")
    res = two("tenant", "update", "a", "--isolation", "cell")
    assert res.exit_code == 9 and "would share NUMA cell" in res.stderr and "tenant 'b'" in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["tenant", "update", "a"], 4, "error: tenant 'a': nothing to change"),
        (["tenant", "update", "zz", "--max-gpus", "1"], 3, "error: tenant 'zz' is not in the inventory"),
        (["tenant", "update", "a", "--max-vcpus", "-1"], 4, "error: bad --max-vcpus '-1'"),
        (["tenant", "update", "a", "--max-gpus", "²"], 4, "error: bad --max-gpus '²'"),
    ],
    ids=["nothing", "unknown", "negative", "not-a-number"],
)
def test_bad_updates_exit_with_their_code_and_change_nothing(
    two: Cli, dumped: Callable[[Path], list[str]], args: list[str], code: int, message: str
) -> None:
    before = dumped(two.db)
    res = two.process(*args)
    assert res.exit_code == code, res.stderr
    assert res.stderr.splitlines()[0].startswith(message), res.stderr
    assert "Traceback" not in res.stderr
    assert dumped(two.db) == before
