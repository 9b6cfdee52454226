"""Replica groups through the CLI: anti-affinity by host and by cell, affinity by host, honoured by place, repin,
migrate and drain, refused claims naming the group, and a group asked both ways refused (exit 12)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged

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
    assert shown["group"] == {"name": "web", "anti_affinity": "host", "affinity": None}
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
    [
        (["--group", "bad name"], 4), (["--anti-affinity", "host"], 2),
        (["--group", "g", "--anti-affinity", "rack"], 2),
        (["--affinity", "host"], 2), (["--group", "g", "--affinity", "cell"], 2),
        (["--group", "g", "--affinity", "host", "--anti-affinity", "host"], 2),
    ],
    ids=["bad-group-name", "anti-affinity-without-group", "unknown-scope", "affinity-without-group",
         "affinity-by-cell", "both-ways"],
)
def test_bad_group_options_are_refused(
    two: Cli, dumped: Callable[[Path], list[str]], args: list[str], code: int
) -> None:
    before = dumped(two.db)
    assert two("place", "x", *SMALL, *args).exit_code == code
    assert dumped(two.db) == before


@pytest.fixture
def busy_b(two: Cli) -> Cli:
    """Hosts a and b with a VM on b, so the ``pack`` strategy puts a group's first VM on b, not on a (the
    first by name): affinity, not host order, decides where the others go."""
    two.ok("place", "x", *SMALL, "--host", "b", "--name", "filler")
    return two


def test_affinity_keeps_the_group_on_the_first_vms_host(busy_b: Cli) -> None:
    two = busy_b
    two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", "p1")
    assert _where(two)["p1"][0] == "b"
    # Host a is emptier and first by name; --strategy first-fit would take it, the group does not let it.
    two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", "p2", "--strategy", "first-fit")
    two.ok("place", "x", *SMALL, "--group", "pair", "--name", "p3")  # a plain member joins the group's host
    assert {vm: host for vm, (host, _cells) in _where(two).items()} == {"filler": "b", "p1": "b", "p2": "b", "p3": "b"}
    shown = two.ok("vm", "show", "p1", "--json").json()
    assert shown["group"] == {"name": "pair", "anti_affinity": None, "affinity": "host"}
    assert "group: pair (affinity host)" in two.ok("vm", "show", "p1").stdout
    assert two.ok("vm", "show", "p3", "--json").json()["group"] == {"name": "pair", "anti_affinity": None,
                                                                    "affinity": None}
    explained = two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--dry-run", "--explain")
    assert "a     group  group 'pair' (affinity host) has its VMs on host 'b'" in explained.stdout
    placed = two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--dry-run", "--json").json()
    assert placed["host"] == "b" and placed["group"]["affinity"] == "host"


def test_the_groups_host_full_is_exit_5_and_the_other_hosts_name_the_group(busy_b: Cli) -> None:
    two = busy_b
    two.ok("place", "x", "--vcpus", "96", "--memory", "16GiB", "--group", "pair", "--affinity", "host", "--name", "p1")
    assert _where(two)["p1"][0] == "b"
    args = ["place", "x", "--vcpus", "96", "--memory", "16GiB", "--group", "pair", "--affinity", "host", "--name", "p2"]
    refused_unchanged(two, args, 5, "no host can take VM 'p2'")
    reasons = {r["host"]: (r["check"], r["reason"]) for r in two(*args, "--json").json()["rejections"]}
    assert reasons["a"] == ("group", "group 'pair' (affinity host) has its VMs on host 'b'")
    assert reasons["b"][0] != "group"
    # Without the group it fits (on a): the group alone kept it off a.
    two.ok("place", "x", "--vcpus", "96", "--memory", "16GiB", "--name", "alone")
    assert _where(two)["alone"][0] == "a"


@pytest.mark.parametrize(
    ("first", "then", "words"),
    [
        (["--affinity", "host"], ["--anti-affinity", "host"],
         "error: group 'g' keeps its VMs together (VM 'g1' asked affinity host); VM 'g2' asks anti-affinity host\n"),
        (["--anti-affinity", "cell"], ["--affinity", "host"],
         "error: group 'g' keeps its VMs apart (VM 'g1' asked anti-affinity cell); VM 'g2' asks affinity host\n"),
    ],
    ids=["anti-in-affine-group", "affinity-in-anti-affine-group"],
)
def test_a_group_asked_both_ways_is_exit_12_and_writes_nothing(
    two: Cli, first: list[str], then: list[str], words: str
) -> None:
    two.ok("place", "x", *SMALL, "--group", "g", *first, "--name", "g1")
    refused_unchanged(two, ["place", "x", *SMALL, "--group", "g", *then, "--name", "g2"], 12, words)
    real = two.process("place", "x", *SMALL, "--group", "g", *then, "--name", "g2", "--json")
    assert real.exit_code == 12 and real.stderr.startswith(words) and real.stdout == ""
    assert "hint: a group is either affine or anti-affine" in real.stderr
    two.ok("place", "x", *SMALL, "--group", "g", "--name", "g3")  # only --group: goes with either
    two.ok("vm", "release", "g1")
    two.ok("vm", "release", "g3")
    two.ok("place", "x", *SMALL, "--group", "g", *then, "--name", "g2")  # the group is empty again: any way


def test_repin_stays_and_migrate_is_refused_while_the_group_has_other_vms(
    busy_b: Cli, dumped: Callable[[Path], list[str]]
) -> None:
    two = busy_b
    for name in ("p1", "p2"):
        two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", name)
    two.ok("vm", "repin", "p1", "--cells", "2")
    assert _where(two)["p1"] == ("b", [2])
    before = dumped(two.db)
    refused = two("vm", "migrate", "p1", "--to", "a")
    assert refused.exit_code == 5, refused.stderr
    assert "error: no host can take VM 'p1': a: group 'pair' (affinity host) has its VMs on host 'b'" in refused.stderr
    assert dumped(two.db) == before
    two.ok("vm", "release", "p2")
    two.ok("vm", "migrate", "p1", "--to", "a")  # the group's only VM moves freely, and the group with it
    two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", "p4")
    assert {_where(two)[vm][0] for vm in ("p1", "p4")} == {"a"}


def test_a_drain_moves_an_affine_group_together_through_a_journaled_run(busy_b: Cli) -> None:
    """The group's VMs leave b one step each; every step is admitted with the group as the run leaves it (the
    VMs still on b are arriving too), and the applied run keeps the group on one host. Undone by --abort, it
    comes back whole."""
    two = busy_b
    for name in ("p1", "p2"):
        two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", name)
    two.ok("place", "x", *SMALL, "--host", "b", "--group", "solo", "--affinity", "host", "--name", "s1")
    plan = two.ok("host", "drain", "b", "--json").json()
    assert plan["left"] == [] and sorted(m["vm"] for m in plan["moves"]) == ["filler", "p1", "p2", "s1"]
    done = two("host", "drain", "b", "--apply", "--yes", "--json")
    assert done.exit_code == 0, done.stderr
    assert [s["status"] for s in done.json()["run"]["steps"]] == ["done"] * 4
    assert {vm: host for vm, (host, _cells) in _where(two).items()} == {"filler": "a", "s1": "a", "p1": "a", "p2": "a"}
    # A new member joins the group where it now is.
    two.ok("host", "uncordon", "b")
    two.ok("place", "x", *SMALL, "--group", "pair", "--name", "p3")
    assert _where(two)["p3"][0] == "a"


@pytest.mark.parametrize("finish", ["--abort", "--resume"])
def test_a_group_drain_killed_half_way_is_finished_or_undone_whole(
    busy_b: Cli, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    """kill -9 once the group's first VM has moved to a and the second not yet: the run is unfinished, the
    group split for the while; --resume takes the second VM there too, --abort brings the first back."""
    two = busy_b
    for name in ("p1", "p2"):
        two.ok("place", "x", *SMALL, "--group", "pair", "--affinity", "host", "--name", name)
    # CP-SAT's drain (the default) moves the group first: p1 is step 1, p2 step 2, filler step 3; the kill
    # comes once step 1's claim has moved.
    monkeypatch.setenv("VNUMA_FAILPOINT", "step-started:1")
    killed = two.process("host", "drain", "b", "--apply", "--yes")
    assert killed.exit_code == -9, killed.stderr
    monkeypatch.delenv("VNUMA_FAILPOINT")
    assert {vm: host for vm, (host, _cells) in _where(two).items()} == {"filler": "b", "p1": "a", "p2": "b"}
    two.ok("rebalance", finish)  # an undo takes the VMs back to b, which the drain cordoned
    where = "a" if finish == "--resume" else "b"
    assert {vm: host for vm, (host, _cells) in _where(two).items()} == {"filler": where, "p1": where, "p2": where}
    assert two.ok("host", "list", "--json").json()[1]["cordoned"]  # b stays cordoned: nothing new goes there
    refused = two("place", "x", *SMALL, "--host", "b")
    assert refused.exit_code == 5 and "host 'b' is cordoned" in refused.stderr


