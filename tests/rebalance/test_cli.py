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
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "4", "--memory", "8GiB", "--numa-nodes", "2", "--name", "split")
    before = dumped(cli.db)
    plan = cli.ok("rebalance", "--json").json()
    assert set(plan) == {"objective", "before", "after", "optimal", "moves"}
    assert (plan["objective"], plan["before"], plan["after"], plan["optimal"]) == ("locality", 1, 0, True)
    (move,) = plan["moves"]
    assert set(move) == MOVE_KEYS and move["vm"] == "split"
    assert len(move["from"]["cells"]) == 2 and len(move["to"]["cells"]) == 1
    assert move["cost_kib"] == 4 * KIB_PER_GIB
    assert "split" in cli.ok("rebalance").stdout
    assert dumped(cli.db) == before
    room = cli.ok("rebalance", "--make-room-for", "vcpus=2,memory=2GiB", "--json").json()
    assert (room["objective"], room["before"], room["moves"]) == ("room", 0, [])


def test_help_does_not_offer_apply(cli: Cli) -> None:
    text = cli.ok("rebalance", "--help").stdout
    assert "--make-room-for" in text and "--apply" not in text


@pytest.mark.parametrize(
    "text",
    ["vcpus=4", "memory=1GiB", "vcpus=4,memory=1GiB,colour=red", "vcpus=x,memory=1GiB", "vcpus=4,memory=12"],
    ids=["no-memory", "no-vcpus", "unknown-key", "bad-number", "size-without-unit"],
)
def test_bad_shapes_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_shape(text)


def test_shape_parses_all_keys() -> None:
    req = parse_shape("vcpus=32, memory=256GiB, gpus=2, numa_nodes=2")
    assert (req.vcpus, req.memory_kib, req.gpus, req.numa_nodes) == (32, 256 * KIB_PER_GIB, 2, 2)


def test_bad_shape_exits_4(cli: Cli) -> None:
    res = cli("rebalance", "--make-room-for", "vcpus=4")
    assert res.exit_code == 4 and "make-room-for" in res.stderr
