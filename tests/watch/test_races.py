"""`vnuma watch --act apply` racing processes that place VMs, on SQLite and PostgreSQL: the inventory stays
consistent (the issue-6 invariants: claims match placements, no overcommit), a move whose room a racer took
changes nothing and closes its run, and no run is left unfinished. Real processes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.stopping import finish, resume, run, start, wait_stopped
from tests.watch.conftest import FLEET

pytestmark = [pytest.mark.slow]


def _runs(url: str) -> list[tuple[int, str, bool, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, status, unfinished, options FROM rebalance_runs ORDER BY id"))
            return [(int(i), str(s), bool(u), str(o)) for i, s, u, o in rows]
    finally:
        engine.dispose()


def _place(url: str, name: str) -> int:
    return run(url, "place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--host", "rdt",
               "--name", name).code


def test_a_move_whose_room_a_racer_took_changes_nothing_and_closes_its_run(fleet_url: str) -> None:
    watch = start(fleet_url, ["watch", "--domstats-dir", str(FLEET), "--act", "apply"], failpoint="run-planned:stop")
    wait_stopped(watch)  # b1's re-pin onto rdt's cell 1 is planned, not yet journaled
    placed = 0
    while _place(fleet_url, f"r{placed}") == 0:  # the racer fills the host
        placed += 1
    assert placed > 0
    ended = resume(watch)
    assert ended.code == 0, ended.stderr
    assert "proposal 1 not carried out: rebalance run 1 step 1 (b1)" in ended.stderr
    assert [r[:3] for r in _runs(fleet_url)] == [(1, "aborted", False)]
    assert inconsistencies(fleet_url) == []
    events = json.loads(run(fleet_url, "events", "--vm", "b1", "--json").stdout)
    assert events[0]["actions"][0]["status"] == "aborted"
    doc = json.loads(run(fleet_url, "vm", "show", "b1", "--json").stdout)
    assert [c["host_cell"] for c in doc["cells"]] == [0]


def test_watch_act_apply_and_placing_processes_at_once_keep_the_inventory_consistent(fleet_url: str) -> None:
    watch = start(fleet_url, ["watch", "--domstats-dir", str(FLEET), "--act", "apply", "--allow-migrate"])
    racers = [start(fleet_url, ["place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M",
                                "--name", f"p{i}"]) for i in range(4)]
    ended = finish(watch)
    assert ended.code == 0, ended.stderr
    assert all(finish(r).code in (0, 5) for r in racers)
    assert inconsistencies(fleet_url) == []
    runs = _runs(fleet_url)
    assert runs and all(status in ("done", "aborted") and not unfinished for _, status, unfinished, _ in runs)
