"""Workload-trace simulation: place a trace's request stream on an in-memory fleet.

Pure apart from the clock (``time.perf_counter`` for decision timings):
reads nothing from disk itself. ``load_trace`` parses and validates the
trace JSON (format in ``docs/traces.md``), ``run`` places the
requests in arrival order with the same engine as ``vnuma place`` (fast
path), and ``report_to_dict`` / ``placements_to_list`` give the JSON shapes
of ``vnuma simulate --json`` and ``--placements FILE``.

Mapping: each trace request is one VM of tenant ``tenant``, asking what its
keys ask (:mod:`vnuma.sources.tracerequests`: ``numa_nodes`` null means
auto, ``page_size_kib`` null means large, an option left out its default),
completed by its tenant as ``vnuma place`` completes a request
(:func:`vnuma.placement.kept.for_tenant`); every tenant new to the fleet
gets the isolation passed to :func:`run`. ``rejections_by_reason`` counts refused requests by
the check (``cell-cpus``, ``cell-pages``, ``gpus``, ...) of their decisive
rejection; a request invalid only against the fleet (:data:`INVALID`) is one of them, its reason in
``invalid_requests``. ``pcpus_used`` counts pCPUs held by placed VMs, siblings kept
empty by ``isolate`` included. A multi-node VM is non-adjacent when some
pair of its host cells is farther apart than the host's closest pair of
distinct CPU cells. ``cold_requests`` counts the requests asking for a cold
tier, ``cold_placed`` those placed (each with its cold cell) and
``cold_memory_mib`` the cold memory they hold. ``nic_requests`` counts the
requests asking for NICs, ``nic_placed`` those placed; ``nics_used`` the
physical NICs the placed VMs use (passed through whole, or through one of
their virtual functions; ``nic_vfs_used`` the VFs) of ``nics_total``;
``gpu_nic_levels`` the PCIe level of each GPU–NIC pair of the placed VMs
holding NICs (:func:`vnuma.placement.nics.nic_pairs`, the rule ``stats``
reads: a pair per GPU for a NIC per GPU, a pair per NIC with its nearest GPU
for a count), ``gpu_nic_worse`` how many pairs are worse than asked.
``partition_requests`` counts the requests asking vGPU or MIG partitions,
``partition_placed`` those placed; at the end ``gpus_whole`` GPUs are passed
through whole, ``gpus_partitioned`` hold partitions and ``gpus_stranded`` of
those are MIG GPUs whose free slices fit no profile.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from vnuma.errors import ConflictError, GroupModeError, InvalidInputError, NotFoundError
from vnuma.placement.engine import place
from vnuma.placement.kept import for_tenant
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.memory import RefusalMemory
from vnuma.placement.model import Isolation, Placement, Tenant, VmRequest
from vnuma.placement.nics import NicPair, nic_pairs
from vnuma.placement.objectives import Strategy
from vnuma.placement.partitions import stranded
from vnuma.sources.trace import Trace, load_trace
from vnuma.topology import KIB_PER_MIB, DeviceKind, Host
from vnuma.topology.pcie import Level

__all__ = [
    "INVALID",
    "LEVEL_KEYS",
    "Base",
    "SimulationReport",
    "Trace",
    "level_histogram",
    "load_trace",
    "placements_to_list",
    "report_to_dict",
    "run",
    "trace_hosts",
]


@dataclass(frozen=True, slots=True)
class SimulationReport:
    """What one run did: per-request outcomes (in trace order) and the totals."""

    scenario: str
    requests: tuple[VmRequest, ...]
    placements: tuple[Placement | None, ...]
    rejection_checks: tuple[str | None, ...]
    decision_us: tuple[float, ...]
    wall_s: float
    pcpus_used: int
    pcpus_total: int
    gpus_used: int
    gpus_total: int
    multi_node: int
    multi_node_non_adjacent: int
    cold_requests: int = 0
    """Requests asking for a cold tier (``cold_memory_mib`` > 0)."""
    cold_placed: int = 0
    """Of them, those placed (each with its cold guest cell on a memory-only cell)."""
    cold_memory_mib: int = 0
    """Cold memory the placed VMs hold, MiB."""
    nic_requests: int = 0
    """Requests asking for NICs (a count or one per GPU)."""
    nic_placed: int = 0
    """Of them, those placed (each with its NICs)."""
    nics_used: int = 0
    """Physical NICs the placed VMs use: passed through whole, or through a virtual function of theirs."""
    nic_vfs_used: int = 0
    """Virtual functions the placed VMs hold."""
    nics_total: int = 0
    """Physical NICs (not VFs) on the fleet's hosts."""
    gpu_nic_pairs: tuple[NicPair, ...] = ()
    """The GPU–NIC pairs of the placed VMs holding NICs and their levels (:func:`nic_pairs`), in trace order."""
    gpu_nic_worse: int = 0
    """Pairs of the VMs that asked a NIC per GPU whose level is worse than asked (a count of NICs promises
    each NIC near some GPU, not each GPU a NIC: their pairs are not judged)."""
    partition_requests: int = 0
    """Requests asking GPU partitions (``vgpu`` or ``mig``)."""
    partition_placed: int = 0
    """Of them, those placed (each with its partitions)."""
    gpus_partitioned: int = 0
    """GPUs holding partitions at the end."""
    gpus_stranded: int = 0
    """Of them, MIG GPUs whose free slices fit no profile (:func:`vnuma.placement.partitions.stranded`)."""
    invalid: tuple[tuple[int, str], ...] = ()
    """The requests invalid on this fleet (rejected by :data:`INVALID`): index in the trace, and why."""


