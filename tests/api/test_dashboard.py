"""examples/grafana/vnuma.json names only metrics vnuma exports: every PromQL expression of its panels and
every query of its variables, against the names a real scrape of the service returns."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import prepared
from tests.cli.conftest import REPO, Cli
from vnuma.api.app import create_app
from vnuma.services import make_settings

DASHBOARD = REPO / "examples" / "grafana" / "vnuma.json"

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
             "offset", "inf", "nan", "atan2"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(METRIC, LABEL)`` query) reads."""
    found = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*\w+\s*\)\s*", expr)
    if found:
        return {found.group(1)}
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "", expr)  # Grafana's variables
    text = re.sub(r'"(?:\\.|[^"\\])*"', "", text)  # strings, then label matchers and ranges
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\boffset\s+\w+", "", text)
    text = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", "", text)  # numbers
    names = set()
    for m in re.finditer(r"[A-Za-z_:][\w:]*", text):
        after = text[m.end():].lstrip()
        if m.group(0).lower() in _KEYWORDS or after.startswith("("):  # a keyword, a function or an aggregation
            continue
        names.add(m.group(0))
    return names


def expressions(doc: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard's panels (rows' panels included) and its query variables."""
    out = []
    stack = list(doc["panels"])
    while stack:
        panel = stack.pop()
        stack += panel.get("panels", [])
        out += [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            out.append(query["query"] if isinstance(query, dict) else query)
    return out


def exported(text: str) -> set[str]:
    """The series names a scrape holds: each sample's, and for families without samples (no VM measured yet,
    no GPU partitioned) the names their samples would have."""
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ("",))
        names |= {family.name + s for s in suffixes}
    return names


def test_the_parser_finds_the_metrics_of_an_expression() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{x="y{z}"}[$__rate_interval]))) / '
            'on(host) group_left(cell) b_total offset 1h - 1e3 * max without (vm) (c:rule) > bool 2')
    assert metric_names(expr) == {"a_bucket", "b_total", "c:rule"}
    assert metric_names("label_values(vnuma_vms, tenant)") == {"vnuma_vms"}
    assert metric_names('time() - min(vnuma_vm_sample_timestamp_seconds{tenant=~"$tenant"})') == {
        "vnuma_vm_sample_timestamp_seconds"}


@pytest.fixture
def scraped(tmp_path: Path) -> str:
    """A scrape of the service over the API tests' inventory (GPUs with MIG partitions), after one request."""
    cli = Cli(tmp_path / "inventory.db")
    prepared(cli)
    with TestClient(create_app(make_settings(str(cli.db), {})), client=("127.0.0.1", 50000)) as client:
        assert client.get("/v1/vms").status_code == 401
        got = client.get("/metrics")
    assert got.status_code == 200
    return got.text


def test_every_expression_of_the_dashboard_names_a_metric_vnuma_exports(scraped: str) -> None:
    doc = json.loads(DASHBOARD.read_text())
    found = expressions(doc)
    assert len(found) > 20
    names = exported(scraped)
    unknown = {(expr, name) for expr in found for name in metric_names(expr) if name not in names}
    assert not unknown, f"the dashboard reads metrics vnuma does not export: {sorted(unknown)}"
    used = set().union(*(metric_names(e) for e in found))
    for wanted in ("vnuma_cell_pcpus_free", "vnuma_vm_memory_bandwidth_bytes_per_second",
                   "vnuma_placement_refusals_total", "vnuma_api_request_duration_seconds_bucket"):
        assert wanted in used
