"""How sizes and counts read: one style in every table and message, and the parser reads it back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.topology import count_of, format_size_kib, parse_size_kib, shape_text


@pytest.mark.parametrize(
    ("kib", "text"),
    [
        (4, "4 KiB"),
        (2048, "2 MiB"),
        (160 * 1024**2, "160 GiB"),
        (1024**3, "1 TiB"),
        (1536 * 1024, "1536 MiB"),
        (131_811_936, "125.7 GiB"),
        (1023, "1023 KiB"),
    ],
)
def test_sizes_read_as_number_space_unit(kib: int, text: str) -> None:
    assert format_size_kib(kib) == text


@given(st.integers(1, 1 << 40))
def test_every_exact_size_parses_back(kib: int) -> None:
    text = format_size_kib(kib)
    if "." not in text:
        assert parse_size_kib(text) == kib


def test_counts_are_singular_for_one() -> None:
    assert [count_of(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert shape_text(1, 1024**2, 1) == "1 vCPU, 1 GiB, 1 GPU"
    assert shape_text(16, 64 * 1024**2, 0) == "16 vCPUs, 64 GiB, 0 GPUs"
    assert shape_text(None, None, 2) == "vCPUs sized by its GPUs, memory sized by its GPUs, 2 GPUs"
