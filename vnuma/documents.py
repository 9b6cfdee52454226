"""The JSON documents of the commands: one builder each, shared by the CLI's ``--json`` and the HTTP API.

A document is the contract scripts rely on (the manual's ``docs/json.md``):
keys are only added, never renamed. The CLI prints these documents and the
API (:mod:`vnuma.api`) answers with them, so both say the same thing about
the same state by construction. Builders take what the services return;
they read nothing themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vnuma.codec import placement_to_dict
from vnuma.placement.objectives import Objective

if TYPE_CHECKING:
    from vnuma.placement.model import Placement, VmRequest
    from vnuma.placement.rebalance import Plan
    from vnuma.placement.result import PlacementResult, Rejection, Unfit
    from vnuma.services.bandwidth import BandwidthReport
    from vnuma.services.capacity import CapacityReport
    from vnuma.services.stats import StatsReport


def vm_doc(p: Placement, state: str) -> dict[str, Any]:
    """A VM (``vm show --json``, each row of ``vm list --json``): its placement and ``state``."""
    return {**placement_to_dict(p), "state": state}


def released_doc(p: Placement, state: str) -> dict[str, Any]:
    """``vm release --json``: the VM as it was, with ``"released": true``."""
    return {**vm_doc(p, state), "released": True}


def rejections_doc(rejections: tuple[Rejection, ...]) -> list[dict[str, Any]]:
    """Every host's rejection of a request: ``[{"host", "check", "reason", "hint", "gist", "missing"}]`` in fleet
    order (``gist``: the reason in words that hold for every host refused for the same cause; ``missing``: the
    units the host lacks, or null: :mod:`vnuma.placement.refusal`)."""
    from vnuma.placement.refusal import gist

    return [
        {"host": r.host, "check": r.check, "reason": r.reason, "hint": r.hint, "gist": gist(r), "missing": r.missing}
        for r in rejections
    ]


def refusal_doc(rejections: tuple[Rejection, ...]) -> dict[str, Any]:
    """Why no host takes a VM, as its one line counts it (:func:`vnuma.placement.refusal.summarize`): the
    causes, most hosts first (``[{"check", "gist", "hosts", "closest_host"}]``), the host that came closest
    (null: no hosts), and every host's rejection (:func:`rejections_doc`)."""
    from vnuma.placement.refusal import summarize

    refusal = summarize(rejections)
    return {
        "causes": [
            {"check": c.check, "gist": c.gist, "hosts": c.hosts, "closest_host": c.example.host}
            for c in refusal.causes
        ],
        "closest": None if refusal.closest is None else refusal.closest.host,
        "rejections": rejections_doc(rejections),
    }


def no_fit_doc(request: VmRequest, result: PlacementResult) -> dict[str, Any]:
    """``place --json`` when no host takes the VM: the error line and hint (what stderr says), then
    :func:`refusal_doc`."""
    from vnuma.services.placing import place_refusal

    err = place_refusal(request.name, result)
    return {"error": str(err), "hint": err.hint, **refusal_doc(result.rejections), **unfit_doc(result)}


def explain_doc(result: PlacementResult) -> dict[str, Any]:
    """What ``place --explain`` shows: each fitting host's score, each other host's rejection, and the
    criterion that chose the cells (``cells_decided_by``; null when nothing was placed)."""
    return {
        "scores": [{"host": host, "score": score} for host, score in result.scores],
        "rejections": rejections_doc(result.rejections),
        "cells_decided_by": result.cells_decided_by,
        **unfit_doc(result),
    }


def unfit_doc(result: PlacementResult) -> dict[str, Any]:
    """A request with alternatives: each alternative tried that fits on no host, ``{"alternatives": [{"alternative":
    N, "asked": "mig=3g.40gb:2", "refused": null|TEXT, "rejections": [...]}]}`` (``asked`` of alternative 0: ``as
    asked``; ``refused``: the one refusal that kept it off every host, a tenant's quota); empty otherwise."""
    return unfit_list(result.unfit)


def unfit_list(unfit: tuple[Unfit, ...]) -> dict[str, Any]:
    """:func:`unfit_doc` of the alternatives tried (a refusal's, :attr:`vnuma.errors.NoPlacementError.unfit`)."""
    if not unfit:
        return {}
    return {"alternatives": [
        {"alternative": u.index, "asked": u.text, "refused": u.refused, "rejections": rejections_doc(u.rejections)}
        for u in unfit
    ]}


def _shape(s: Any) -> dict[str, int] | None:
    if s is None:
        return None
    return {"vcpus": s.vcpus, "memory_kib": s.memory_kib, "page_size_kib": s.page_size_kib, "gpus": s.gpus}


def _mb_s(bps: int) -> float:
    return round(bps / 1e6, 1)


def bandwidth_doc(report: BandwidthReport) -> dict[str, Any]:
    """The ``stats --bandwidth --json`` document (MB/s are 10^6 bytes per second)."""
    return {
        "taken_at": report.taken_at,
        "interval_s": report.interval_s,
        "vms": [
            {
                "vm": v.vm, "tenant": v.tenant, "host": v.host,
                "local_mb_s": _mb_s(v.local_bps), "total_mb_s": _mb_s(v.total_bps),
                "local": round(min(v.local_bps, v.total_bps) / v.total_bps, 3) if v.total_bps else None,
                "domains": [
                    {"domain": d.domain, "local_mb_s": _mb_s(d.local_bps), "total_mb_s": _mb_s(d.total_bps),
                     "noisy": d.domain in v.noisy}
                    for d in v.domains
                ],
                "llc": [{"cache": c, "bytes": size} for c, size in v.llc],
                "noisy": bool(v.noisy),
            }
            for v in report.vms
        ],
        "domains": [
            {
                "host": d.host, "domain": d.domain, "total_mb_s": _mb_s(d.total_bps), "llc_bytes": d.llc_bytes,
                "vms": d.vms, "top": [{"vm": vm, "total_mb_s": _mb_s(bps)} for vm, bps in d.top],
            }
            for d in report.domains
        ],
        "warnings": list(report.warnings),
    }


