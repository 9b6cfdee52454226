"""Tables as people read them: aligned columns, no padded line ends, wide characters counted as a terminal does;
JSON as docs/json.md says it is printed."""

from __future__ import annotations

import json

import pytest
from rich.cells import cell_len

from vnuma.cli.output import echo_json, table_lines


def test_columns_align_and_lines_are_not_padded() -> None:
    lines = table_lines("host h", ["CELL", "MEMORY"], [(0, "256 GiB"), (12, None)])
    assert lines == ["host h", "CELL  MEMORY", "0     256 GiB", "12    -"]


def test_wide_characters_take_two_columns() -> None:
    lines = table_lines(None, ["VM", "HOST"], [("模型", "a"), ("ab", "b")])
    assert lines == ["VM    HOST", "模型  a", "ab    b"]  # "模型" is four terminal columns wide
    assert cell_len(lines[1].split("  ")[0]) == 4


def test_a_key_value_table_has_no_header_and_values_stay_on_one_line() -> None:
    assert table_lines(None, ["", ""], [("placed", "3\nof 4")]) == ["placed  3 of 4"]


def test_json_is_indented_utf8_with_non_finite_numbers_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"vm": "模型-1", "ratio": 0.25, "nan": float("nan"), "inf": float("inf"), 3: [], "cells": [{}]}
    echo_json(doc)
    out = capsys.readouterr().out
    assert out == json.dumps({**doc, "nan": None, "inf": None}, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(out)["vm"] == "模型-1"
