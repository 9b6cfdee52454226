"""The pure round figures: rates over the real elapsed time, counter resets, the clock, CPU use, drift."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import kept
from vnuma.placement.model import Placement
from vnuma.watch.figures import ClockError, Reading, cell_figures, figures


def stats(local: int, total: int, cpu_ns: int | None = None, domain: int = 0, llc: int = 0) -> dict[str, object]:
    """One domain's stats as libvirt gives them: one MBM monitor on one L3 domain, one CMT bank."""
    out: dict[str, object] = {
        "memory.bandwidth.monitor.count": 1,
        "memory.bandwidth.monitor.0.node.count": 1,
        "memory.bandwidth.monitor.0.node.0.id": domain,
        "memory.bandwidth.monitor.0.node.0.bytes.local": local,
        "memory.bandwidth.monitor.0.node.0.bytes.total": total,
        "cpu.cache.monitor.count": 1,
        "cpu.cache.monitor.0.bank.count": 1,
        "cpu.cache.monitor.0.bank.0.id": domain,
        "cpu.cache.monitor.0.bank.0.bytes": llc,
    }
    if cpu_ns is not None:
        out["cpu.time"] = cpu_ns
    return out


def placed(vm: str, tenant: str = "t", host: str = "h1", caps: tuple[tuple[int, int], ...] = ()) -> Placement:
    return kept(Placement(vm=vm, tenant=tenant, host=host, cells=(), mem_bw=caps))


PLACED = {"a": placed("a"), "b": placed("b", "u")}


def test_rates_are_differences_over_the_real_time_between_the_readings() -> None:
    r0 = Reading("h1", 100.0, {"a": stats(0, 0, 0)})
    r1 = Reading("h1", 104.0, {"a": stats(2_000_000_000, 8_000_000_000, 6_000_000_000, llc=4096)})
    fig = figures(r0, r1, PLACED, {})
    (v,) = fig.vms
    assert fig.elapsed_s == 4.0
    assert (v.rate.local_bps, v.rate.total_bps, v.remote_bps) == (500_000_000, 2_000_000_000, 1_500_000_000)
    assert v.remote_share == 0.75
    assert v.cpu == 1.5
    assert v.llc_bytes == 4096


def test_a_counter_that_went_down_is_a_restarted_domain_and_gives_no_rate() -> None:
    r0 = Reading("h1", 100.0, {"a": stats(9_000, 9_000, 50), "b": stats(0, 0, 0)})
    r1 = Reading("h1", 110.0, {"a": stats(10, 20, 60), "b": stats(10, 10, 10)})
    fig = figures(r0, r1, PLACED, {})
    assert fig.resets == ("a",)
    assert [v.vm for v in fig.vms] == ["b"]


def test_cpu_time_going_down_is_a_reset_too() -> None:
    r0 = Reading("h1", 100.0, {"a": stats(0, 0, 900)})
    r1 = Reading("h1", 110.0, {"a": stats(10, 20, 60)})
    assert figures(r0, r1, PLACED, {}).resets == ("a",)


@pytest.mark.parametrize("later", [100.0, 99.0], ids=["same-time", "backwards"])
def test_a_reading_not_later_than_the_one_before_is_refused(later: float) -> None:
    r0 = Reading("h1", 100.0, {"a": stats(0, 0)})
    with pytest.raises(ClockError, match="clock went backwards"):
        figures(r0, Reading("h1", later, {"a": stats(1, 1)}), PLACED, {})


def test_domains_not_placed_on_the_host_are_reported_not_measured() -> None:
    r0 = Reading("h1", 1.0, {"a": stats(0, 0), "stranger": stats(0, 0)})
    r1 = Reading("h1", 2.0, {"a": stats(1, 1), "stranger": stats(5, 5)})
    fig = figures(r0, r1, PLACED, {})
    assert fig.unknown == ("stranger",)
    assert [v.vm for v in fig.vms] == ["a"]


def test_the_first_reading_gives_no_rates_but_the_cells() -> None:
    fig = figures(None, Reading("h1", 1.0, {"a": stats(1, 1)}, {0: {4: 100, 2048: 2}}), PLACED, {0: {4: 150, 2048: 2}})
    assert fig.vms == () and fig.elapsed_s is None
    (c,) = fig.cells
    assert (c.inventory_free_kib, c.host_free_kib, c.drift_kib) == (600 + 4096, 400 + 4096, 200)


def test_drift_counts_what_the_host_lacks_per_page_size_never_what_it_has_more() -> None:
    (c,) = cell_figures({0: {4: 100, 1048576: 4}}, {0: {4: 500, 1048576: 2}})
    assert c.drift_kib == 2 * 1048576


@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**12)),
                min_size=2, max_size=6),
       st.lists(st.floats(0.5, 100.0), min_size=5, max_size=5))
def test_no_rate_is_ever_negative_whatever_the_counters_do(
    counters: list[tuple[int, int, int]], gaps: list[float],
) -> None:
    at = 0.0
    previous = None
    for (local, extra, cpu), gap in zip(counters, gaps, strict=False):
        at += gap
        current = Reading("h1", at, {"a": stats(local, local + extra, cpu)})
        for v in figures(previous, current, PLACED, {}).vms:
            assert v.rate.local_bps >= 0 and v.rate.total_bps >= 0 and v.remote_bps >= 0
            assert v.cpu is None or v.cpu >= 0
        previous = current


def test_memory_is_the_current_readings_balloon_rss_and_current_and_none_when_not_reported() -> None:
    r0 = Reading("h1", 100.0, {"a": stats(0, 0, 0) | {"balloon.rss": 1}, "b": stats(0, 0, 0)})
    r1 = Reading("h1", 110.0, {"a": stats(10, 10, 10) | {"balloon.rss": 2_097_152, "balloon.current": 4_194_304,
                                                        "balloon.maximum": 4_194_304},
                               "b": stats(10, 10, 10)})
    a, b = figures(r0, r1, PLACED, {}).vms
    assert (a.vm, a.rss_kib, a.balloon_kib) == ("a", 2_097_152, 4_194_304)  # a gauge: this reading's, no rate
    assert (b.vm, b.rss_kib, b.balloon_kib) == ("b", None, None)