def stats_doc(report: StatsReport) -> dict[str, Any]:
    """The ``stats --json`` document."""
    hosts = [
        {
            "host": h.host,
            "cells": [
                {
                    "cell": c.cell,
                    "pcpus": {
                        "total": c.pcpus_total,
                        "claimed": c.pcpus_claimed,
                        "free": c.pcpus_free,
                        "reserved": c.pcpus_reserved,
                    },
                    "pages": [
                        {"size_kib": p.size_kib, "total": p.total, "claimed": p.claimed, "free": p.free}
                        for p in c.pools
                    ],
                    "gpus": {"total": c.gpus_total, "free": c.gpus_free, "tainted": c.gpus_tainted,
                             "cleaning": c.gpus_cleaning, "idle_blocked": c.gpus_idle_blocked},
                    "largest_free": _shape(c.largest_free),
                }
                for c in h.cells
            ],
            "fragmentation": [{"cells": k, "largest": _shape(s)} for k, s in h.fragmentation],
        }
        for h in report.hosts
    ]
    vms = []
    for v in report.vms:
        loc, m, b = v.locality, v.measured, v.bandwidth
        vms.append(
            {
                "vm": loc.vm,
                "tenant": loc.tenant,
                "host": loc.host,
                "state": v.state,
                "cells": list(loc.cells),
                "vcpus_local": loc.vcpus_local,
                "memory_local": loc.memory_local,
                "devices_local": loc.devices_local,
                "nic_pairs": [
                    {"gpu": x.gpu, "nic": x.nic, "level": None if x.level is None else x.level.value,
                     "worse_than_asked": x.worse}
                    for x in loc.nic_pairs
                ],
                "measured": None
                if m is None
                else {"pid": m.pid, "node_kib": {str(n): k for n, k in m.node_kib}, "memory_local": m.local},
                "bandwidth": None
                if b is None
                else {"local_bytes": b.local_bytes, "total_bytes": b.total_bytes, "local": b.local},
            }
        )
    return {"hosts": hosts, "vms": vms, "warnings": list(report.warnings)}


def capacity_doc(report: CapacityReport) -> dict[str, Any]:
    """The ``capacity --json`` document."""
    return {
        "shapes": list(report.shapes),
        "fits": len(report.placements),
        "placements": [{"shape": s, "host": p.host, "cells": list(p.host_cells)} for s, p in report.placements],
        "stopped_by": [
            {"reason": s.example, "hosts": s.hosts, "check": s.check, "example_host": s.example_host,
             "gist": s.gist or s.example}
            for s in report.stopped_by
        ],
        "stopped": report.stopped,
    }


def run_doc(report: Any) -> dict[str, Any]:
    """The ``"run"`` part of a carried-out plan's document (``--apply``, ``--resume``, ``--abort``, repin,
    migrate): ``{"id", "status", "steps": [{"seq", "vm", "kind", "status", "error"}]}``, plus ``"notes"``
    when a step could not do something it did not fail for (mediated devices the driver cannot make)."""
    doc = {
        "id": report.run_id,
        "status": str(report.status),
        "steps": [
            {"seq": s.seq, "vm": s.vm, "kind": s.kind, "status": str(s.status), "error": s.error}
            for s in report.steps
        ],
    }
    return doc | ({"notes": list(report.notes)} if report.notes else {})


def plan_doc(plan: Plan) -> dict[str, Any]:
    """The ``rebalance --json`` document (a drain's adds ``"left": [{"vm", "reason"}]``)."""
    doc: dict[str, Any] = {
        "objective": str(plan.objective),
        "before": plan.before,
        "after": plan.after,
        "optimal": plan.optimal,
        "moves": [
            {
                "vm": m.vm,
                "from": {"host": m.from_host, "cells": list(m.from_cells)},
                "to": {"host": m.to_host, "cells": list(m.to_cells)},
                "reason": m.reason,
                "cost_kib": m.cost_kib,
            }
            for m in plan.moves
        ],
    }
    if plan.objective is Objective.DRAIN:  # a drain says which VMs stay
        doc["left"] = [{"vm": vm, "reason": reason} for vm, reason in plan.left]
    doc["solver"] = plan.solver
    doc["gap"] = plan.gap
    return doc


def verdict(optimal: bool, solver: str, gap: float | None) -> str:
    """The one thing a plan says about how good it is, from its ``optimal``, ``solver`` and ``gap`` (the JSON
    keys): the table header's words, never contradicting the JSON. ``optimal``: no plan does better (the
    objective's lowest value reached, every shallower depth searched, or CP-SAT's answer proven for its
    model); a CP-SAT plan at the lowest value may still have moves the solver did not prove fewest."""
    if solver != "cp-sat":
        return "optimal" if optimal else "best found within the limits"
    if optimal:
        return ("optimal, proven by CP-SAT for its model" if gap == 0.0
                else "optimal" + (f"; its moves within {gap:.2%} of CP-SAT's bound" if gap is not None else ""))
    if gap is None:
        return "best found within the limits; CP-SAT proved no bound for it"
    return f"best found within the limits, within {gap:.2%} of CP-SAT's bound"
