"""``vnuma vm repin`` and ``vnuma vm migrate`` on two hosts of the embedded hypervisor: the engine's re-fit, the
journaled run, every refusal with its exit code and nothing changed, and reconcile agreeing afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli

pytestmark = pytest.mark.libvirt


@pytest.fixture
def two(demo_pair: Cli) -> Cli:
    """Hosts a and b, tenant x (``demo_pair``), VM d on a (4 vCPUs)."""
    demo_pair.ok("place", "x", "--vcpus", "4", "--memory", "4GiB", "--host", "a", "--name", "d")
    return demo_pair


def _shown(cli: Cli, vm: str) -> dict[str, Any]:
    return cli.ok("vm", "show", vm, "--json").json()  # type: ignore[no-any-return]


def _run(res: Any) -> list[tuple[str, str]]:
    return [(s["kind"], s["status"]) for s in res.json()["run"]["steps"]]


def test_repin_keeps_what_the_engine_keeps_and_moves_onto_the_cells_asked(two: Cli) -> None:
    assert two.ok("vm", "repin", "d").stdout.strip() == "VM d: already placed so: nothing to do"
    res = two.ok("vm", "repin", "d", "--cells", "2,3", "--json")
    assert res.json()["objective"] == "repin" and _run(res) == [("claims", "done")]
    assert [c["host_cell"] for c in _shown(two, "d")["cells"]] in ([2], [3])


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--cells", "7"], 4, "has CPU cells 0-3"),
        (["--cells", ""], 4, "--cells"),
        (["--cells", "x"], 4, "cpuset"),
    ],
    ids=["no-such-cell", "empty", "not-a-list"],
)
def test_bad_repin_cells_are_refused_and_change_nothing(
    two: Cli, dumped: Callable[[Path], list[str]], args: list[str], code: int, words: str
) -> None:
    before = dumped(two.db)
    res = two("vm", "repin", "d", *args)
    assert res.exit_code == code and words in res.stderr, res.stderr
    assert dumped(two.db) == before


def test_a_vm_that_asked_for_two_cells_needs_two(two: Cli) -> None:
    two.ok("place", "x", "--vcpus", "4", "--memory", "4GiB", "--numa-nodes", "2", "--host", "a", "--name", "w")
    res = two("vm", "repin", "w", "--cells", "3")
    assert res.exit_code == 4 and "asked for 2 guest cells" in res.stderr
    moved = two.ok("vm", "repin", "w", "--cells", "2,3")
    assert moved.exit_code == 0 and sorted(c["host_cell"] for c in _shown(two, "w")["cells"]) == [2, 3]


def test_repin_of_a_running_vm_restarts_it_unless_live_only(two: Cli) -> None:
    two.ok("apply", "d", "--start")
    refused = two("vm", "repin", "d", "--cells", "1", "--live")
    assert refused.exit_code == 9 and "live" in refused.stderr
    assert refused.stderr.splitlines()[-1] == "hint: allow a stop and start (leave out --live)"
    assert [c["host_cell"] for c in _shown(two, "d")["cells"]] == [0]
    res = two.ok("vm", "repin", "d", "--cells", "1", "--json")
    assert _run(res) == [("restart", "done")]
    assert _shown(two, "d")["state"] == "running" and two("reconcile").exit_code == 0


def test_migrate_moves_the_claims_and_the_domain(two: Cli) -> None:
    plan = two.ok("vm", "migrate", "d", "--to", "b", "--dry-run", "--json").json()
    assert (plan["objective"], plan["moves"][0]["to"]["host"]) == ("migrate", "b")
    assert _shown(two, "d")["host"] == "a"  # a dry run moves nothing
    two.ok("apply", "d", "--start")
    res = two.ok("vm", "migrate", "d", "--to", "b", "--json")
    assert _run(res) == [("migrate", "done")]
    assert (_shown(two, "d")["host"], _shown(two, "d")["state"]) == ("b", "running")
    two.ok("vm", "stop", "d")
    assert _run(two.ok("vm", "migrate", "d", "--to", "a", "--json")) == [("move", "done")]
    assert (_shown(two, "d")["host"], _shown(two, "d")["state"]) == ("a", "stopped")
    assert two("reconcile").exit_code == 0


def test_live_migration_of_a_vm_with_gpus_is_refused_and_a_cold_move_is_not(two: Cli) -> None:
    two.ok("place", "x", "--gpus", "1", "--host", "a", "--name", "g")
    two.ok("apply", "g", "--start")
    refused = two("vm", "migrate", "g", "--to", "b")
    assert refused.exit_code == 9 and "passes devices through" in refused.stderr
    assert refused.stderr.splitlines()[-1] == "hint: move it with a stop and start (--cold) instead"
    assert _shown(two, "g")["host"] == "a"
    res = two.ok("vm", "migrate", "g", "--to", "b", "--cold", "--json")
    assert _run(res) == [("move-restart", "done")]
    assert (_shown(two, "g")["host"], _shown(two, "g")["state"]) == ("b", "running")
    assert two("reconcile").exit_code == 0


@pytest.mark.parametrize(
    ("to", "code", "words"),
    [("nosuch", 3, "not in the inventory"), ("a", 4, "already on host"), ("b", 9, "cordoned")],
    ids=["unknown", "same", "cordoned"],
)
def test_bad_migrations_are_refused_and_change_nothing(
    two: Cli, dumped: Callable[[Path], list[str]], to: str, code: int, words: str
) -> None:
    two.ok("host", "cordon", "b")
    before = dumped(two.db)
    res = two("vm", "migrate", "d", "--to", to)
    assert res.exit_code == code and words in res.stderr, res.stderr
    assert dumped(two.db) == before


def test_a_vm_that_does_not_fit_there_is_refused_with_the_reason(two: Cli, dumped: Callable[[Path], list[str]]) -> None:
    for i in range(4):
        two.ok("place", "x", "--vcpus", "32", "--memory", "8GiB", "--host", "b", "--name", f"fill{i}")
    before = dumped(two.db)
    res = two("vm", "migrate", "d", "--to", "b")
    assert res.exit_code == 5 and "b:" in res.stderr
    assert res.stderr.splitlines()[-1] == "hint: see each cell's free pCPUs, memory and devices: vnuma stats --host b"
    assert dumped(two.db) == before
    cells = [c["host_cell"] for c in _shown(two, "fill0")["cells"]]
    repin = two("vm", "repin", "fill0", "--cells", str((cells[0] + 1) % 4))  # a cell another fill VM fills
    assert repin.exit_code == 5 and "--explain" not in repin.stderr, repin.stderr
    assert repin.stderr.splitlines()[-1].endswith("vnuma stats --host b")
    assert two("vm", "migrate", "d", "--to", "b", "--live", "--cold").exit_code == 2


def test_a_dry_run_says_when_an_unfinished_run_would_hold_the_move_up(two: Cli) -> None:
    from vnuma.inventory import open_inventory

    assert two.ok("vm", "migrate", "d", "--to", "b", "--dry-run").stderr == ""
    with open_inventory(f"sqlite:///{two.db}") as inv:
        inv.open_run("rebalance", {}, [])  # as a command killed at its start leaves it
    shown = two.ok("vm", "migrate", "d", "--to", "b", "--dry-run")
    assert "d" in shown.stdout and "b cell " in shown.stdout
    assert shown.stderr.startswith(
        "warning: rebalance run 1 is unfinished (running): carrying this plan out is refused until then ("
    ), shown.stderr
    refused = two("vm", "migrate", "d", "--to", "b")
    assert refused.exit_code == 9 and "rebalance run 1 is unfinished (running)" in refused.stderr
