"""The named rules on one round, and the hysteresis that turns their samples into events."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from tests.watch.test_figures import placed, stats
from vnuma.watch.figures import Reading, figures
from vnuma.watch.hysteresis import Track, rebuilt, step
from vnuma.watch.rules import Limits, Thresholds, inconsistency, peaks_with, signals

T = Thresholds()


def _round(rates: dict[str, tuple[int, int]], placements: dict, seconds: float = 1.0):  # type: ignore[no-untyped-def]
    r0 = Reading("h1", 0.0, {vm: stats(0, 0) for vm in rates})
    r1 = Reading("h1", seconds, {vm: stats(local, total) for vm, (local, total) in rates.items()})
    return figures(r0, r1, placements, {})


def _verdicts(fig, placements, peaks, t=T):  # type: ignore[no-untyped-def]
    return {(s.rule, s.vm): s.true for s in signals(fig, placements, t, peaks_with(peaks, (fig,)))}


def test_noisy_needs_a_loaded_domain_so_an_idle_host_flags_nobody() -> None:
    placements = {"a": placed("a", "t1"), "b": placed("b", "t2")}
    fig = _round({"a": (900, 900), "b": (100, 100)}, placements)
    assert _verdicts(fig, placements, {})[("noisy", "a")] is True  # this round is the peak: loaded
    assert _verdicts(fig, placements, {("h1", 0): 10_000})[("noisy", "a")] is False  # 1000 B/s of a 10 kB/s peak


def test_remote_is_the_remote_share_above_the_tenants_limit() -> None:
    placements = {"a": placed("a", "t1"), "b": placed("b", "t2")}
    fig = _round({"a": (600, 1000), "b": (900, 1000)}, placements)
    got = _verdicts(fig, placements, {})
    assert (got[("remote", "a")], got[("remote", "b")]) == (True, False)
    lenient = Thresholds(tenants=MappingProxyType({"t1": Limits(remote_share=0.5)}))
    assert _verdicts(fig, placements, {}, lenient)[("remote", "a")] is False


def test_capped_is_a_capped_vm_at_its_cap_of_the_domain_peak() -> None:
    placements = {"a": placed("a", "t1", caps=((0, 20),)), "b": placed("b", "t2")}
    fig = _round({"a": (200, 200), "b": (800, 800)}, placements)
    got = _verdicts(fig, placements, {})
    assert got[("capped", "a")] is True  # 200 of a 1000 B/s peak at a 20 % cap
    assert ("capped", "b") not in got  # no cap, no verdict
    assert _verdicts(fig, placements, {("h1", 0): 2000})[("capped", "a")] is False


def test_cell_drift_is_more_missing_on_the_host_than_the_threshold() -> None:
    fig = figures(None, Reading("h1", 1.0, {}, {0: {4: 0}, 1: {4: 1000}}), {}, {0: {4: 2_000_000}, 1: {4: 1000}})
    got = {s.cell: s.true for s in signals(fig, {}, T, {})}
    assert got == {0: True, 1: False}


def test_k_over_n_that_cannot_clear_is_refused() -> None:
    assert inconsistency(Thresholds(k=3, n=5, m=2)) is not None
    assert inconsistency(Thresholds(k=6, n=5, m=9)) is not None
    assert inconsistency(Thresholds()) is None


def _run(verdicts: list[bool], t: Thresholds = T) -> list[str | None]:
    track, out = Track(), []
    for v in verdicts:
        track, change = step(track, v, t)
        out.append(change)
    return out


def test_a_single_spike_opens_nothing() -> None:
    assert _run([False, True, False, False, False, True, False, False]) == [None] * 8


def test_k_of_n_opens_and_m_quiet_samples_clear() -> None:
    changes = _run([True, False, True, True, False, False, True, False, False, False])
    assert changes.index("open") == 3  # the third true within five samples
    assert changes.index("close") == 9  # three quiet in a row; the true at 6 restarted the count
    assert changes.count("open") == 1


@given(st.lists(st.booleans(), max_size=40), st.integers(1, 5), st.integers(1, 8), st.integers(0, 8))
def test_a_rebuilt_track_decides_as_the_one_kept_in_memory(
    verdicts: list[bool], k: int, n: int, extra: int,
) -> None:
    if k > n:
        k, n = n, k
    t = Thresholds(k=k, n=n, m=n - k + 1 + extra)
    track = Track()
    for v in verdicts:
        track, _ = step(track, v, t)
    again = rebuilt(verdicts[-max(t.n, t.m):], track.open, t)
    for nxt in (True, False):
        assert step(again, nxt, t)[1] == step(track, nxt, t)[1]
