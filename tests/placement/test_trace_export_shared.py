"""``trace export`` of a large fleet: hosts without VMs share their shape's document but for the name."""

from __future__ import annotations

from pathlib import Path

from vnuma.codec.traces import trace_document
from vnuma.placement.model import Tenant
from vnuma.simulate import load_trace, run

TRACE = Path(__file__).parents[2] / "examples" / "traces" / "dgx-nics.json"


def test_hosts_without_vms_share_one_document_and_each_reads_as_exported_alone() -> None:
    trace = load_trace(TRACE.read_bytes(), str(TRACE))
    placed = [p for p in run(trace).placements[:20] if p is not None]
    tenants = [Tenant(t) for t in sorted({p.tenant for p in placed if p.tenant})]
    assert len({p.host for p in placed}) < len(trace.hosts)  # some hosts hold no VM
    for with_vms in (False, True):
        doc = trace_document(trace.hosts, placed, tenants, with_vms=with_vms)
        by_name = {h.name: h for h in trace.hosts}
        for written in doc["hosts"]:
            host = by_name[written["name"]]
            mine = [p for p in placed if p.host == host.name]
            (alone,) = trace_document([host], mine, tenants, with_vms=with_vms)["hosts"]
            assert written == alone
        empty = [h for h in doc["hosts"] if with_vms or h["name"] not in {p.host for p in placed}]
        assert len(empty) > 1 and all(h["cells"] is empty[0]["cells"] for h in empty)
