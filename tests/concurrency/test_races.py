"""Placements racing from separate processes on one inventory: nothing double-booked, nothing half-written.

Four spawned processes x 60 operations (placements of random shapes under
``pack``, so racers often compute the very same pCPUs, plus releases of
their own VMs) on three small GPU hosts, on SQLite and on PostgreSQL. The
issue's full size (8 x 250) and the throughput are in ``bench/bench_races.py``.
"""

from __future__ import annotations

import pytest

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import OUTCOMES, make_fleet, recorded_vms, run_race

WORKERS = 4
OPERATIONS = 60


@pytest.mark.slow
def test_racing_placements_never_double_book(url: str) -> None:
    make_fleet(url)
    reports = run_race(url, WORKERS, OPERATIONS, seed=7)

    failures = [f for r in reports for f in r.failures]
    assert failures == [], "\n".join(failures)
    for r in reports:
        assert set(r.outcomes) <= set(OUTCOMES)
        assert sum(r.outcomes.values()) == OPERATIONS, r.outcomes
        for reason in r.reasons:
            assert reason.startswith("inventory busy:") or "locked" in reason, reason
    assert sum(r.outcomes["placed"] for r in reports) > 0

    # Recorded whole: exactly the VMs the workers were told they got, each as it was returned.
    held = {name: doc for r in reports for name, doc in r.held.items()}
    assert recorded_vms(url) == held
    assert inconsistencies(url) == []
