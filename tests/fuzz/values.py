"""Hypothesis strategies for the values a fuzzer writes into attributes and text.

Biased towards the places parsers break: signs, bases, huge and Unicode
numbers, reversed or enormous ranges, empty strings, unit names.
"""

from __future__ import annotations

from hypothesis import strategies as st

EDGE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "-",
    "+",
    "-1",
    "-0",
    "0",
    "00",
    "+1",
    " 7 ",
    "1 2",
    "0x",
    "0x1f",
    "0X10",
    "-0x1",
    "0x-1",
    "0xffffffff",
    "4294967295",
    "18446744073709551615",
    "9223372036854775807",
    "9223372036854775808",
    str(10**30),
    "-" + str(10**30),
    "9" * 5000,
    "0x" + "f" * 5000,
    "1e3",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1.5",
    "1_000",
    "0b101",
    "0o17",
    "²",
    "¹²",
    "١٢",
    "٣",
    "𝟗",
    "Ⅻ",
    "0-3",
    "3-0",
    "0-4294967295",
    "0-99999999999",
    "^0",
    "^",
    "0,,1",
    ",",
    "0-",
    "-3",
    "0xf...f",
    "0xffffffff,0xffffffff",
    "0xf...f,0x1",
    ",0x1",
    "0x1,",
    "0x123456789",
    "\n5",
    "5\n",
    "\t",
    "KiB",
    "b",
    "EiB",
    "E",
    "P",
    "Bytes",
    "abc",
    "DRAM",
    "HBM",
    "os",
    "gp",
    "logical",
    "2.0",
    "1.11",
    "3.0",
    "2",
    "pci",
    "-1-2",
    "1--2",
)

UNITS: tuple[str, ...] = (
    "KiB",
    "k",
    "K",
    "b",
    "bytes",
    "B",
    "KB",
    "M",
    "MiB",
    "MB",
    "G",
    "GiB",
    "T",
    "P",
    "E",
    "EiB",
    "e",
    "x",
    "",
    " KiB ",
    "KiBB",
    "iB",
)

_BANNED = frozenset(range(0x20)) - {0x09, 0x0A, 0x0D}


def xml_text(text: str) -> str:
    """Drop characters lxml refuses in attributes and text (C0 controls, surrogates, U+FFFE/F)."""
    return "".join(
        ch for ch in text if ord(ch) not in _BANNED and not 0xD800 <= ord(ch) <= 0xDFFF and ord(ch) < 0xFFFE
    )


def _hex(value: int) -> str:
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


def _cpuset(parts: list[tuple[int, int]]) -> str:
    return ",".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in parts)


small_ints = st.integers(min_value=-2, max_value=40)
edge_ints = st.sampled_from([-(2**63), -1, 0, 1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**30])
any_ints = st.one_of(small_ints, edge_ints, st.integers(min_value=-(2**70), max_value=2**70))
pair = st.tuples(st.integers(0, 70), st.integers(0, 70))
cpusets = st.lists(pair, max_size=4).map(_cpuset)

numbers = st.one_of(any_ints.map(str), any_ints.map(_hex))
"""Text that reads as an integer to a lenient eye: decimal or ``0x`` hex, any size or sign."""

values = st.one_of(
    st.sampled_from(EDGE_STRINGS),
    numbers,
    cpusets,
    st.sampled_from(UNITS),
    st.text(max_size=12).map(xml_text),
)
"""Anything a fuzzer may put in an attribute or element text (always XML-compatible)."""


def number_or(valid: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    """Mostly a valid number from ``valid``, sometimes any drawn value (plausible-but-wrong documents)."""
    return st.one_of(valid.map(str), valid.map(str), valid.map(str), values)
