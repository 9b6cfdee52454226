"""``vnuma rebalance``: plan-only JSON contract, shape parsing, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from vnuma.errors import InvalidInputError
from vnuma.services.rebalancing import parse_shape
from vnuma.topology import KIB_PER_GIB

pytestmark = pytest.mark.libvirt
MOVE_KEYS = {"vm", "from", "to", "reason", "cost_kib"}


def test_split_vm_plan_is_printed_and_nothing_changes(cli: Cli, dumped: Callable[[Path], list[str]]) -> None:
    """A VM placed with auto that had to split is brought onto one cell; one that asked for two cells
    keeps them (a move never changes the guest shape asked for)."""
    cli.ok("host", "add", "gpu-node-1", "--demo")  # 4 cells x 32 pCPUs
    cli.ok("tenant", "create", "a")
    fillers = [f"fill{i}" for i in range(4)]
    for name in fillers:  # leave one free core on every cell
        cli.ok("place", "a", "--vcpus", "30", "--memory", "8GiB", "--name", name)
    cli.ok("place", "a", "--vcpus", "4", "--memory", "8GiB", "--name", "split")
    cli.ok("place", "a", "--vcpus", "4", "--memory", "8GiB", "--numa-nodes", "2", "--name", "asked")
    for name in fillers:
        cli.ok("vm", "release", name)
    before = dumped(cli.db)
    plan = cli.ok("rebalance", "--json").json()
    assert set(plan) == {"objective", "before", "after", "optimal", "moves", "solver", "gap"}
    assert (plan["objective"], plan["before"], plan["after"], plan["optimal"]) == ("locality", 1, 0, True)
    (move,) = plan["moves"]
    assert set(move) == MOVE_KEYS and move["vm"] == "split"
    assert len(move["from"]["cells"]) == 2 and len(move["to"]["cells"]) == 1
    assert move["cost_kib"] == 4 * KIB_PER_GIB  # onto one of its own two cells: half its memory stays
    assert "split" in cli.ok("rebalance").stdout
    assert dumped(cli.db) == before
    asked = cli.ok("vm", "show", "asked", "--json").json()
    assert asked["numa_nodes"] == 2 and len(asked["cells"]) == 2
    room = cli.ok("rebalance", "--make-room-for", "vcpus=2,memory=2GiB", "--json").json()
    assert (room["objective"], room["before"], room["moves"]) == ("room", 0, [])


def test_help_offers_apply_resume_and_abort(cli: Cli) -> None:
    text = cli.ok("rebalance", "--help").stdout
    assert all(o in text for o in ("--make-room-for", "--apply", "--resume", "--abort", "--allow-restart"))


@pytest.mark.parametrize(
    "args",
    [["--yes"], ["--allow-restart"], ["--resume", "--abort"], ["--apply", "--resume"]],
    ids=["yes-without-apply", "restart-without-apply", "resume-and-abort", "apply-and-resume"],
)
def test_option_mistakes_are_usage_errors(cli: Cli, args: list[str], dumped: Callable[[Path], list[str]]) -> None:
    before = dumped(cli.db)
    res = cli("rebalance", *args)
    assert res.exit_code == 2
    assert dumped(cli.db) == before


def test_resume_without_a_run_is_not_found(cli: Cli) -> None:
    res = cli("rebalance", "--resume")
    assert res.exit_code == 3 and "no unfinished rebalance run" in res.stderr


@pytest.mark.parametrize(
    "text",
    ["vcpus=4", "memory=1GiB", "vcpus=4,memory=1GiB,colour=red", "vcpus=x,memory=1GiB", "vcpus=4,memory=12"],
    ids=["no-memory", "no-vcpus", "unknown-key", "bad-number", "size-without-unit"],
)
def test_bad_shapes_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_shape(text)


def test_shape_parses_all_keys() -> None:
    req = parse_shape("vcpus=32, memory=256GiB, gpus=2, numa_nodes=2, page_size=2M")
    got = (req.vcpus, req.memory_kib, req.gpus, req.numa_nodes, req.page_size_kib)
    assert got == (32, 256 * KIB_PER_GIB, 2, 2, 2048)


def test_bad_shape_exits_4(cli: Cli) -> None:
    res = cli("rebalance", "--make-room-for", "vcpus=4")
    assert res.exit_code == 4 and "make-room-for" in res.stderr


def _split_vm(cli: Cli) -> None:
    """gpu-node-1 (4 cells x 32 pCPUs) with one 4-vCPU VM split over two cells (locality cost 1)."""
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "a")
    fillers = [f"fill{i}" for i in range(4)]
    for name in fillers:  # leave one free core on every cell
        cli.ok("place", "a", "--vcpus", "30", "--memory", "8GiB", "--name", name)
    cli.ok("place", "a", "--vcpus", "4", "--memory", "8GiB", "--name", "split")
    for name in fillers:
        cli.ok("vm", "release", name)


def test_the_solver_plans_locality_fragmentation_spread_and_room(cli: Cli, dumped: Callable[[Path], list[str]]) -> None:
    _split_vm(cli)
    before = dumped(cli.db)
    plan = cli.ok("rebalance", "--solver", "cp-sat", "--json").json()
    assert set(plan) == {"objective", "before", "after", "optimal", "moves", "solver", "gap"}
    assert (plan["objective"], plan["before"], plan["after"], plan["solver"], plan["gap"]) == (
        "locality", 1, 0, "cp-sat", 0.0
    )
    (move,) = plan["moves"]
    assert set(move) == MOVE_KEYS and move["vm"] == "split" and len(move["to"]["cells"]) == 1
    assert "(solver cp-sat: optimal, proven by CP-SAT for its model)" in cli.ok("rebalance", "--solver",
                                                                            "cp-sat").stdout
    frag = cli.ok("rebalance", "--objective", "fragmentation", "--solver", "cp-sat", "--json").json()
    assert frag["objective"] == "fragmentation" and frag["after"] <= frag["before"]
    assert frag["solver"] in ("cp-sat", "search")  # the search's plan when it is the better one
    spread = cli.ok("rebalance", "--objective", "spread-tenants", "--solver", "cp-sat", "--json").json()
    assert set(spread) == set(plan) and spread["objective"] == "spread-tenants"
    room = cli.ok("rebalance", "--make-room-for", "vcpus=96,memory=24GiB,numa_nodes=3", "--solver", "cp-sat",
                  "--json").json()
    assert (room["objective"], room["before"], room["after"], room["solver"], room["gap"]) == (
        "room", 1, 0, "cp-sat", 0.0
    )
    (move,) = room["moves"]  # split onto one cell leaves three whole cells
    assert move["vm"] == "split" and len(move["to"]["cells"]) == 1 and "make room for" in move["reason"]
    assert dumped(cli.db) == before  # a plan only


def test_the_solver_out_of_time_exits_5_and_moves_nothing(cli: Cli, dumped: Callable[[Path], list[str]]) -> None:
    _split_vm(cli)
    before = dumped(cli.db)
    res = cli("rebalance", "--solver", "cp-sat", "--time-limit", "0.000000001", "--apply", "--yes")
    assert res.exit_code == 5
    assert "CP-SAT found no plan within the time limit" in res.stderr and "nothing was moved" in res.stderr
    assert dumped(cli.db) == before


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--objective", "bandwidth"], "not bandwidth"),
     (["--objective", "locality", "--solver", "gurobi"], "unknown solver 'gurobi'")],
    ids=["bandwidth", "unknown"],
)
def test_the_solver_refuses_what_it_does_not_plan(cli: Cli, args: list[str], words: str) -> None:
    res = cli("rebalance", "--solver", "cp-sat", *args)
    assert res.exit_code == 4 and words in res.stderr
