"""Trace parsing and simulation on the shipped example traces (invariants, not counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.placement.helpers import check_fleet
from vnuma.errors import InvalidInputError
from vnuma.placement.model import ColdTier, Isolation
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace, placements_to_list, report_to_dict, run, trace_hosts
from vnuma.topology import PAGE_2M, DeviceKind, Source
from vnuma.topology.tiers import UNRATED_LATENCY_NS, cell_kinds, cpu_cell_ratings

TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"
EXAMPLES = sorted(p.stem for p in TRACES.glob("*.json"))
REPORT_KEYS = {
    "scenario",
    "requests",
    "placed",
    "rejected",
    "rejections_by_reason",
    "invalid_requests",
    "pcpus_used",
    "pcpus_total",
    "gpus_used",
    "gpus_total",
    "multi_node",
    "multi_node_non_adjacent",
    "cold_requests",
    "cold_placed",
    "cold_memory_mib",
    "nic_requests",
    "nic_placed",
    "nics_used",
    "nic_vfs_used",
    "nics_total",
    "gpu_nic_levels",
    "gpu_nic_worse",
    "partition_requests",
    "partition_placed",
    "gpus_whole",
    "gpus_partitioned",
    "gpus_stranded",
    "alternative_requests",
    "placed_by_alternative",
    "decision_us",
    "wall_s",
    "requests_per_s",
}


def test_the_example_traces_are_there() -> None:
    assert set(EXAMPLES) == {
        "dual-socket-2cell", "epyc-nps4-8cell", "big-16cell", "snc-cxl-gpu", "dgx-nics", "shared-nics",
        "gpu-partitions",
    }


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
    assert 0 <= d["cold_placed"] <= d["cold_requests"] == sum(1 for r in trace.requests if r.cold_memory_kib)
    assert 0 <= d["nic_placed"] <= d["nic_requests"] == sum(1 for r in trace.requests if r.wants_nics)
    assert 0 <= d["nics_used"] <= d["nics_total"] and d["nic_vfs_used"] >= 0
    assert list(d["gpu_nic_levels"]) == ["PIX", "PXB", "PHB", "NODE", "SYS", "unknown"]
    assert 0 <= d["gpu_nic_worse"] <= sum(d["gpu_nic_levels"].values())
    assert 0 <= d["partition_placed"] <= d["partition_requests"] == sum(1 for r in trace.requests if r.partition)
    assert d["gpus_whole"] == d["gpus_used"] and d["gpus_whole"] + d["gpus_partitioned"] <= d["gpus_total"]
    assert 0 <= d["gpus_stranded"] <= d["gpus_partitioned"]
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
            assert entry["cells"] == [] and entry["gpus"] == [] and entry["nics"] == []
            continue
        if request.nics_per_gpu:
            assert len(entry["nics"]) == request.gpus
        else:
            assert len(entry["nics"]) == request.nics
        assert len(entry["gpus"]) == request.gpus
        assert sum(len(c["pcpus"]) for c in entry["cells"]) == request.vcpus
        assert sum(c["memory_mib"] for c in entry["cells"]) * 1024 == request.memory_kib
        if request.numa_nodes is not None:
            assert len(entry["cells"]) == request.numa_nodes
        if request.page_size_kib is not None:
            assert {c["page_size_kib"] for c in entry["cells"]} == {request.page_size_kib}
        cold = [request.cold_memory_kib // 1024] if request.cold_memory_kib // 1024 else []
        assert [c["memory_mib"] for c in entry["cold"]] == cold
        ask = request.partition
        assert [(x["kind"], x["name"]) for x in entry["partitions"]] == (
            [(ask.kind.value, ask.name)] * ask.count if ask else []
        )
    assert sum(c["memory_mib"] for e in entries for c in e["cold"]) == d["cold_memory_mib"]
    assert sum(1 for e in entries if e["partitions"]) == d["partition_placed"]
    assert sum(1 for e in entries if e["cold"]) == d["cold_placed"]


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


def test_a_trace_without_the_cold_keys_and_hmat_reads_as_before() -> None:
    # _request() and _cell() are the version-1 keys only: what every older trace holds.
    trace = load_trace(_trace(), "t.json")
    (req,) = trace.requests
    assert (req.cold_memory_kib, req.cold_tier) == (0, ColdTier.ANY)
    assert trace.hosts[0].hmat.empty
    assert req.cold_memory_kib == 0
    old = TRACES / "big-16cell.json"
    assert all(r.cold_memory_kib == 0 for r in load_trace(old.read_bytes(), str(old)).requests)


def test_cold_keys_and_hmat_are_read() -> None:
    hmat = {"latency_ns": {"0": {"0": 90, "1": 250}}, "bandwidth_kib_s": {"0": {"0": 100, "1": 30}},
            "write_latency_ns": None, "ignored_initiators": ["0x0000000f"]}
    cxl = _cell(id=1, cpus=[], siblings=[], gpus=[], nics=[], distances={"0": 14, "1": 10})
    hosts = [{"name": "h", "cells": [_cell(distances={"0": 10, "1": 14}), cxl], "hmat": hmat}]
    trace = load_trace(_trace(hosts, [_request(cold_memory_mib=2048, cold_tier="cxl")]), "t.json")
    (host,) = trace.hosts
    assert host.hmat.latency_ns == ((0, 0, 90), (0, 1, 250)) and host.hmat.bandwidth_kib_s == ((0, 0, 100), (0, 1, 30))
    assert host.hmat.ignored == ("0x0000000f",) and host.hmat.write_latency_ns == ()
    assert [c.memory_only for c in host.cells] == [False, True]
    (req,) = trace.requests
    assert (req.cold_memory_kib // 1024, req.cold_tier) == (2048, ColdTier.CXL)
    vm = req
    assert (vm.cold_memory_kib, vm.cold_tier) == (2048 * 1024, ColdTier.CXL)
    assert load_trace(_trace(hosts=[{"name": "h", "cells": [_cell()], "hmat": None}]), "t.json").hosts[0].hmat.empty


def test_an_hmat_initiator_without_cpus_is_read_and_rates_no_cell() -> None:
    # A Generic Initiator (cell 1, no CPUs) rating both cells far above the CPU cell: kept, ranking nothing.
    gi = _cell(id=1, cpus=[], siblings=[], gpus=[], nics=[], distances={"0": 14, "1": 10})
    hmat = {"bandwidth_kib_s": {"0": {"0": 100, "1": 30}, "1": {"0": 5000, "1": 9000}}}
    trace = load_trace(_trace([{"name": "h", "cells": [_cell(distances={"0": 10, "1": 14}), gi], "hmat": hmat}]),
                       "t.json")
    (host,) = trace.hosts
    assert host.hmat.bandwidth_kib_s == ((0, 0, 100), (0, 1, 30), (1, 0, 5000), (1, 1, 9000))
    assert cell_kinds(host) == {0: "dram", 1: "cxl"}  # rated from the CPU cell only: below its DRAM
    assert cpu_cell_ratings(host) == {(0, 0): (100, UNRATED_LATENCY_NS)}


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
    ("bad-host-name", _trace(hosts=[{"name": "x$(id)", "cells": [_cell()]}]), "hosts[0].name: bad host name 'x$(id)'"),
    ("bad-request-name", _trace(requests=[_request(name="<vm>")]), "requests[0].name: bad VM name '<vm>'"),
    (
        "bad-tenant-name",
        _trace(requests=[_request(tenant="a b")]),
        "requests[0].tenant: bad tenant name 'a b': 1-63 characters",
    ),
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
    (
        "negative-cold-memory",
        _trace(requests=[_request(cold_memory_mib=-1)]),
        "requests[0].cold_memory_mib: must be 0 or more, got -1 (request 'vm-1')",
    ),
    (
        "string-cold-memory",
        _trace(requests=[_request(cold_memory_mib="4GiB")]),
        "requests[0].cold_memory_mib: expected an integer, got str (request 'vm-1')",
    ),
    (
        "float-cold-memory",
        _trace(requests=[_request(cold_memory_mib=1.5)]),
        "requests[0].cold_memory_mib: expected an integer, got float (request 'vm-1')",
    ),
    (
        "bool-cold-memory",
        _trace(requests=[_request(cold_memory_mib=True)]),
        "requests[0].cold_memory_mib: expected an integer, got bool (request 'vm-1')",
    ),
    (
        "null-cold-memory",
        _trace(requests=[_request(cold_memory_mib=None)]),
        "requests[0].cold_memory_mib: expected an integer, got null (request 'vm-1')",
    ),
    (
        "unknown-cold-tier",
        _trace(requests=[_request(cold_memory_mib=1024, cold_tier="hbm")]),
        "requests[0].cold_tier: expected one of any, cxl, got 'hbm' (request 'vm-1')",
    ),
    (
        "cold-tier-not-a-string",
        _trace(requests=[_request(cold_memory_mib=1024, cold_tier=1)]),
        "requests[0].cold_tier: expected a string, got int (request 'vm-1')",
    ),
    (
        "hmat-not-an-object",
        _trace(hosts=[{"name": "h", "cells": [_cell()], "hmat": []}]),
        "hosts[0].hmat: expected an object, got list",
    ),
    (
        "hmat-value-not-an-int",
        _trace(hosts=[{"name": "h", "cells": [_cell()], "hmat": {"latency_ns": {"0": {"0": "90"}}}}]),
        "hosts[0].hmat.latency_ns.0.0: expected an integer of 1 or more, got '90'",
    ),
    (
        "hmat-bad-cell-id",
        _trace(hosts=[{"name": "h", "cells": [_cell()], "hmat": {"latency_ns": {"zero": {"0": 90}}}}]),
        "hosts[0].hmat.latency_ns.zero: initiator cell ids must be decimal strings",
    ),
    (
        "hmat-missing-target",
        _trace(hosts=[{"name": "h", "cells": [_cell()], "hmat": {"bandwidth_kib_s": {"0": {"7": 10}}}}]),
        "hosts[0]: host 'h': hmat bandwidth_kib_s initiator 0 target 7: there is no cell 7",
    ),
]


@pytest.mark.parametrize(("data", "fragment"), [c[1:] for c in BAD_TRACES], ids=[c[0] for c in BAD_TRACES])
def test_bad_traces_name_the_file_and_key(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        load_trace(data, "bad.json")
    assert str(err.value).startswith("bad.json")
    assert fragment in str(err.value)
