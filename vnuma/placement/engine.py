"""The placement engine: choose a host, cells, pCPUs, pages and GPUs for one VM.

Pure: no I/O, deterministic. ``place`` always returns a
:class:`PlacementResult`; "does not fit" is ``chosen=None`` plus rejections
with reasons an operator can act on, never an exception.

Choice: among hosts that fit, the smallest number of guest cells wins
(``numa_nodes`` auto), then an adjacent cell set over a non-adjacent one,
then the highest strategy score (:mod:`.scorers`), then the host name, then
the cell ids. Hosts are held in name order, so input order never matters.

Two paths give the same answer:

* explaining (``explain=True``, the default, used by ``vnuma place``): an
  exact fit on every host, so every rejected host carries its reason and
  every fitting host its score;
* fast (``explain=False``, used by ``vnuma simulate``): a vectorized
  pre-filter over the fleet arrays, then exact fits in score order until the
  first adjacent fit; the result keeps only the decisive rejection. Refused
  request shapes are remembered until capacity can grow again (a removal,
  an isolation change, or under ``gpu-first`` any GPU claim), because
  without those the fleet only fills and a refused shape stays refused.

Work, for H hosts of at most C CPU cells: the explaining path runs H exact
fits, each O(C) capacity look-ups plus the cell-set search of
:mod:`.cellsets` (O(C^2 log C), only when the cells' capacities allow a
set); the fast path runs O(1) vectorized passes over H x C arrays per
guest-cell count tried, then exact fits on the pre-filter's survivors in
score order, normally one. ``numa_nodes`` auto tries at most C counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar, cast

import numpy as np

from vnuma.placement.build import build_placement
from vnuma.placement.fit import STAGE, HostFit, fit_host
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import PlacementResult, Rejection, Strategy, VmRequest
from vnuma.placement.prefilter import may_fit, stages
from vnuma.placement.scorers import total_scores
from vnuma.placement.sizing import resolve_size, size_candidates
from vnuma.placement.validate import validate_request
from vnuma.topology import format_size_kib

__all__ = ["best_reason", "place", "validate_request"]

Key = tuple[int, int, int, str, tuple[int, ...]]
T = TypeVar("T")
MASKED = -(1 << 62)


def place(
    request: VmRequest, fleet: Fleet, strategy: Strategy = Strategy.PACK, *, explain: bool = True
) -> PlacementResult:
    """Place one VM on the fleet; claims nothing (add the chosen placement to the fleet for that).

    Raises:
        InvalidInputError: a malformed request (see :func:`validate_request`).
        NotFoundError: ``request.host`` is not in the fleet.
    """
    validate_request(request, fleet)
    if request.vcpus is None or request.memory_kib is None:
        return _place_sized(request, fleet, strategy)
    if explain or request.host is not None:
        return _place_explained(request, fleet, strategy)
    return _place_fast(request, fleet, strategy)


def best_reason(result: PlacementResult) -> str:
    """One line for stderr: the rejection of the host that came closest to fitting."""
    if result.chosen is not None:
        return ""
    if not result.rejections:
        return "the inventory has no hosts"
    best = max(result.rejections, key=lambda r: STAGE.get(r.check, -1))
    return f"{best.host}: {best.reason}"


def _key(fit: HostFit, score: int) -> Key:
    return (len(fit.cells), int(not fit.adjacent), -score, fit.state.name, fit.cells)


def _place_explained(request: VmRequest, fleet: Fleet, strategy: Strategy) -> PlacementResult:
    scores = total_scores(strategy, fleet.arrays.totals(), request)
    best: tuple[Key, HostFit] | None = None
    rejections: list[Rejection] = []
    fitting: list[tuple[str, int]] = []
    shared: dict[int, object] = {}
    for hs in fleet.states:
        if request.host is not None and hs.name != request.host:
            rejections.append(Rejection(hs.name, "host", f"not the requested host {request.host!r}"))
            continue
        found = _per_shape(hs, shared, lambda s: fit_host(s, request, strategy, fleet.isolation))
        if isinstance(found, Rejection):
            rejections.append(found)
            continue
        score = int(scores[hs.index])
        fitting.append((hs.name, score))
        if best is None or _key(found, score) < best[0]:
            best = (_key(found, score), found)
    chosen = build_placement(best[1], request) if best else None
    return PlacementResult(chosen, tuple(rejections), tuple(fitting))


def _place_sized(request: VmRequest, fleet: Fleet, strategy: Strategy) -> PlacementResult:
    best: tuple[Key, HostFit, VmRequest] | None = None
    rejections: list[Rejection] = []
    fitting: list[tuple[str, int]] = []
    shared: dict[int, object] = {}
    for hs in fleet.states:
        if request.host is not None and hs.name != request.host:
            rejections.append(Rejection(hs.name, "host", f"not the requested host {request.host!r}"))
            continue
        found = _per_shape(hs, shared, lambda s: _sized_fit(request, s, strategy, fleet))
        if isinstance(found, Rejection):
            rejections.append(found)
            continue
        fit, sized = found
        score = int(total_scores(strategy, fleet.arrays.totals(np.array([hs.index])), sized)[0])
        fitting.append((hs.name, score))
        if best is None or _key(fit, score) < best[0]:
            best = (_key(fit, score), fit, sized)
    chosen = build_placement(best[1], best[2]) if best else None
    return PlacementResult(chosen, tuple(rejections), tuple(fitting))


def _per_shape(hs: HostState, shared: dict[int, object], fit: Callable[[HostState], T]) -> T:
    """``fit(hs)``; for an unbuilt host computed once per shape, on the shape's template.

    An unbuilt host holds no claims, so it equals its shape's template but for its name:
    the template's answer, renamed, is the host's (and its per-cell state stays unbuilt).
    """
    if hs.built:
        return fit(hs)
    key = id(hs.shape)
    if key not in shared:
        shared[key] = fit(hs.shape.template)
    return cast(T, _rebind(shared[key], hs))


def _rebind(found: object, hs: HostState) -> object:
    if isinstance(found, Rejection):
        return replace(found, host=hs.name)
    if isinstance(found, HostFit):
        return replace(found, state=hs)
    if isinstance(found, tuple):
        return tuple(_rebind(x, hs) for x in found)
    return found  # a sized request: nothing host-specific in it


def _sized_fit(
    request: VmRequest, hs: HostState, strategy: Strategy, fleet: Fleet
) -> tuple[HostFit, VmRequest] | Rejection:
    """Size a GPU-only request from ``hs`` (page sizes largest first) and fit it there."""
    closest: Rejection | None = None
    for size in size_candidates(request, hs):
        resolved = resolve_size(request, hs, size)
        if isinstance(resolved, str):
            closest = _further(closest, Rejection(hs.name, "size", resolved))
            continue
        found = fit_host(hs, resolved, strategy, fleet.isolation)
        if isinstance(found, HostFit):
            return found, resolved
        closest = _further(closest, found)
    return closest or Rejection(hs.name, "size", "has no hugepages to size the VM's memory from")


def _further(old: Rejection | None, new: Rejection) -> Rejection:
    if old is None or STAGE.get(new.check, -1) > STAGE.get(old.check, -1):
        return new
    return old


def _auto_nodes(request: VmRequest, fleet: Fleet) -> list[int]:
    assert request.vcpus is not None and request.memory_kib is not None
    most = int(fleet.arrays.ncells.max(initial=0))
    return [n for n in range(1, most + 1) if request.vcpus % n == 0 and request.memory_kib % (4 * n) == 0]


def _sizes(request: VmRequest, n: int) -> tuple[int, ...]:
    assert request.memory_kib is not None
    if request.page_size_kib:
        return (request.page_size_kib,)
    return tuple(s for s in (1048576, 2048) if (request.memory_kib // n) % s == 0)


def _place_fast(request: VmRequest, fleet: Fleet, strategy: Strategy) -> PlacementResult:
    cached = _cached(request, fleet, strategy)
    if cached is not None:
        return PlacementResult(None, (cached,))
    nodes = [request.numa_nodes] if request.numa_nodes else _auto_nodes(request, fleet)
    closest: Rejection | None = None
    for n in nodes:
        hosts = np.flatnonzero(may_fit(fleet.arrays, request, n, _sizes(request, n), strategy))
        if not len(hosts):
            continue
        scores = total_scores(strategy, fleet.arrays.totals(), request)[hosts]
        found, closest = _first_fit(request, fleet, strategy, n, hosts, scores, closest)
        if found is not None:
            return found
    if closest is None and fleet.states:
        closest = _explain_refusal(request, fleet, strategy, nodes)
    if closest is None:
        return PlacementResult(None, ())
    _remember(request, fleet, strategy, closest)
    return PlacementResult(None, (closest,))


def _explain_refusal(request: VmRequest, fleet: Fleet, strategy: Strategy, nodes: list[int]) -> Rejection:
    """The exact rejection of the host the pre-filter saw come closest (no host passed it)."""
    best_host, best_stage = 0, -1
    for n in nodes:
        stage = stages(fleet.arrays, request, n, _sizes(request, n), strategy) * 4
        if strategy is Strategy.GPU_FIRST and request.gpus == 0:
            # A host held back only by the gpu-first reserve came closer than one short of pCPUs.
            stage += stages(fleet.arrays, request, n, _sizes(request, n), Strategy.PACK)
        top = int(stage.argmax())
        if int(stage[top]) > best_stage:
            best_host, best_stage = top, int(stage[top])
    found = fit_host(fleet.states[best_host], request, strategy, fleet.isolation)
    assert isinstance(found, Rejection), "pre-filter ruled out a host that fits"
    return found


def _first_fit(
    request: VmRequest,
    fleet: Fleet,
    strategy: Strategy,
    n: int,
    hosts: np.ndarray,
    scores: np.ndarray,
    closest: Rejection | None,
) -> tuple[PlacementResult | None, Rejection | None]:
    """Exact fits in (score, name) order; the first adjacent fit wins, else the first fit."""
    fallback: tuple[HostFit, int] | None = None
    ranked = scores.copy()
    for _ in range(len(hosts)):
        j = int(ranked.argmax())
        ranked[j] = MASKED
        found = fit_host(fleet.states[int(hosts[j])], request, strategy, fleet.isolation, n)
        if isinstance(found, Rejection):
            closest = _further(closest, found)
        elif found.adjacent:
            return _chosen(found, request, int(scores[j])), closest
        elif fallback is None:
            fallback = (found, int(scores[j]))
    if fallback is not None:
        return _chosen(fallback[0], request, fallback[1]), closest
    return None, closest


def _chosen(fit: HostFit, request: VmRequest, score: int) -> PlacementResult:
    return PlacementResult(build_placement(fit, request), (), ((fit.state.name, score),))


def _cache_key(request: VmRequest, fleet: Fleet, strategy: Strategy) -> object:
    # Under gpu-first a claimed GPU can let a refused VM in: a VM without GPUs sees a smaller
    # reserve, a GPU VM may no longer strand the GPU that is now taken.
    gpu_epoch = fleet.gpu_epoch if strategy is Strategy.GPU_FIRST else -1
    return (
        request.tenant,
        request.isolation,
        request.cpu_policy,
        request.thread_policy,
        request.numa_nodes,
        request.page_size_kib,
        request.gpu_affinity,
        request.emulator_threads,
        strategy,
        request.gpus > 0,
        gpu_epoch,
    )


def _cached(request: VmRequest, fleet: Fleet, strategy: Strategy) -> Rejection | None:
    if fleet.reject_cache_epoch != fleet.epoch:
        fleet.reject_cache.clear()
        fleet.reject_cache_epoch = fleet.epoch
        return None
    assert request.vcpus is not None and request.memory_kib is not None
    for vcpus, memory, gpus, rejection in fleet.reject_cache.get(_cache_key(request, fleet, strategy), ()):
        if (vcpus, memory, gpus) == (request.vcpus, request.memory_kib, request.gpus):
            return rejection
        if _bigger(request, vcpus, memory, gpus, strategy):
            smaller = f"{vcpus} vCPUs, {format_size_kib(memory)}, {gpus} GPUs"
            return Rejection(
                rejection.host,
                rejection.check,
                f"a smaller request of the same shape ({smaller}) was refused ({rejection.check}: "
                f"{rejection.reason}) and the fleet has only filled since",
            )
    return None


def _bigger(request: VmRequest, vcpus: int, memory: int, gpus: int, strategy: Strategy) -> bool:
    """Is ``request`` refused wherever a same-shape request of these sizes was?"""
    assert request.vcpus is not None and request.memory_kib is not None
    # Only with the node count and page size fixed: otherwise a bigger size may divide into
    # cells or pages that a smaller one did not. Under gpu-first more GPUs can strand fewer.
    if request.numa_nodes is None or request.page_size_kib is None:
        return False
    more_gpus = request.gpus == gpus if strategy is Strategy.GPU_FIRST else request.gpus >= gpus
    return request.vcpus >= vcpus and request.memory_kib >= memory and more_gpus


def _remember(request: VmRequest, fleet: Fleet, strategy: Strategy, rejection: Rejection) -> None:
    assert request.vcpus is not None and request.memory_kib is not None
    entry = (request.vcpus, request.memory_kib, request.gpus, rejection)
    fleet.reject_cache.setdefault(_cache_key(request, fleet, strategy), []).append(entry)
