"""A trace read host by host: the JSON it holds, errors as the standard library words them, shared hosts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vnuma.errors import InvalidInputError
from vnuma.sources.trace import load_trace
from vnuma.sources.tracescan import scan_trace

REPO = Path(__file__).parents[2]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=4), inner, max_size=3), max_leaves=12)


def _merged(doc: Any) -> Any:
    """The scanned document with each host's name put back (as the whole-tree reader gives it)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), list):
        return doc
    hosts = [raw if name is None else {"name": name, **raw} for name, raw in doc["hosts"]]
    return {**doc, "hosts": hosts}


@settings(max_examples=300)
@given(
    doc=st.dictionaries(st.sampled_from(["format", "hosts", "requests", "x"]), VALUES, max_size=4)
    | VALUES,
    hosts=st.none() | st.lists(
        st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "é"]) | st.integers(), "cells": VALUES})
        | VALUES, max_size=4,
    ),
    indent=st.sampled_from([None, 0, 1, "\t"]),
    compact=st.booleans(),
)
def test_scanning_reads_what_the_whole_tree_reader_reads(doc: Any, hosts: Any, indent: Any, compact: bool) -> None:
    if isinstance(doc, dict) and hosts is not None:
        doc = {**doc, "hosts": hosts}
    text = json.dumps(doc, indent=indent, separators=(",", ":") if compact else None)
    assert _merged(scan_trace(text)) == json.loads(text)
    assert _merged(scan_trace(f" \n{text}\n ")) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ['{"hosts": [1, 2', '{"hosts": [1 2]}', '{"a": 1,}', '{"a" 1}', '{"a": 1} x', '{"hosts": [{"name": "h"},]}',
     '{"hosts": []', '{', '{"a": }', '{1: 2}', '{"a": 1 "b": 2}', ''],
)
def test_malformed_text_is_refused_in_the_standard_librarys_words(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        scan_trace(text)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("spacing", [None, (",", ":"), "as generated"])
def test_hosts_that_differ_only_in_name_share_one_topology(spacing: Any) -> None:
    path = REPO / "examples" / "traces" / "dual-socket-2cell.json"
    doc = json.loads(path.read_text())
    text = path.read_text() if spacing == "as generated" else json.dumps(doc, separators=spacing)
    trace = load_trace(text.encode(), "t.json")
    first, *others = trace.hosts
    assert others and all(h.cells is first.cells and h.devices is first.devices for h in others)
    for raw, host in zip(doc["hosts"], trace.hosts, strict=True):  # each as it decodes alone
        (alone,) = load_trace(json.dumps({**doc, "hosts": [raw]}).encode(), "t.json").hosts
        assert host == alone


def test_a_bad_name_on_a_shared_host_is_refused_at_its_index() -> None:
    doc = json.loads((REPO / "examples" / "traces" / "dual-socket-2cell.json").read_text())
    doc["hosts"][3]["name"] = "bad name"
    with pytest.raises(InvalidInputError, match=r"^t.json: hosts\[3\].name: "):
        load_trace(json.dumps(doc), "t.json")
