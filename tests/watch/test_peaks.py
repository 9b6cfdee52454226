"""A domain's peak is one rule derived from what the history keeps: a watch that runs on and one that
restarts agree (SQLite and PostgreSQL), a spike older than the raw window counts only through its minute's
mean, and the pure queues equal the brute-force maximum over the kept rows (property)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from tests.cli.conftest import Cli
from tests.watch.conftest import make_fleet
from vnuma.services import Settings
from vnuma.services.watch import Watch
from vnuma.watch.figures import Reading
from vnuma.watch.peaks import Peaks
from vnuma.watch.rules import Thresholds

T = Thresholds(history_s=60)  # a one-minute raw window: the recording's spikes age into means


MB = 10**6
T0 = 1796601600


def _spiky(i: int) -> Reading:
    """Host rdt's reading ``i`` (every 10 s): b1 moves 500 MB/s, and 6000 MB/s in the ten seconds before sample 3
    only; b2, on the other domain, 200 MB/s (counters cumulative from 0)."""
    def vm(node: int, total: int) -> dict[str, object]:
        return {"cpu.time": i * 10**10, "memory.bandwidth.monitor.count": 1,
                "memory.bandwidth.monitor.0.node.count": 1, "memory.bandwidth.monitor.0.node.0.id": node,
                "memory.bandwidth.monitor.0.node.0.bytes.local": total,
                "memory.bandwidth.monitor.0.node.0.bytes.total": total}

    b1 = sum(6000 * MB if k == 3 else 500 * MB for k in range(1, i + 1)) * 10
    return Reading("rdt", T0 + 10 * i, {"b1": vm(0, b1), "b2": vm(1, 200 * MB * 10 * i)})


def _replayed(url: str, restart_at: set[int], rounds: int = 14) -> dict[tuple[str, int], int]:
    """The peaks after ``rounds`` of :func:`_spiky`, the watch restarted before each round of ``restart_at``;
    after every round they are the highest totals the history keeps."""
    watch = Watch(Settings(url), T)
    try:
        for i in range(rounds):
            if i in restart_at:
                watch.close()
                watch = Watch(Settings(url), T)
            watch.run_round([_spiky(i)])
            assert watch.peaks.snapshot() == _kept_max(url), f"after round {i}"
        return watch.peaks.snapshot()
    finally:
        watch.close()


def _kept_max(url: str) -> dict[tuple[str, int], int]:
    """Per domain, the highest total of the rows the history keeps."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT host, item, MAX(total_bps) FROM watch_samples WHERE kind = 'domain' "
                                     "GROUP BY host, item"))
            return {(str(h), int(i)): int(m) for h, i, m in rows}
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_spike_aged_out_of_the_raw_window_counts_through_its_minutes_mean(fleet_url: str) -> None:
    on = _replayed(fleet_url, set())
    # minute 0's raw samples (b1's spike among them) became their mean: the peak is that mean, not the spike
    assert 500 * MB < on[("rdt", 0)] < 6000 * MB


@pytest.mark.slow
@pytest.mark.parametrize("restarts", [{1}, {4, 7}, {3, 6, 9, 12, 13}], ids=["1", "4,7", "3,6,9,12,13"])
def test_a_restarted_watch_has_the_peaks_of_one_that_ran_on(fleet_url: str, restarts: set[int]) -> None:
    assert _replayed(fleet_url, restarts) == _uninterrupted()


@cache
def _uninterrupted() -> dict[tuple[str, int], int]:
    """The peaks of a watch that never stopped, on an inventory of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        cli = make_fleet(Cli(Path(tmp) / "inventory.db"))
        return _replayed(f"sqlite:///{cli.db}", set())


Row = tuple[int, int, bool]  # (key index, total, minute)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.integers(0, 2), st.integers(0, 100), st.booleans()),
                          st.tuples(st.just(-1), st.integers(0, 30), st.integers(0, 30))), max_size=80))
def test_the_queues_hold_the_highest_kept_total(ops: list[tuple[int, int, int | bool]]) -> None:
    """Adds (in time order) and cuts (never moving back), against the maximum over the rows a cut keeps."""
    peaks = Peaks()
    rows: list[tuple[tuple[str, int], int, int, bool]] = []
    raw_cut = means_cut = 0
    for now, op in enumerate(ops, start=1):
        if op[0] == -1:
            raw_cut, means_cut = max(raw_cut, now - int(op[1])), max(means_cut, now - int(op[2]))
            peaks.expire(raw_cut, means_cut)
            rows = [r for r in rows if r[2] >= (means_cut if r[3] else raw_cut)]
        else:
            key, total, minute = ("h", int(op[0])), int(op[1]), bool(op[2])
            peaks.add(key, now, total, minute=minute)
            rows.append((key, total, now, minute))
        for k in {("h", 0), ("h", 1), ("h", 2)}:
            assert peaks.peak(k) == max((t for key, t, _, _ in rows if key == k), default=0)
