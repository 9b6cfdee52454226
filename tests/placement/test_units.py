"""How sizes and counts read: one style in every table and message, and the parser reads it back."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.errors import InvalidInputError
from vnuma.topology import count_of, format_size_kib, parse_size_kib, shape_text


@pytest.mark.parametrize(
    ("kib", "text"),
    [
        (4, "4 KiB"),
        (2048, "2 MiB"),
        (160 * 1024**2, "160 GiB"),
        (1024**3, "1 TiB"),
        (1536 * 1024, "1.5 GiB"),
        (1280 * 1024, "1.25 GiB"),
        (126_796 * 1024, "123.8 GiB"),  # a whole number of MiB reads in GiB like its neighbours
        (131_811_936, "125.7 GiB"),
        (1023, "1023 KiB"),
    ],
)
def test_sizes_read_as_number_space_unit(kib: int, text: str) -> None:
    assert format_size_kib(kib) == text


def test_cells_of_one_host_read_in_one_unit() -> None:
    """The kernel's cell sizes (one a whole number of MiB, one not) print alike: never 126796 MiB beside
    127.7 GiB."""
    assert [format_size_kib(k) for k in (126_796 * 1024, 133_903_155)] == ["123.8 GiB", "127.7 GiB"]


@given(st.integers(1, 1 << 40))
def test_every_exact_size_parses_back_and_a_rounded_one_is_within_a_twentieth(kib: int) -> None:
    text = format_size_kib(kib)
    unit = {"KiB": 1, "MiB": 1024, "GiB": 1024**2, "TiB": 1024**3}[text.split()[1]]
    if kib * 100 % unit == 0:
        assert parse_size_kib(text) == kib
    else:
        assert abs(float(text.split()[0]) * unit - kib) <= unit / 20


@pytest.mark.parametrize(
    ("text", "kib"),
    [("1.5GiB", 1536 * 1024), ("1.25 GiB", 1280 * 1024), ("0.5M", 512), ("2.0G", 2 * 1024**2), ("64GiB", 64 << 20)],
)
def test_a_fraction_that_makes_whole_kib_is_a_size(text: str, kib: int) -> None:
    assert parse_size_kib(text) == kib


@pytest.mark.parametrize(
    ("text", "words"),
    [("1.3GiB", "1363148.8 KiB is not a whole number of KiB"), ("0.5KiB", "0.5 KiB is not a whole number"),
     ("1.5", "use a number with a unit"), ("1.GiB", "use a number with a unit")],
)
def test_a_size_that_is_not_whole_kib_is_refused_naming_the_value(text: str, words: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(f"bad size {text!r}")) as err:
        parse_size_kib(text)
    assert words in str(err.value)


def test_counts_are_singular_for_one() -> None:
    assert [count_of(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert shape_text(1, 1024**2, 1) == "1 vCPU, 1 GiB, 1 GPU"
    assert shape_text(16, 64 * 1024**2, 0) == "16 vCPUs, 64 GiB, 0 GPUs"
    assert shape_text(None, None, 2) == "vCPUs sized by its GPUs, memory sized by its GPUs, 2 GPUs"
    assert shape_text(32, 48 * 1024**2, 0, 4) == "32 vCPUs, 48 GiB of 4 KiB pages, 0 GPUs"
