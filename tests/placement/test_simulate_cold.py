"""Cold tiers in traces: ``snc-cxl-gpu`` simulated (cold cells on CXL memory-only cells, within their pools),
the trace's ``cold_tier`` reaching the engine, and ``trace export`` writing cold tiers, memory-only cells and
HMAT so that a replay places them again."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.placement.helpers import check_fleet
from vnuma.codec.traces import trace_document
from vnuma.placement.model import ColdTier, Isolation, Placement, Tenant
from vnuma.placement.objectives import Strategy
from vnuma.simulate import SimulationReport, load_trace, placements_to_list, report_to_dict, run
from vnuma.sources.trace import Trace
from vnuma.sources.tracegen import generate
from vnuma.topology import KIB_PER_MIB, Host
from vnuma.topology.tiers import cell_kinds

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "snc-cxl-gpu.json"


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load_trace(EXAMPLE.read_bytes(), str(EXAMPLE))


def _placed(report: SimulationReport) -> list[Placement]:
    return [p for p in report.placements if p is not None]


def _pool(host: Host, cell: int, size: int) -> int:
    return host.cell(cell).pages_of(size) or (host.cell(cell).memory_kib // size if size == 4 else 0)


def test_the_example_is_the_generators_output(trace: Trace) -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == generate("snc-cxl-gpu", 42)
    assert trace.scenario == "snc-cxl-gpu" and all(not h.hmat.empty for h in trace.hosts)


@pytest.mark.parametrize("strategy", list(Strategy), ids=[s.value for s in Strategy])
def test_cold_requests_land_on_cxl_memory_only_cells_within_their_pools(trace: Trace, strategy: Strategy) -> None:
    report = run(trace, strategy, Isolation.CORE)
    hosts = {h.name: h for h in trace.hosts}
    asked = {r.name: r for r in trace.requests}
    placed = _placed(report)
    cold = [p for p in placed if p.cold]
    by_tier = Counter(asked[p.vm].cold_tier for p in cold)
    assert by_tier[ColdTier.ANY] > 0 and by_tier[ColdTier.CXL] > 0
    taken: Counter[tuple[str, int, int]] = Counter()
    for p in placed:
        request = asked[p.vm]
        if not request.cold_memory_kib // 1024:
            assert p.cold == ()
            continue
        host = hosts[p.host]
        (cell,) = p.cold  # a placed cold request always has its cold cell
        assert p.cold_tier is request.cold_tier and cell.memory_kib == request.cold_memory_kib
        assert host.cell(cell.host_cell).memory_only and cell_kinds(host)[cell.host_cell] == "cxl"
        assert cell.vcpus == () and cell.pcpus == () and cell.guest_cell == len(p.cells)
        # The CXL expander of the VM's own socket when all its CPU cells are on one socket (HMAT rates it best).
        sockets = {c // 2 for c in p.host_cells}
        if len(sockets) == 1:
            assert cell.host_cell == 4 + sockets.pop()
        taken[(p.host, cell.host_cell, cell.page_size_kib)] += cell.memory_kib // cell.page_size_kib
    for (host, cell, size), pages in taken.items():
        assert pages <= _pool(hosts[host], cell, size), f"{host} cell {cell}: {size} KiB pages overdrawn"
    check_fleet(trace.hosts, placed, {})
    d = report_to_dict(report)
    assert d["cold_requests"] == sum(1 for r in trace.requests if r.cold_memory_kib) > d["cold_placed"] == len(cold)
    assert d["cold_memory_mib"] == sum(p.cold_kib for p in cold) // KIB_PER_MIB > 0
    # Too big for any CXL cell in one page size (480 GiB of 1 GiB pages, 32 GiB of 4 KiB): refused by cold-memory.
    assert d["rejections_by_reason"].get("cold-memory", 0) > 0
    entries = {e["name"]: e for e in placements_to_list(report)}
    for p in cold:
        assert entries[p.vm]["cold"] == [
            {"host_cell": p.cold[0].host_cell, "memory_mib": p.cold_kib // KIB_PER_MIB,
             "page_size_kib": p.cold[0].page_size_kib}
        ]


# --- a small fleet: one host whose memory-only cell HMAT rates as CXL, one whose cell nothing rates -----------


def _cell(cid: int, cpus: list[int], gib: int, distances: dict[str, int]) -> dict[str, Any]:
    return {
        "id": cid, "cpus": cpus, "siblings": [[c] for c in cpus], "memory_mib": gib * 1024,
        "hugepages": {"4": {"total": gib * 262144, "free": gib * 262144}}, "distances": distances, "gpus": [],
    }


def _host(name: str, *, hmat: bool) -> dict[str, Any]:
    host: dict[str, Any] = {"name": name, "cells": [
        _cell(0, [0, 1, 2, 3], 16, {"0": 10, "1": 21, "2": 14}),
        _cell(1, [4, 5, 6, 7], 16, {"0": 21, "1": 10, "2": 24}),
        _cell(2, [], 64, {"0": 14, "1": 24, "2": 10}),
    ]}
    if hmat:
        host["hmat"] = {
            "latency_ns": {"0": {"0": 90, "1": 140, "2": 250}, "1": {"0": 140, "1": 90, "2": 350}},
            "bandwidth_kib_s": {"0": {"0": 100 << 20, "1": 50 << 20, "2": 30 << 20},
                                "1": {"0": 50 << 20, "1": 100 << 20, "2": 15 << 20}},
        }
    return host


def _req(name: str, cold_gib: int, tier: str | None = None, vcpus: int = 2) -> dict[str, Any]:
    r: dict[str, Any] = {
        "tenant": "t", "name": name, "vcpus": vcpus, "memory_mib": 1024, "numa_nodes": 1, "cpu_policy": "dedicated",
        "thread_policy": "prefer", "page_size_kib": 4, "gpus": 0,
    }
    if cold_gib:
        r["cold_memory_mib"] = cold_gib * 1024
    if tier is not None:
        r["cold_tier"] = tier
    return r


def _doc(hosts: list[dict[str, Any]], requests: list[dict[str, Any]]) -> bytes:
    return json.dumps({"format": "numa-placement-trace", "version": 1, "scenario": "cold", "seed": None,
                       "description": "", "hosts": hosts, "requests": requests}).encode()


def test_a_cxl_tier_takes_only_a_cell_hmat_rates_as_cxl() -> None:
    hosts = [_host("a-unrated", hmat=False), _host("b-cxl", hmat=True)]
    requests = [_req("c1", 48, "cxl"), _req("c2", 32, "cxl"), _req("any", 32, "any"), _req("none", 0, "cxl")]
    trace = load_trace(_doc(hosts, requests), "cold.json")
    report = run(trace, Strategy.FIRST_FIT)
    c1, c2, anywhere, none = report.placements
    assert c1 is not None and c1.host == "b-cxl" and c1.cold[0].host_cell == 2 and c1.cold_tier is ColdTier.CXL
    assert c2 is None and report.rejection_checks[1] == "cold-memory"  # 16 GiB left on the only cxl cell
    assert anywhere is not None and anywhere.host == "a-unrated" and anywhere.cold_kib == 32 << 20
    assert none is not None and none.cold == () and none.cold_kib == 0  # a tier without memory asks nothing
    d = report_to_dict(report)
    assert (d["cold_requests"], d["cold_placed"], d["cold_memory_mib"]) == (3, 2, 80 * 1024)


# --- trace export --------------------------------------------------------------------------------------------


def _export(trace: Trace, placed: list[Placement], *, with_vms: bool) -> dict[str, Any]:
    tenants = [Tenant(t) for t in sorted({r.tenant for r in trace.requests})]
    doc = trace_document(list(trace.hosts), placed, tenants, with_vms=with_vms)
    return json.loads(json.dumps(doc))


def test_export_with_vms_then_replay_keeps_every_cold_tier(trace: Trace) -> None:
    placed = _placed(run(trace))
    doc = _export(trace, placed, with_vms=True)
    asked = {r.name: r for r in trace.requests}
    written = {r["name"]: r for r in doc["requests"]}
    assert written.keys() == {p.vm for p in placed}
    for p in placed:
        r = written[p.vm]
        if p.cold:
            assert (r["cold_memory_mib"], r.get("cold_tier", "any")) == (asked[p.vm].cold_memory_kib // 1024,
                                                                      str(p.cold_tier))
        else:  # as asked: a request whose cold memory found no room asked it all the same
            assert ("cold_memory_mib" in r) == bool(asked[p.vm].cold_memory_kib)
    assert all("hmat" in h for h in doc["hosts"])
    replayed = load_trace(json.dumps(doc).encode(), "export.json")
    assert [h.hmat for h in replayed.hosts] == [h.hmat for h in sorted(trace.hosts, key=lambda h: h.name)]
    report = run(replayed)
    again = {p.vm: p for p in _placed(report)}
    # Name order is not arrival order: where they land may differ (a few may not fit again), what they get not.
    assert sum(1 for p in again.values() if p.cold) > 0.8 * sum(1 for p in placed if p.cold)
    for vm, p in again.items():
        original = next(o for o in placed if o.vm == vm)
        assert (p.cold_kib, p.cold_tier) == (original.cold_kib, original.cold_tier)
        if p.cold:
            assert cell_kinds(next(h for h in replayed.hosts if h.name == p.host))[p.cold[0].host_cell] == "cxl"


def test_export_as_now_takes_cold_claims_off_memory_only_cells_and_empties_full_cpu_cells() -> None:
    trace = load_trace(_doc([_host("b-cxl", hmat=True)], [_req("big", 40, "cxl", vcpus=4)]), "cold.json")
    (p,) = _placed(run(trace))
    assert p.host_cells == (0,) and p.cold[0].host_cell == 2
    doc = _export(trace, [p], with_vms=False)
    (host,) = doc["hosts"]
    cell0, cell1, cxl = host["cells"]
    assert cxl["cpus"] == [] and cxl["hugepages"]["4"] == {"total": 64 * 262144, "free": 24 * 262144}
    # Cell 0's 4 CPUs are all the VM's: in the trace it has none and looks memory-only, so none of its pages is
    # free there (a replay's cold tier must not take a DRAM cell) and HMAT keeps no row from it.
    assert cell0["cpus"] == [] and cell0["hugepages"]["4"]["free"] == 0
    assert cell1["cpus"] == [4, 5, 6, 7] and cell1["hugepages"]["4"]["free"] == 16 * 262144
    assert set(host["hmat"]["latency_ns"]) == set(host["hmat"]["bandwidth_kib_s"]) == {"1"}
    assert "1 cell(s) with no free CPU written memory-only, no page free" in doc["description"]
    doc["requests"] = [_req("next", 24, "any"), _req("more", 1, "any")]
    replay = run(load_trace(json.dumps(doc).encode(), "export.json"))
    nxt, more = replay.placements
    assert nxt is not None and nxt.host_cells == (1,) and nxt.cold[0].host_cell == 2  # the 24 GiB left on the CXL cell
    assert more is None and replay.rejection_checks[1] == "cold-memory"  # not on the emptied cell 0
