"""Replica groups through the CLI: anti-affinity by host and by cell, honoured by place, migrate and drain, and
refused claims naming the group."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

pytestmark = pytest.mark.libvirt
SMALL = ("--vcpus", "4", "--memory", "4GiB")


@pytest.fixture
def two(demo_pair: Cli) -> Cli:
    """Hosts a and b, tenant x (``demo_pair``)."""
    return demo_pair


def _where(cli: Cli) -> dict[str, tuple[str, list[int]]]:
    return {p["vm"]: (p["host"], [c["host_cell"] for c in p["cells"]]) for p in cli.ok("vm", "list", "--json").json()}


def test_host_anti_affinity_spreads_replicas_and_refuses_the_one_too_many(two: Cli) -> None:
    for name in ("r1", "r2"):
        two.ok("place", "x", *SMALL, "--group", "web", "--anti-affinity", "host", "--name", name)
    assert {host for host, _cells in _where(two).values()} == {"a", "b"}
    shown = two.ok("vm", "show", "r1", "--json").json()
    assert shown["group"] == {"name": "web", "anti_affinity": "host"}
    assert "group: web (anti-affinity host)" in two.ok("vm", "show", "r1").stdout
    refused = two("place", "x", *SMALL, "--group", "web", "--anti-affinity", "host", "--name", "r3", "--json")
    assert refused.exit_code == 5 and "group 'web'" in refused.stderr
    reasons = {r["host"]: r["reason"] for r in refused.json()["rejections"]}
    assert set(reasons) == {"a", "b"} and all("group 'web'" in why for why in reasons.values())
    assert two.ok("place", "x", *SMALL, "--group", "other", "--anti-affinity", "host", "--name", "o1").exit_code == 0


def test_cell_anti_affinity_uses_a_cell_per_replica(two: Cli) -> None:
    for i in range(4):
        two.ok("place", "x", *SMALL, "--host", "a", "--group", "db", "--anti-affinity", "cell", "--name", f"c{i}")
    cells = sorted(cells[0] for host, cells in _where(two).values())
    assert cells == [0, 1, 2, 3]
    refused = two("place", "x", *SMALL, "--host", "a", "--group", "db", "--anti-affinity", "cell", "--name", "c4")
    assert refused.exit_code == 5 and "holds every CPU cell" in refused.stderr


def test_moves_keep_the_group_apart(two: Cli, dumped: Callable[[Path], list[str]]) -> None:
    two.ok("place", "x", *SMALL, "--host", "a", "--group", "web", "--anti-affinity", "host", "--name", "r1")
    two.ok("place", "x", *SMALL, "--host", "b", "--group", "web", "--anti-affinity", "host", "--name", "r2")
    two.ok("place", "x", *SMALL, "--host", "a", "--name", "plain")
    before = dumped(two.db)
    refused = two("vm", "migrate", "r1", "--to", "b")
    assert refused.exit_code == 5 and "group 'web'" in refused.stderr
    assert dumped(two.db) == before
    plan = two("host", "drain", "a", "--json")
    assert plan.exit_code == 5
    left = {x["vm"]: x["reason"] for x in plan.json()["left"]}
    assert list(left) == ["r1"] and "group 'web'" in left["r1"]
    assert [m["vm"] for m in plan.json()["moves"]] == ["plain"]


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--group", "bad name"], 4), (["--anti-affinity", "host"], 2), (["--group", "g", "--anti-affinity", "rack"], 2)],
    ids=["bad-group-name", "anti-affinity-without-group", "unknown-scope"],
)
def test_bad_group_options_are_refused(
    two: Cli, dumped: Callable[[Path], list[str]], args: list[str], code: int
) -> None:
    before = dumped(two.db)
    assert two("place", "x", *SMALL, *args).exit_code == code
    assert dumped(two.db) == before
