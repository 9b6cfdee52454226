"""The service's pure parts: the rate limiter's buckets, --listen, --expires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.api.serving import parse_listen
from vnuma.errors import InvalidInputError
from vnuma.services.tokens import parse_expires


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_the_burst_then_the_rate() -> None:
    from vnuma.api.limits import RateLimiter

    clock = Clock()
    limiter = RateLimiter(2.0, 4, clock)
    assert [limiter.take("t") for _ in range(4)] == [0.0] * 4
    assert limiter.take("t") == pytest.approx(0.5)
    assert limiter.take("other") == 0.0  # one bucket per token
    clock.now += 0.5
    assert limiter.take("t") == 0.0 and limiter.take("t") > 0
    clock.now += 100  # refills to the burst, never beyond
    assert [limiter.take("t") for _ in range(5)].count(0.0) == 4
    assert RateLimiter(0, None, clock).take("t") == 0.0  # 0: no limit


@given(st.floats(0.1, 1000), st.integers(1, 50), st.lists(st.floats(0, 5), max_size=60))
def test_never_more_than_burst_plus_rate_times_elapsed(rate: float, burst: int, gaps: list[float]) -> None:
    from vnuma.api.limits import RateLimiter

    clock = Clock()
    limiter = RateLimiter(rate, burst, clock)
    allowed = 0
    for gap in gaps:
        clock.now += gap
        allowed += limiter.take("t") == 0.0
    assert allowed <= burst + rate * sum(gaps) + 1e-6


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8750") == ("127.0.0.1", 8750)
    assert parse_listen("[::1]:80") == ("::1", 80)
    assert parse_listen("api.example:443") == ("api.example", 443)
    for bad in ("8750", ":80", "h:0", "h:65536", "h:80:90", "[::1]80"):
        with pytest.raises(InvalidInputError):
            parse_listen(bad)


def test_expires_is_an_age_or_a_future_time() -> None:
    now = datetime(2026, 12, 4, tzinfo=UTC)
    assert parse_expires("90d", now) == now + timedelta(days=90)
    assert parse_expires("12h", now) == now + timedelta(hours=12)
    assert parse_expires("2027-01-01", now) == datetime(2027, 1, 1, tzinfo=UTC)
    for bad in ("2026-01-01", "0d", "never", "-5d"):
        with pytest.raises(InvalidInputError):
            parse_expires(bad, now)
