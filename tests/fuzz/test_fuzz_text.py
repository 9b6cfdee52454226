"""Fuzz the text helpers every CLI option and inventory row goes through: cpusets, sizes, page sizes.

Inputs mix arbitrary Unicode, the edge strings of ``tests.fuzz.values``
(Unicode digits such as ``"²"``, 5,000-digit numbers, signs, hex) and
near-grammar token strings. Ranges stay below 4,096 ids: ``parse_cpuset``
expands every range into a set, so a range such as ``0-4294967295`` would
exhaust memory rather than fail (reported to the owner of
``vnuma/topology.py`` with a proposed cap; the file parsers guard against it
themselves).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import TEXT_EXAMPLES, fuzz
from tests.fuzz.oracle import outcome
from tests.fuzz.values import EDGE_STRINGS, UNITS

_HUGE_RANGES = ("0-4294967295", "0-99999999999")
_EDGES = st.sampled_from([s for s in EDGE_STRINGS if s not in _HUGE_RANGES])
_NUMBER = st.one_of(st.integers(0, 4096).map(str), st.sampled_from(["9" * 5000, "²", "١٢", "𝟗", "-1", ""]))
_SEPARATORS = st.sampled_from(["-", ",", "^", " ", "\t", "\n", "x", ".", "--", ",^", " - "])
# Number, separator, number...: two numbers never touch, so no range grows past 4,096 ids.
_CPUSET_WORDS = st.lists(st.tuples(_NUMBER, _SEPARATORS), max_size=5).map(
    lambda p: "".join(n + s for n, s in p)
)
_SIZE_TOKENS = st.one_of(_NUMBER, st.sampled_from([*UNITS, " ", "i", "B", "b", "²"]))
_PAGE_WORDS = st.sampled_from(
    ["4K", "2M", "1G", "4KiB", "2mib", "1GIB", "large", "LARGE", "4", "2048", "1048576"]
)


def _joined(tokens: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(tokens, max_size=8).map("".join)


TEXT: dict[str, st.SearchStrategy[str]] = {
    "cpuset": st.one_of(_EDGES, st.text(max_size=30), _CPUSET_WORDS),
    "size": st.one_of(_EDGES, st.text(max_size=30), _joined(_SIZE_TOKENS)),
    "page-size": st.one_of(
        _EDGES, st.text(max_size=30), _joined(_SIZE_TOKENS), st.tuples(_PAGE_WORDS, _SIZE_TOKENS).map("".join)
    ),
}


@pytest.mark.parametrize("parser", sorted(TEXT))
@fuzz(TEXT_EXAMPLES)
@given(data=st.data())
def test_text_parses_or_refuses(parser: str, data: st.DataObject) -> None:
    outcome(parser, data.draw(TEXT[parser], label="text"))