INVALID = "invalid"
"""The check of a request invalid only against the fleet it is replayed on: more GPUs than it has, a MIG profile
or vGPU type none of its GPUs offers (for an alternative too), a ``host`` it lacks, affinity of a group its VMs
hold with anti-affinity (or the reverse). Counted as a refusal, the
replay goes on; :attr:`SimulationReport.invalid` keeps each one's reason."""


LEVEL_KEYS = (*(level.value for level in Level), "unknown")
"""The keys of ``gpu_nic_levels``, best first; ``unknown``: the facts cannot tell the level."""


def trace_hosts(trace: Trace) -> list[Host]:
    """The trace's hosts as topology ``Host`` objects (source ``trace``)."""
    return list(trace.hosts)


@dataclass(frozen=True, slots=True)
class Base:
    """A fleet to replay a trace on instead of the trace's own hosts: hosts, the VMs they hold, tenants."""

    hosts: tuple[Host, ...]
    placements: tuple[Placement, ...]
    tenants: tuple[Tenant, ...]


PROGRESS_EVERY = 256


def run(
    trace: Trace, strategy: Strategy = Strategy.PACK, isolation: Isolation = Isolation.CORE,
    base: Base | None = None, progress: Callable[[int], None] | None = None,
) -> SimulationReport:
    """Place every request of ``trace`` in arrival order and report.

    ``progress`` is told how many more requests were decided, every
    :data:`PROGRESS_EVERY` requests and at the end (between decisions, outside their timings).

    ``base``: replay on those hosts with their VMs already placed (``simulate --from-inventory``); the trace's
    hosts are ignored, a trace tenant that is one of ``base``'s keeps its own isolation and quotas (a request
    over a quota is refused with check ``quota``), the others get ``isolation``.

    A request invalid only against the fleet (:data:`INVALID`) is a refusal, with its reason: a trace replays
    to the end.

    Raises:
        InvalidInputError: a trace VM name that is also one of ``base``'s VMs.
    """
    if base is None:
        fleet = Fleet(trace.hosts, (), {r.tenant: isolation for r in trace.requests})
    else:
        taken = {p.vm for p in base.placements} & {r.name for r in trace.requests}
        if taken:
            raise InvalidInputError(
                f"trace VM name {sorted(taken)[0]!r} is also a VM of the inventory",
                hint="rename the trace's requests (names are unique in the fleet they are placed on)",
            )
        known = {t.name for t in base.tenants}
        newcomers = {r.tenant: Tenant(r.tenant, isolation) for r in trace.requests if r.tenant not in known}
        fleet = Fleet(base.hosts, base.placements, (*base.tenants, *newcomers.values()))
    memory = RefusalMemory()
    requests = [for_tenant(r, fleet.tenant(r.tenant)) for r in trace.requests]
    placements: list[Placement | None] = []
    checks: list[str | None] = []
    timings: list[float] = []
    invalid: list[tuple[int, str]] = []
    clock = time.perf_counter
    # The loop makes no reference cycles worth collecting, but a full collection walks
    # the whole fleet (hundreds of thousands of objects): ~100 ms pauses would land in
    # random decisions' timings. Collection is switched off for the loop only.
    collecting = gc.isenabled()
    gc.disable()
    try:
        start = clock()
        for done, request in enumerate(requests):
            if progress is not None and done and done % PROGRESS_EVERY == 0:
                progress(PROGRESS_EVERY)
            t0 = clock()
            try:
                result = place(request, fleet, strategy, explain=False, memory=memory)
            except (ConflictError, GroupModeError, InvalidInputError, NotFoundError) as err:
                # A tenant's quota (an inventory tenant's, with --from-inventory), or a request invalid only
                # against this fleet (the trace reader refused those invalid by their own numbers).
                timings.append((clock() - t0) * 1e6)
                placements.append(None)
                checks.append("quota" if isinstance(err, ConflictError) else INVALID)
                if not isinstance(err, ConflictError):
                    invalid.append((done, str(err)))
                continue
            timings.append((clock() - t0) * 1e6)
            placements.append(result.chosen)
            if result.chosen is not None:
                # place() asked admission about exactly this ledger: record it as it is.
                fleet.record(result.chosen)
                checks.append(None)
            else:
                checks.append(result.rejections[0].check if result.rejections else "no-hosts")
        wall = clock() - start
        if progress is not None and requests:
            progress(len(requests) - (len(requests) - 1) // PROGRESS_EVERY * PROGRESS_EVERY)
    finally:
        if collecting:
            gc.enable()
    hosts = trace.hosts if base is None else base.hosts
    report = _report(trace, hosts, fleet, tuple(placements), tuple(checks), tuple(timings), wall)
    return replace(report, invalid=tuple(invalid))


def _report(
    trace: Trace,
    hosts: tuple[Host, ...],
    fleet: Fleet,
    placements: tuple[Placement | None, ...],
    checks: tuple[str | None, ...],
    timings: tuple[float, ...],
    wall: float,
) -> SimulationReport:
    placed = [p for p in placements if p is not None]
    by_name = {h.name: h for h in hosts}
    nic_pfs: set[tuple[str, str]] = set()
    vfs_used = 0
    for p in placed:
        for d in p.devices:
            if d.kind is not DeviceKind.NIC:
                continue
            dev = fleet.state(p.host).shape.device_at.get(d.address)
            pf = None if dev is None else dev.pf
            vfs_used += pf is not None
            nic_pfs.add((p.host, pf or d.address))
    pairs = [(p, pair) for p in placed if p.host in by_name for pair in nic_pairs(p, by_name[p.host])]
    multi = [p for p in placed if len(p.cells) > 1]
    non_adjacent = sum(1 for p in multi if not fleet.state(p.host).is_adjacent(p.host_cells))
    return SimulationReport(
        scenario=trace.scenario,
        requests=trace.requests,
        placements=placements,
        rejection_checks=checks,
        decision_us=timings,
        wall_s=wall,
        pcpus_used=sum(len(fleet.held_pcpus(p)) for p in placed),
        pcpus_total=_per_shape(fleet, lambda h: len(h.cpu_ids - h.reserved_cpus)),
        gpus_used=sum(1 for p in placed for d in p.devices if d.kind == "gpu"),
        gpus_total=fleet.gpus_total,
        multi_node=len(multi),
        multi_node_non_adjacent=non_adjacent,
        cold_requests=sum(1 for r in trace.requests if r.cold_memory_kib),
        cold_placed=sum(1 for p in placed if p.cold),
        cold_memory_mib=sum(p.cold_kib for p in placed) // KIB_PER_MIB,
        nic_requests=sum(1 for r in trace.requests if r.wants_nics),
        nic_placed=sum(1 for r, p in zip(trace.requests, placements, strict=True) if p is not None and r.wants_nics),
        nics_used=len(nic_pfs),
        nic_vfs_used=vfs_used,
        nics_total=_per_shape(fleet, lambda h: sum(1 for d in h.devices if d.kind is DeviceKind.NIC and d.pf is None)),
        gpu_nic_pairs=tuple(pair for _, pair in pairs),
        gpu_nic_worse=sum(1 for _p, pair in pairs if pair.worse),
        partition_requests=sum(1 for r in trace.requests if r.partition is not None),
        partition_placed=sum(1 for p in placed if p.partitions),
        gpus_partitioned=sum(len(hs.partitions) for hs in fleet.states),
        gpus_stranded=sum(1 for hs in fleet.states for gpu in hs.partitions if stranded(hs, gpu)),
    )


def _per_shape(fleet: Fleet, count: Callable[[Host], int]) -> int:
    """The sum of ``count`` over the fleet's hosts, counted once per hardware shape (it reads only what hosts of
    one shape share: CPUs, reserved CPUs, devices)."""
    hosts = Counter(id(hs.shape) for hs in fleet.states)
    shapes = {id(hs.shape): hs.shape for hs in fleet.states}
    return sum(count(shapes[key].host) * n for key, n in hosts.items())


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def report_to_dict(report: SimulationReport) -> dict[str, Any]:
    """The ``vnuma simulate --json`` object."""
    times = sorted(report.decision_us)
    placed = sum(1 for p in report.placements if p is not None)
    reasons = Counter(c for c in report.rejection_checks if c is not None)
    return {
        "scenario": report.scenario,
        "requests": len(report.requests),
        "placed": placed,
        "rejected": len(report.requests) - placed,
        "rejections_by_reason": dict(sorted(reasons.items())),
        "invalid_requests": [{"name": report.requests[i].name, "reason": why} for i, why in report.invalid],
        "pcpus_used": report.pcpus_used,
        "pcpus_total": report.pcpus_total,
        "gpus_used": report.gpus_used,
        "gpus_total": report.gpus_total,
        "multi_node": report.multi_node,
        "multi_node_non_adjacent": report.multi_node_non_adjacent,
        "cold_requests": report.cold_requests,
        "cold_placed": report.cold_placed,
        "cold_memory_mib": report.cold_memory_mib,
        "nic_requests": report.nic_requests,
        "nic_placed": report.nic_placed,
        "nics_used": report.nics_used,
        "nic_vfs_used": report.nic_vfs_used,
        "nics_total": report.nics_total,
        "gpu_nic_levels": level_histogram(report.gpu_nic_pairs),
        "gpu_nic_worse": report.gpu_nic_worse,
        "partition_requests": report.partition_requests,
        "partition_placed": report.partition_placed,
        "gpus_whole": report.gpus_used,
        "gpus_partitioned": report.gpus_partitioned,
        "gpus_stranded": report.gpus_stranded,
        **_alternatives(report),
        "decision_us": {
            "mean": statistics.fmean(times) if times else 0.0,
            "p50": _percentile(times, 0.50),
            "p99": _percentile(times, 0.99),
            "max": times[-1] if times else 0.0,
        },
        "wall_s": report.wall_s,
        "requests_per_s": len(report.requests) / report.wall_s if report.wall_s > 0 else 0.0,
    }


def _alternatives(report: SimulationReport) -> dict[str, Any]:
    """``alternative_requests``: the requests listing alternatives; ``placed_by_alternative``: how many of them
    were placed under each alternative (``"0"``: as asked)."""
    listing = [p for r, p in zip(report.requests, report.placements, strict=True) if r.alternatives]
    got = Counter(str(p.alternative) for p in listing if p is not None)
    return {"alternative_requests": len(listing), "placed_by_alternative": dict(sorted(got.items()))}


def level_histogram(pairs: tuple[NicPair, ...]) -> dict[str, int]:
    """How many GPU–NIC pairs reach each level (every key of :data:`LEVEL_KEYS`, 0 included)."""
    counts = Counter("unknown" if pair.level is None else pair.level.value for pair in pairs)
    return {key: counts[key] for key in LEVEL_KEYS}


def placements_to_list(report: SimulationReport) -> list[dict[str, Any]]:
    """One entry per request, in trace order, for ``--placements FILE``."""
    out: list[dict[str, Any]] = []
    for request, p in zip(report.requests, report.placements, strict=True):
        out.append(
            {
                "name": request.name,
                "host": p.host if p else None,
                "alternative": p.alternative if p else None,
                "cells": [
                    {
                        "host_cell": c.host_cell,
                        "pcpus": list(c.pcpus),
                        "memory_mib": c.memory_kib // KIB_PER_MIB,
                        "page_size_kib": c.page_size_kib,
                    }
                    for c in (p.cells if p else ())
                ],
                "gpus": [d.address for d in (p.devices if p else ()) if d.kind == "gpu"],
                "nics": [d.address for d in (p.devices if p else ()) if d.kind == "nic"],
                "cold": [
                    {
                        "host_cell": c.host_cell,
                        "memory_mib": c.memory_kib // KIB_PER_MIB,
                        "page_size_kib": c.page_size_kib,
                    }
                    for c in (p.cold if p else ())
                ],
                "partitions": [
                    {"kind": a.kind.value, "gpu": a.gpu, "vf": a.vf, "name": a.name, "start": a.start}
                    for a in (p.partitions if p else ())
                ],
            }
        )
    return out
