"""Fuzz the XML parsers: mutated fixtures, generated documents, raw bytes (fixed seed, bounded count).

Per parser: MUTATED + GENERATED + RAW examples (2,300, see ``budget``). The oracle accepts a
checked result or a one-line InvalidInputError; anything else fails.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import GENERATED_EXAMPLES, MUTATED_EXAMPLES, RAW_EXAMPLES, fuzz
from tests.fuzz.generate import (
    capabilities_documents,
    hwloc_documents,
    nodedev_documents,
    nodedev_files,
    nvidia_smi_documents,
)
from tests.fuzz.mutate import CAPABILITIES, HWLOC, NODEDEV, NVIDIA_SMI, Family, mutated
from tests.fuzz.oracle import outcome
from tests.fuzz.raw import BOMS, encoded, raw_bytes, token_soup

PARSER_FAMILIES = [
    ("capabilities", CAPABILITIES),
    ("nodedev", NODEDEV),
    ("nodedev-file", NODEDEV),
    ("hwloc", HWLOC),
    ("nvidia-smi", NVIDIA_SMI),
]
IDS = [parser for parser, _ in PARSER_FAMILIES]


def _bytes_or_encoded(text: st.SearchStrategy[str]) -> st.SearchStrategy[bytes | str]:
    return st.one_of(text.map(str.encode), text.map(str.encode), text.flatmap(encoded))


GENERATED: dict[str, st.SearchStrategy[bytes | str]] = {
    "capabilities": _bytes_or_encoded(capabilities_documents()),
    "nodedev": _bytes_or_encoded(nodedev_documents()),
    "nodedev-file": _bytes_or_encoded(nodedev_files()),
    "hwloc": _bytes_or_encoded(hwloc_documents()),
    "nvidia-smi": _bytes_or_encoded(nvidia_smi_documents()),
}
RAW: st.SearchStrategy[bytes | str] = st.one_of(
    raw_bytes,
    st.tuples(st.sampled_from(BOMS), raw_bytes).map(b"".join),
    token_soup.flatmap(encoded),
)


@pytest.mark.parametrize(("parser", "family"), PARSER_FAMILIES, ids=IDS)
@fuzz(MUTATED_EXAMPLES)
@given(data=st.data())
def test_mutated_fixtures_parse_or_refuse(parser: str, family: Family, data: st.DataObject) -> None:
    outcome(parser, data.draw(mutated(family), label="document"))


@pytest.mark.parametrize("parser", IDS)
@fuzz(GENERATED_EXAMPLES)
@given(data=st.data())
def test_generated_documents_parse_or_refuse(parser: str, data: st.DataObject) -> None:
    outcome(parser, data.draw(GENERATED[parser], label="document"))


@pytest.mark.parametrize("parser", IDS)
@fuzz(RAW_EXAMPLES)
@given(document=RAW)
def test_raw_input_parses_or_refuses(parser: str, document: bytes | str) -> None:
    outcome(parser, document)
