"""The placement engine: choose a host, cells, pCPUs, pages and GPUs for one VM.

Pure: no I/O, deterministic, and it never changes the ledger it is given.
``place`` always returns a :class:`PlacementResult`; "does not fit" is
``chosen=None`` plus rejections with reasons an operator can act on, never
an exception (a malformed request or a quota it breaks raise, see below).

Steps: validate the request (:mod:`.request`) and its tenant's quotas
(:mod:`.quota`); per host, the filters (:mod:`.filters`, sizing first for a
GPU-only request); rank the hosts that fit (:func:`.order.host_key`); build
the best one's placement (:mod:`.build`) and ask admission
(:meth:`Fleet.admit`, the rule the inventory's claim applies too) before
choosing it. A placement admission refuses costs its host (a rejection
tagged with admission's check) and the next host is tried; the filters are
kept exact enough that this does not happen (a property test).

Two paths give the same answer:

* explaining (``explain=True``, the default; ``vnuma place --explain`` and
  every refusal): an exact fit on every host, so every rejected host
  carries its reason and every fitting host its score;
* fast (``explain=False``): a vectorized pre-filter over the ledger's arrays
  (:mod:`.prefilter`), then exact fits in score order until the first
  adjacent fit; the result keeps only the decisive rejection. A caller that
  places a stream of requests may pass a :class:`RefusalMemory`.

Work, for H hosts of at most C CPU cells: the explaining path runs H exact
fits (hosts nothing is claimed on share one per hardware shape), each O(C)
capacity look-ups plus the cell-set search of :mod:`.cellsets` (O(C^2 log C),
only when the cells' capacities allow a set); the fast path runs O(1)
vectorized passes over K x C arrays per guest-cell count tried, K the
fleet's candidates (:mod:`.ledger.candidates`: the claimed hosts and of
each kind of unclaimed host the first, so K grows with the claims, not
with H), then exact fits on the pre-filter's survivors in score order,
normally one.
``numa_nodes`` auto tries at most C counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar, cast

import numpy as np

from vnuma.errors import ConflictError, GroupModeError, NoPlacementError
from vnuma.placement.alternatives import place_first, unfit_line
from vnuma.placement.build import build_placement
from vnuma.placement.filters import HOST_FILTERS
from vnuma.placement.fit import HostFit, fit_host, further
from vnuma.placement.groups import MODE_HINT, group_clash, group_hosts
from vnuma.placement.ledger.arrays import FleetArrays, IntArray
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.ledger.kinds import named_hosts
from vnuma.placement.memory import RefusalMemory
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.order import HostKey, host_key
from vnuma.placement.pagefilters import NO_HUGEPAGES, NO_HUGEPAGES_HINT
from vnuma.placement.prefilter import Assessment, assess, stages
from vnuma.placement.quota import check_quota
from vnuma.placement.refusal import summarize
from vnuma.placement.request import resolve_size, validate_request
from vnuma.placement.result import PlacementResult, Rejection
from vnuma.placement.scorers import total_scores

__all__ = ["best_reason", "place", "place_on"]

T = TypeVar("T")
MASKED = -(1 << 62)
Candidate = tuple[tuple[object, ...], HostFit, VmRequest, int]


def place(
    request: VmRequest,
    fleet: Fleet,
    strategy: Strategy = Strategy.PACK,
    *,
    explain: bool = True,
    memory: RefusalMemory | None = None,
) -> PlacementResult:
    """Place one VM on the ledger; claims nothing (``fleet.add`` the chosen placement for that).

    Quotas are checked before any host is looked at: a GPU-only request (vCPUs
    sized per host) counts at least one vCPU per guest cell there; when the
    size every fitting host gives it breaks a quota, that too is the quota's
    refusal, not "no host fits".

    A VM of an affine group whose other VMs are placed already is fitted on their host only (the fast
    path's pre-filter knows no groups; the explaining path's host filter ``group`` says why not elsewhere).

    Raises:
        InvalidInputError: a malformed request (see :func:`validate_request`).
        ConflictError: the VM would take its tenant over a quota (alone or with what it holds).
        GroupModeError: it asks affinity of a group whose VMs asked anti-affinity, or the reverse.
        NotFoundError: ``request.host`` is not in the fleet.

    A request with alternatives is placed by :func:`vnuma.placement.alternatives.place_first`: the first
    alternative that fits on some host, each placed as here (every alternative is checked first).
    """
    if request.alternatives:
        return place_first(request, fleet, lambda v: place(v, fleet, strategy, explain=explain, memory=memory))
    validate_request(request, fleet)
    clash = group_clash(fleet.groups, request.name, request.group, request.affinity, request.anti_affinity)
    if clash is not None:
        raise GroupModeError(clash, hint=MODE_HINT)
    tenant = fleet.tenant(request.tenant)
    quotas = tenant.max_vcpus is not None or tenant.max_gpus is not None
    if quotas:
        least = request.vcpus if request.vcpus is not None else (request.numa_nodes or 1)
        check_quota(tenant, fleet.used(request.tenant), least, request.gpus)
    if request.vcpus is None or request.memory_kib is None:
        result = _place_explained(request, fleet, strategy, sized=True)
        refusals = result.rejections
        if quotas and result.chosen is None and refusals and all(r.check == "quota" for r in refusals):
            raise ConflictError(refusals[0].reason, hint=refusals[0].hint)
        return result
    if explain or request.host is not None:
        return _place_explained(request, fleet, strategy, sized=False)
    return _place_fast(request, fleet, strategy, memory)


def best_reason(result: PlacementResult) -> str:
    """One line for stderr: the host that came closest and how many hosts refused for each cause
    (:func:`vnuma.placement.refusal.summarize`); empty when placed."""
    if result.chosen is not None:
        return ""
    return unfit_line(result.unfit) if result.unfit else summarize(result.rejections).line()


def no_placement(vm: str, result: PlacementResult) -> NoPlacementError:
    """The error for a VM no host takes: the one line of :func:`best_reason` (each alternative's, for a request
    with alternatives), and the closest host's hint (``cordoned``: uncordon it; no hugepages: reserve some), if
    its check gives one."""
    refusal = summarize(result.rejections)
    return NoPlacementError(vm, result.rejections, best=best_reason(result), hint=refusal.hint(), unfit=result.unfit)


def host_refusal(hs: HostState, request: VmRequest) -> Rejection | None:
    """The first host-level filter (``host``, ``avoid``) that keeps ``request`` off ``hs``."""
    for unit in HOST_FILTERS:
        refused = unit.apply(hs, request)
        if refused is not None:
            return refused
    return None


def _place_explained(request: VmRequest, fleet: Fleet, strategy: Strategy, *, sized: bool) -> PlacementResult:
    scores = None if sized else total_scores(strategy, fleet.arrays.totals(), request)
    rejections: list[Rejection] = []
    candidates: list[Candidate] = []
    shared: dict[int, object] = {}
    for hs in fleet.states:
        refused = host_refusal(hs, request)
        if refused is not None:
            rejections.append(refused)
            continue
        if sized:
            found = _per_shape(hs, request, shared, lambda s: _sized_fit(request, s, strategy, fleet))
        else:
            found = _per_shape(hs, request, shared, lambda s: _exact_fit(request, s, strategy, fleet))
        if isinstance(found, Rejection):
            rejections.append(found)
            continue
        fit, req = found
        if scores is not None:
            score = int(scores[hs.index])
        else:
            score = int(total_scores(strategy, fleet.arrays.totals(np.array([hs.index])), req)[0])
        candidates.append((host_key(fit.cells, fit.adjacent, score, hs.name), fit, req, score))
    chosen, fit, refused_hosts = _admitted(sorted(candidates, key=lambda c: c[0]), fleet, rejections)
    fitting = tuple((c[1].state.name, c[3]) for c in candidates if c[1].state.name not in refused_hosts)
    rejections.sort(key=lambda r: fleet.by_name[r.host].index)
    return PlacementResult(chosen, tuple(rejections), fitting, fit.decided_by if fit else None)


def place_on(
    request: VmRequest, fleet: Fleet, strategy: Strategy, hs: HostState
) -> tuple[HostKey, Placement] | Rejection:
    """What the explaining path makes of ``hs`` alone: its rank key among the hosts that fit and the
    admitted placement there, or the host's rejection. :func:`place` chooses the fitting host of the lowest
    key; a host's answer depends on that host's ledger only (its fit, and its score from its own totals).
    The request is sized or not as in :func:`place`; validating it and the tenant's quotas is the caller's."""
    refused = host_refusal(hs, request)
    if refused is not None:
        return refused
    sized = request.vcpus is None or request.memory_kib is None
    found = (_sized_fit if sized else _exact_fit)(request, hs, strategy, fleet)
    if isinstance(found, Rejection):
        return found
    fit, req = found
    score = int(total_scores(strategy, fleet.arrays.totals(np.array([hs.index])), req)[0])
    placement = build_placement(fit, req)
    refusal = fleet.admit(placement, req.isolation)
    if refusal is not None:
        return refusal
    return host_key(fit.cells, fit.adjacent, score, hs.name), placement


def _admitted(
    ranked: list[Candidate], fleet: Fleet, rejections: list[Rejection]
) -> tuple[Placement | None, HostFit | None, set[str]]:
    """The first ranked candidate admission accepts, and its fit; refused ones join ``rejections``."""
    refused: set[str] = set()
    for _key, fit, req, _score in ranked:
        placement = build_placement(fit, req)
        refusal = fleet.admit(placement, req.isolation)
        if refusal is None:
            return placement, fit, refused
        rejections.append(refusal)
        refused.add(fit.state.name)
    return None, None, refused


def _exact_fit(
    request: VmRequest, hs: HostState, strategy: Strategy, fleet: Fleet
) -> tuple[HostFit, VmRequest] | Rejection:
    found = fit_host(hs, request, strategy, fleet.isolation)
    return found if isinstance(found, Rejection) else (found, request)


def _per_shape(hs: HostState, request: VmRequest, shared: dict[int, object], fit: Callable[[HostState], T]) -> T:
    """``fit(hs)``; for an unbuilt host computed once per shape, on the shape's template.

    An unbuilt host holds no claims, so it equals its shape's template but for its name:
    the template's answer, renamed, is the host's. (Not when the request avoids some of
    the host's or the template's cells (the template has the name of its shape's first
    host): that depends on the name; nor a rejection whose words name the
    template's host, as resctrl's do: the host's own is computed, to name it.)
    """
    if hs.built or any(h in (hs.name, hs.shape.template.name) for h, _cell in request.avoid_cells):
        return fit(hs)
    key = id(hs.shape)
    if key not in shared:
        shared[key] = fit(hs.shape.template)
    found = shared[key]
    if isinstance(found, Rejection) and hs.name != found.host and _names(found, found.host):
        return fit(hs)
    return cast(T, _rebind(found, hs))


def _names(r: Rejection, host: str) -> bool:
    """Do ``r``'s words name ``host`` (its reason, hint or gist; a false alarm only costs a fit)?"""
    return any(host in text for text in (r.reason, r.hint or "", r.gist or ""))


def _rebind(found: object, hs: HostState) -> object:
    if isinstance(found, Rejection):
        return replace(found, host=hs.name)
    if isinstance(found, HostFit):
        return replace(found, state=hs)
    if isinstance(found, tuple):
        return tuple(_rebind(x, hs) for x in found)
    return found  # a request: nothing host-specific in it


def _sized_fit(
    request: VmRequest, hs: HostState, strategy: Strategy, fleet: Fleet
) -> tuple[HostFit, VmRequest] | Rejection:
    """Size a GPU-only request from ``hs`` (page sizes largest first) and fit it there."""
    closest: Rejection | None = None
    for size in hs.page_sizes(request.page_size_kib):
        resolved = resolve_size(request, hs, size)
        if isinstance(resolved, str):
            closest = further(closest, Rejection(hs.name, "size", resolved))
            continue
        found = fit_host(hs, resolved, strategy, fleet.isolation)
        if isinstance(found, HostFit):
            return found, resolved
        closest = further(closest, found)
    return closest or Rejection(hs.name, "size", NO_HUGEPAGES, NO_HUGEPAGES_HINT, NO_HUGEPAGES)


def _auto_nodes(request: VmRequest, fleet: Fleet) -> list[int]:
    assert request.vcpus is not None and request.memory_kib is not None
    most = fleet.arrays.most_cells
    return [n for n in range(1, most + 1) if request.vcpus % n == 0 and request.memory_kib % (4 * n) == 0]


def prefilter_sizes(request: VmRequest, n: int) -> tuple[int, ...]:
    """Page sizes the pre-filter tries for ``n`` guest cells (``large``: the hugepage sizes that divide)."""
    if request.page_size_kib:
        return (request.page_size_kib,)
    cells = request.cell_sizes(n)[1]
    return tuple(s for s in (1048576, 2048) if all(m % s == 0 for m in cells))


def _place_fast(
    request: VmRequest, fleet: Fleet, strategy: Strategy, memory: RefusalMemory | None
) -> PlacementResult:
    recalled = memory.recall(request, fleet, strategy) if memory is not None else None
    if recalled is not None:
        return PlacementResult(None, (recalled,))
    nodes = [request.numa_nodes] if request.numa_nodes else _auto_nodes(request, fleet)
    # The pre-filter knows no groups: an affine group's VM is fitted on its group's host(s) only.
    bound = group_hosts(fleet.groups, request.name, request.group, request.affinity)
    named = (*named_hosts(request), *bound)
    candidates = fleet.candidates.indices(named)
    arrays = fleet.arrays.subset(candidates)
    closest: Rejection | None = None
    reached: list[Assessment] = []
    for n in nodes:
        checked = assess(arrays, request, n, prefilter_sizes(request, n), strategy)
        reached.append(checked)
        picked = np.flatnonzero(checked.may_fit())
        hosts = candidates[picked]
        if request.avoid_hosts or bound:
            keep = [i for i, h in enumerate(hosts) if _allowed(fleet.states[int(h)].name, request, bound)]
            picked, hosts = picked[keep], hosts[keep]
        if not len(hosts):
            continue
        scores = total_scores(strategy, arrays.totals(picked), request)
        found, closest = _first_fit(request, fleet, strategy, n, hosts, scores, closest)
        if found is not None:
            return found
    if closest is None and fleet.states:
        closest = _explain_refusal(request, fleet, strategy, arrays, candidates, reached)
    if closest is None:
        return PlacementResult(None, ())
    if memory is not None:
        memory.remember(request, fleet, strategy, closest)
    return PlacementResult(None, (closest,))


def _allowed(host: str, request: VmRequest, bound: tuple[str, ...]) -> bool:
    """Is ``host`` neither avoided by the request nor outside the hosts its affine group holds it to?"""
    return host not in request.avoid_hosts and (not bound or host in bound)


def _explain_refusal(
    request: VmRequest,
    fleet: Fleet,
    strategy: Strategy,
    arrays: FleetArrays,
    candidates: IntArray,
    reached: list[Assessment],
) -> Rejection:
    """The exact rejection of the host the pre-filter saw come closest (no host passed it); ``arrays`` are
    those of the hosts at ``candidates``, as the assessments were made."""
    best_host, best_stage = 0, -1
    for checked in reached:
        n = checked.n
        ranked = checked.stages() * 4
        if strategy is Strategy.GPU_FIRST and request.takes_no_gpu:
            # A host held back only by the gpu-first reserve came closer than one short of pCPUs.
            ranked += stages(arrays, request, n, prefilter_sizes(request, n), Strategy.PACK)
        top = int(ranked.argmax())
        if int(ranked[top]) > best_stage:
            best_host, best_stage = int(candidates[top]), int(ranked[top])
    hs = fleet.states[best_host]
    found = host_refusal(hs, request) or fit_host(hs, request, strategy, fleet.isolation)
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
    """Exact fits in (score, name) order; the first admitted adjacent fit wins, else the first admitted fit."""
    fallback: list[tuple[HostFit, int]] = []
    ranked = scores.copy()
    for _ in range(len(hosts)):
        j = int(ranked.argmax())
        ranked[j] = MASKED
        found = fit_host(fleet.states[int(hosts[j])], request, strategy, fleet.isolation, n)
        if isinstance(found, Rejection):
            closest = further(closest, found)
        elif found.adjacent:
            chosen, closest = _try(found, request, fleet, int(scores[j]), closest)
            if chosen is not None:
                return chosen, closest
        else:
            fallback.append((found, int(scores[j])))
    for fit, score in fallback:
        chosen, closest = _try(fit, request, fleet, score, closest)
        if chosen is not None:
            return chosen, closest
    return None, closest


def _try(
    fit: HostFit, request: VmRequest, fleet: Fleet, score: int, closest: Rejection | None
) -> tuple[PlacementResult | None, Rejection | None]:
    placement = build_placement(fit, request)
    refusal = fleet.admit(placement, request.isolation)
    if refusal is not None:
        return None, further(closest, refusal)
    return PlacementResult(placement, (), ((fit.state.name, score),), fit.decided_by), closest
