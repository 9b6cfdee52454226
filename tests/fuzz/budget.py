"""The fixed-seed, bounded Hypothesis settings every CI fuzz test uses."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Per XML parser: 1,200 + 700 + 400 = 2,300 inputs; per text helper 2,000. The whole
# tests/fuzz directory stays near 40 s on 2 cores; bench/fuzz_long.py runs longer.
MUTATED_EXAMPLES = 1200
GENERATED_EXAMPLES = 700
RAW_EXAMPLES = 400
TEXT_EXAMPLES = 2000
ENTITY_EXAMPLES = 150


def fuzz(max_examples: int) -> settings:
    """``max_examples`` inputs from a seed derived from the test itself: the same inputs on every run."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
