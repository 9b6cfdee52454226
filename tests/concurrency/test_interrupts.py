"""Ctrl-C at chosen points of real ``vnuma`` processes: what they say, their exit code and the audit log agree.

Each command stops itself at a failpoint (:mod:`vnuma.services.failpoints`,
``NAME:stop``) right after a commit; the test sends it SIGINT, as Ctrl-C
does, and lets it continue. ``place`` interrupted after its claim committed
finishes: the placement printed, exit 0, a note on stderr, one ``ok`` entry
in the log and one VM (a retry would have made a second). A ``host drain
--apply`` interrupted after its cordon, after its run was journaled, or half
way through a move says exactly that on stderr, exits 130 and logs the same
words; a run that had begun no move is closed, one half-way is left for
``--resume``, which finishes it. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.concurrency.racing import make_fleet
from tests.concurrency.stopping import Ended, resume, run, start, wait_stopped
from vnuma.inventory import open_inventory

pytestmark = pytest.mark.slow

PLACE = ["place", "acme", "--vcpus", "2", "--memory", "2GiB", "--page-size", "1G"]


@pytest.fixture
def fleet(url: str) -> str:
    """Hosts host-0 and host-1 (no libvirt: moves are claims only) and tenants acme and beta."""
    make_fleet(url, hosts=2)
    return url


def _interrupted_at(url: str, argv: list[str], failpoint: str) -> Ended:
    proc = start(url, argv, failpoint=f"{failpoint}:stop")
    wait_stopped(proc)
    return resume(proc, interrupt=True)


def _last_entry(url: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = json.loads(run(url, "log", "--json").stdout)
    return entries[-1]


def _vms(url: str) -> dict[str, str]:
    with open_inventory(url) as inv:
        return {p.vm: p.host for p, _state in inv.list_vms()}


def test_place_interrupted_after_its_claim_commits_finishes(fleet: str) -> None:
    ended = _interrupted_at(fleet, PLACE, "claimed")
    assert ended.code == 0, ended.stderr
    assert ended.stdout.startswith("placed VM acme-vm1 (tenant acme) on host host-0\n")
    assert ended.stderr == "note: interrupted after placing VM acme-vm1 on host host-0: the command finished (exit 0)\n"
    entry = _last_entry(fleet)
    assert (entry["outcome"], [c["op"] for c in entry["changes"]]) == ("ok", ["claim"])
    assert "error" not in entry
    assert _vms(fleet) == {"acme-vm1": "host-0"}


@pytest.fixture
def drained(fleet: str) -> str:
    """One VM, v1, on host-0."""
    placed = run(fleet, *PLACE, "--name", "v1", "--host", "host-0")
    assert placed.code == 0, placed.stderr
    return fleet


DRAIN = ["host", "drain", "host-0", "--apply", "--yes"]


def _said(ended: Ended) -> tuple[str, str]:
    assert ended.code == 130, ended.stderr
    lines = ended.stderr.splitlines()
    error = next(line for line in lines if line.startswith("error: "))
    hint = next((line for line in lines if line.startswith("hint: ")), "")
    return error.removeprefix("error: "), hint.removeprefix("hint: ")


def _agrees(url: str, message: str, ops: list[str]) -> None:
    """The log's last entry is the interrupted command's: failed, with the words it said, and its changes."""
    entry = _last_entry(url)
    assert entry["command"].startswith("vnuma --db ") and entry["command"].endswith(" ".join(DRAIN))
    assert (entry["outcome"], entry["error"]) == ("failed", message)
    assert [c["op"] for c in entry["changes"]] == ops


def test_a_drain_interrupted_after_its_cordon_says_nothing_moved(drained: str) -> None:
    message, hint = _said(_interrupted_at(drained, DRAIN, "cordoned"))
    assert message == "interrupted after cordoning host host-0; nothing moved"
    assert hint == "drain it again (`vnuma host drain host-0`) or take it back (`vnuma host uncordon host-0`)"
    _agrees(drained, message, ["host-cordon"])
    assert _vms(drained) == {"v1": "host-0"}
    assert run(drained, "rebalance", "--resume").code == 3  # no run was opened


def test_a_drain_interrupted_before_its_first_move_closes_its_run(drained: str) -> None:
    message, hint = _said(_interrupted_at(drained, DRAIN, "run-opened"))
    assert message == ("interrupted after cordoning host host-0, opening rebalance run 1 (closed again: it had "
                       "begun no move); nothing moved")
    assert hint.startswith("drain it again")
    _agrees(drained, message, ["host-cordon", "run-open", "run-fail"])
    assert _vms(drained) == {"v1": "host-0"}
    assert run(drained, "rebalance", "--resume").code == 3  # closed: nothing holds the journal
    again = run(drained, *DRAIN)
    assert again.code == 0, again.stderr
    assert _vms(drained) == {"v1": "host-1"}


def test_a_drain_interrupted_half_way_through_a_move_is_left_for_resume(drained: str) -> None:
    message, hint = _said(_interrupted_at(drained, DRAIN, "step-started"))
    assert message == ("interrupted after cordoning host host-0, rebalance run 1: 0 of 1 move(s) done, VM v1 "
                       "half-way; the run is unfinished (failed)")
    assert hint == "`vnuma rebalance --resume` finishes it, `vnuma rebalance --abort` rolls it back"
    _agrees(drained, message, ["host-cordon", "run-open", "step-start", "run-fail"])
    resumed = run(drained, "rebalance", "--resume")
    assert resumed.code == 0, resumed.stderr
    assert _vms(drained) == {"v1": "host-1"}
