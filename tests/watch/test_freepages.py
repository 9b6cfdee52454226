"""Saved `virsh freepages --all` output read back as getFreePages gives it."""

from __future__ import annotations

import pytest

from vnuma.errors import InvalidInputError
from vnuma.sources.freepages import parse_freepages

TEXT = """Node 0:
4KiB: 1811834
2048KiB: 512
1048576KiB: 0

Node 1:
4KiB: 12
2048KiB: 0
1048576KiB: 4
"""


def test_free_pages_per_cell_and_size() -> None:
    assert parse_freepages(TEXT, "f") == {0: {4: 1811834, 2048: 512, 1048576: 0}, 1: {4: 12, 2048: 0, 1048576: 4}}


@pytest.mark.parametrize(("text", "message"), [
    ("", "no 'Node N:' line"),
    ("4KiB: 1\n", "line 1: expected"),
    ("Node 0:\n4KiB: many\n", "line 2: expected"),
    ("Node 0:\nNode 0:\n", "cell 0 appears twice"),
])
def test_text_that_is_not_freepages_output_is_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_freepages(text, "saved.txt")
