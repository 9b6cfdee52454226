"""Trace parsing and simulation on the shipped example traces (invariants, not counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.placement.helpers import check_fleet
from vnuma.errors import InvalidInputError
from vnuma.placement.model import Isolation, Strategy
from vnuma.simulate import load_trace, placements_to_list, report_to_dict, run, trace_hosts
from vnuma.topology import PAGE_2M, DeviceKind, Source

TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"
EXAMPLES = sorted(p.stem for p in TRACES.glob("*.json"))
REPORT_KEYS = {
    "scenario",
    "requests",
    "placed",
    "rejected",
    "rejections_by_reason",
    "pcpus_used",
    "pcpus_total",
    "gpus_used",
    "gpus_total",
    "multi_node",
    "multi_node_non_adjacent",
    "decision_us",
    "wall_s",
    "requests_per_s",
}


def test_the_example_traces_are_there() -> None:
    assert set(EXAMPLES) == {"dual-socket-2cell", "epyc-nps4-8cell", "big-16cell"}


@pytest.mark.parametrize("strategy", list(Strategy), ids=[s.value for s in Strategy])
@pytest.mark.parametrize("name", EXAMPLES)
def test_simulation_report_and_placements_hold_together(name: str, strategy: Strategy) -> None:
    path = TRACES / f"{name}.json"
    trace = load_trace(path.read_bytes(), str(path))
    report = run(trace, strategy, Isolation.CORE)
    d = json.loads(json.dumps(report_to_dict(report)))
    assert set(d) == REPORT_KEYS
    assert d["scenario"] == name and d["requests"] == len(trace.requests)
    assert d["placed"] + d["rejected"] == d["requests"] and d["placed"] > 0
    assert sum(d["rejections_by_reason"].values()) == d["rejected"]
    assert 0 < d["pcpus_used"] <= d["pcpus_total"] and 0 <= d["gpus_used"] <= d["gpus_total"]
    assert 0 <= d["multi_node_non_adjacent"] <= d["multi_node"] <= d["placed"]
    times = d["decision_us"]
    assert set(times) == {"mean", "p50", "p99", "max"}
    assert 0 < times["p50"] <= times["p99"] <= times["max"]
    assert d["wall_s"] > 0 and d["requests_per_s"] > 0
    placed = [p for p in report.placements if p is not None]
    check_fleet(trace_hosts(trace), placed, {})
    entries = json.loads(json.dumps(placements_to_list(report)))
    assert [e["name"] for e in entries] == [r.name for r in trace.requests]
    assert sum(1 for e in entries if e["host"] is not None) == d["placed"]
    assert sum(len(e["gpus"]) for e in entries) == d["gpus_used"]
    for entry, request in zip(entries, trace.requests, strict=True):
        if entry["host"] is None:
            assert entry["cells"] == [] and entry["gpus"] == []
            continue
        assert len(entry["gpus"]) == request.gpus
        assert sum(len(c["pcpus"]) for c in entry["cells"]) == request.vcpus
        assert sum(c["memory_mib"] for c in entry["cells"]) == request.memory_mib
        if request.numa_nodes is not None:
            assert len(entry["cells"]) == request.numa_nodes
        if request.page_size_kib is not None:
            assert {c["page_size_kib"] for c in entry["cells"]} == {request.page_size_kib}


def test_equidistant_cells_are_always_adjacent() -> None:
    path = TRACES / "dual-socket-2cell.json"
    d = report_to_dict(run(load_trace(path.read_bytes(), str(path)), Strategy.PACK, Isolation.NONE))
    assert d["multi_node"] > 0 and d["multi_node_non_adjacent"] == 0


def _cell(**over: Any) -> dict[str, Any]:
    cell = {
        "id": 0,
        "cpus": [0, 1, 2, 3],
        "siblings": [[0, 2], [1, 3]],
        "memory_mib": 4096,
        "hugepages": {"4": {"total": 524288, "free": 524288}, "2048": {"total": 1024, "free": 512}},
        "distances": {"0": 10},
        "gpus": ["0000:17:00.0"],
        "nics": ["0000:1a:00.0"],
    }
    return {**cell, **over}


def _request(**over: Any) -> dict[str, Any]:
    req = {
        "tenant": "t",
        "name": "vm-1",
        "vcpus": 2,
        "memory_mib": 1024,
        "numa_nodes": 1,
        "cpu_policy": "dedicated",
        "thread_policy": "prefer",
        "page_size_kib": 2048,
        "gpus": 0,
    }
    return {**req, **over}


def _trace(hosts: Any = None, requests: Any = None, **over: Any) -> bytes:
    doc = {
        "format": "numa-placement-trace",
        "version": 1,
        "scenario": "tiny",
        "seed": None,
        "description": "",
        "hosts": hosts if hosts is not None else [{"name": "h", "cells": [_cell()]}],
        "requests": requests if requests is not None else [_request()],
    }
    return json.dumps({**doc, **over}).encode()


def test_trace_hosts_are_topology_hosts() -> None:
    trace = load_trace(_trace(), "t.json")
    (host,) = trace_hosts(trace)
    (cell,) = host.cells
    assert host.source is Source.TRACE and host.name == "h"
    assert [c.siblings for c in cell.cpus] == [frozenset({0, 2}), frozenset({1, 3})] * 2
    assert cell.pages_of(PAGE_2M) == 512  # the free count: the trace's starting state
    assert [(d.kind, d.numa_node) for d in host.devices] == [(DeviceKind.GPU, 0), (DeviceKind.NIC, 0)]
    assert trace.requests[0].page_size_kib == PAGE_2M


BAD_TRACES = [
    # (id, bytes, fragment of the error)
    ("not-json", b"{nope", "not valid JSON"),
    ("not-an-object", b"[]", "expected a JSON object"),
    ("wrong-format", _trace(format="other"), "format: expected 'numa-placement-trace'"),
    ("wrong-version", _trace(version=2), "version: only version 1"),
    (
        "missing-hosts",
        json.dumps({"format": "numa-placement-trace", "version": 1, "scenario": "x"}).encode(),
        "missing key 'hosts'",
    ),
    (
        "siblings-not-a-partition",
        _trace(hosts=[{"name": "h", "cells": [_cell(siblings=[[0, 2]])]}]),
        "hosts[0].cells[0].siblings: sibling groups must partition",
    ),
    (
        "bad-page-size",
        _trace(hosts=[{"name": "h", "cells": [_cell(hugepages={"2M": {"total": 1, "free": 1}})]}]),
        "hugepages.2M: page size must be a decimal number of KiB",
    ),
    (
        "free-above-total",
        _trace(hosts=[{"name": "h", "cells": [_cell(hugepages={"4": {"total": 1, "free": 2}})]}]),
        "exceed the total",
    ),
    (
        "distance-to-missing-cell",
        _trace(hosts=[{"name": "h", "cells": [_cell(distances={"0": 10, "5": 20})]}]),
        "distance to missing cell 5",
    ),
    ("duplicate-host", _trace(hosts=[{"name": "h", "cells": [_cell()]}] * 2), "duplicate host name 'h'"),
    ("zero-vcpus", _trace(requests=[_request(vcpus=0)]), "requests[0].vcpus: must be 1 or more"),
    (
        "numa-nodes-key-missing",
        _trace(requests=[{k: v for k, v in _request().items() if k != "numa_nodes"}]),
        "requests[0]: missing key 'numa_nodes'",
    ),
    (
        "unknown-thread-policy",
        _trace(requests=[_request(thread_policy="spread")]),
        "thread_policy: expected one of",
    ),
    ("string-count", _trace(requests=[_request(gpus="2")]), "requests[0].gpus: expected an integer, got str"),
    ("duplicate-request", _trace(requests=[_request(), _request()]), "duplicate request name"),
]


@pytest.mark.parametrize(("data", "fragment"), [c[1:] for c in BAD_TRACES], ids=[c[0] for c in BAD_TRACES])
def test_bad_traces_name_the_file_and_key(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        load_trace(data, "bad.json")
    assert str(err.value).startswith("bad.json")
    assert fragment in str(err.value)
