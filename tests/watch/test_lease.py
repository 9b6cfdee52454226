"""One watch per inventory: a second `vnuma watch` is refused with one line and exit 13 while the first holds
the lease (SQLite and PostgreSQL, real processes); a killed watch's lease is free at once on its machine and
expires elsewhere; a watch whose lease another took writes no further round."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.stopping import resume, run, start, wait_stopped
from tests.watch.conftest import FLEET
from vnuma.errors import LeaseError
from vnuma.services import Settings
from vnuma.services.watch import Watch
from vnuma.watch.rules import Thresholds

pytestmark = [pytest.mark.slow]


def _set(url: str, sql: str, **params: object) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


def _lease(url: str) -> tuple[str, int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT machine, pid, expires_ms FROM watch_lease")).one()
            return str(row[0]), int(row[1]), int(row[2])
    finally:
        engine.dispose()


def test_a_second_watch_is_refused_while_the_first_runs_and_runs_once_it_stopped(fleet_url: str) -> None:
    first = start(fleet_url, ["watch", "--domstats-dir", str(FLEET), "--act", "apply"], failpoint="run-planned:stop")
    wait_stopped(first)  # mid-replay, holding the lease
    assert _lease(fleet_url)[:2] == (socket.gethostname(), first.pid)
    second = run(fleet_url, "watch", "--once")
    assert second.code == 13
    lines = second.stderr.splitlines()
    assert lines[0].startswith(f"error: another vnuma watch writes this inventory (process {first.pid} on "
                               f"{socket.gethostname()}; its lease runs until ")
    assert lines[1:] == ["hint: run one watch per inventory; a watch killed without stopping frees it when its "
                         "lease expires"]
    assert second.stdout == ""
    ended = resume(first)
    assert ended.code == 0, ended.stderr
    assert _lease(fleet_url) == ("", 0, 0)  # freed when it stopped
    again = run(fleet_url, "watch", "--once", "--act", "off")
    assert again.code == 0, again.stderr


def test_a_killed_watch_frees_the_lease_on_its_machine_at_once_and_elsewhere_when_it_expires(fleet_url: str) -> None:
    first = start(fleet_url, ["watch", "--domstats-dir", str(FLEET), "--act", "apply"], failpoint="run-planned:stop")
    wait_stopped(first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert _lease(fleet_url)[1] == first.pid  # left behind
    assert run(fleet_url, "watch", "--once", "--act", "off").code == 0  # its process is gone: free
    # a watch of another machine, killed: its lease holds until it expires
    future = round((time.time() + 600) * 1000)
    _set(fleet_url, "UPDATE watch_lease SET token = 'x', machine = 'elsewhere', pid = 1, expires_ms = :at",
         at=future)
    refused = run(fleet_url, "watch", "--once", "--act", "off")
    assert refused.code == 13 and "(process 1 on elsewhere; its lease runs until" in refused.stderr
    _set(fleet_url, "UPDATE watch_lease SET expires_ms = :at", at=round((time.time() - 1) * 1000))
    assert run(fleet_url, "watch", "--once", "--act", "off").code == 0


def test_a_watch_whose_lease_another_took_writes_no_further_round(fleet_url: str) -> None:
    watch = Watch(Settings(fleet_url), Thresholds())
    try:
        watch.run_round([])
        _set(fleet_url, "UPDATE watch_lease SET token = 'other', machine = 'elsewhere', pid = 1")
        with pytest.raises(LeaseError, match="another vnuma watch took it"):
            watch.run_round([])
        with pytest.raises(LeaseError, match="another vnuma watch writes this inventory"):
            Watch(Settings(fleet_url), Thresholds())
    finally:
        watch.close()
    assert _lease(fleet_url)[0] == "elsewhere"  # not freed by the watch that lost it
