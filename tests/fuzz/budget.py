"""The bounded Hypothesis settings every CI fuzz test uses (randomness as the active profile says)."""

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
    """``max_examples`` inputs; new ones on every CI run (the ``ci`` profile, seed printed), fixed under
    the ``fixed`` profile (see tests/conftest.py)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
