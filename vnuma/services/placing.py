"""Placing a VM: one snapshot of the inventory, the engine's decision, one claim.

``place_vm`` reads one snapshot (hosts, placements, tenants) in one
transaction (of the hosts, only those the engine can choose unless the answer
lists every host's reason: :func:`narrowed_view`), decides with the engine on
a ledger built from it, and claims
in one more transaction, where admission re-checks the chosen placement
under the host lock (:mod:`vnuma.inventory.placing`). When a racing command
claimed first, the engine chooses again on that host's ledger inside the
claim's transaction (the host is locked: what it sees is what it claims);
when nothing fits there any more (for a request with alternatives: neither
the alternative decided nor an earlier one), the VM is decided again on a
new snapshot, up to ``CLAIM_ATTEMPTS`` times. The engine takes its fast path unless the caller
wants every host's reason (``explain``) or nothing fits (then the refusal
is explained). Once the claim commits, a Ctrl-C no longer stops ``vnuma
place``: it prints the placement and exits 0 (:mod:`.interrupts`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Protocol

from vnuma.errors import ConflictError, NoPlacementError, NotFoundError, VnumaError
from vnuma.inventory.placer import Placer, open_placer
from vnuma.inventory.placing import Claimed
from vnuma.placement import topk
from vnuma.placement.engine import no_placement, place
from vnuma.placement.kept import for_tenant
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.kinds import named_hosts
from vnuma.placement.model import Placement, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.refusal import EXPLAIN_HINT
from vnuma.placement.result import PlacementResult
from vnuma.services import Settings, failpoints, interrupts
from vnuma.services.names import check_name
from vnuma.topology import Host, gc_paused

CLAIM_ATTEMPTS = 5
LAST_ATTEMPT = CLAIM_ATTEMPTS - 1
RETRY_PAUSE_S = 0.02
_BUSY_HINT = "other commands are claiming on the same hosts right now; run the command again"
class View(Protocol):
    """Where a placement's ledger comes from: a fresh snapshot per attempt (:class:`Cold`, one command), or
    a ledger kept between placements (:class:`vnuma.services.warm.WarmFleet`, a serving process)."""

    def viewing(self, placer: Placer, *, attempt: int) -> AbstractContextManager[tuple[Fleet, Mapping[str, Tenant]]]:
        """The ledger and the tenants to decide on, unchanged while the context lasts; ``attempt``: how many
        claims this request lost so far (up to :data:`LAST_ATTEMPT`)."""
        ...

    def decide(
        self, placer: Placer, fleet: Fleet, request: VmRequest, strategy: Strategy, *, explain: bool
    ) -> PlacementResult:
        """Inside :meth:`viewing`: the engine's answer for ``request`` on the whole fleet, ``fleet`` the view's
        ledger; a refusal explained on every host (:func:`explained`)."""
        ...

    def hold(self, placement: Placement) -> None:
        """Inside :meth:`viewing`: ``placement`` is about to be claimed (later decisions see it taken)."""
        ...

    def committing(self) -> AbstractContextManager[object]:
        """Held from just before a claim commits until :meth:`settle` has seen it (no read of the view between)."""
        ...

    def settle(self, placement: Placement, claimed: Claimed | None) -> None:
        """Its claim committed (``claimed``: what it wrote) or was lost (None)."""
        ...


def explained(
    result: PlacementResult, request: VmRequest, fleet: Fleet, strategy: Strategy, *, explain: bool
) -> PlacementResult:
    """``result``, the engine's answer on ``fleet``; a refusal not explained yet is asked again there with every
    host's reason."""
    if result.chosen is not None or explain:
        return result
    return place(request, fleet, strategy, explain=True)


class Cold:
    """A new snapshot, and a ledger built from it, for every attempt. ``named``: read only the hosts the engine
    can choose for a request naming these hosts (:func:`~vnuma.inventory.narrowed.read_narrowed`), not the whole
    fleet; None: every host. ``ranked``: the request (and strategy) whose engine's choice is checked against
    claimed hosts left out by their kept figures (:mod:`vnuma.placement.topk`): of those, only the best ``k``
    are read (default :data:`~vnuma.placement.topk.FIRST_K`), more when one left out could come first."""

    def __init__(
        self, named: frozenset[str] | None = None, *, ranked: tuple[VmRequest, Strategy] | None = None,
        k: int | None = None,
    ) -> None:
        self.named = named
        self.ranked = ranked
        self.k = topk.FIRST_K if k is None else k
        self.partial = False
        """Did the last snapshot leave hosts out?"""
        self.best_left_out: topk.Ranked | None = None
        """The best ranked claimed host the last snapshot left out (None: none)."""

    @contextmanager
    def viewing(self, placer: Placer, *, attempt: int) -> Iterator[tuple[Fleet, Mapping[str, Tenant]]]:
        with gc_paused():  # decoding a fleet makes many small acyclic objects (see gc_paused)
            self.best_left_out = None
            if self.named is None:
                snap = placer.snapshot()
            elif self.ranked is None:
                snap = placer.narrowed(self.named)
            else:
                snap = placer.narrowed(self.named, group=self.ranked[0].group, rank=self._left_out)
            self.partial = snap.left_out > 0
            yield Fleet(
                snap.hosts, snap.placements, snap.tenants.values(), gpus_elsewhere=snap.gpus_elsewhere,
                usage_elsewhere=snap.usage_elsewhere, vms_elsewhere=snap.vms_elsewhere,
            ), snap.tenants

    def _left_out(
        self, names: list[str], figures: list[tuple[int, ...]], tenants: dict[str, Tenant], alike: Callable[[str], Host]
    ) -> list[str]:
        assert self.ranked is not None
        if len(names) <= self.k:
            return []  # all of them are read
        request, strategy = self.ranked
        ranked = topk.ranking(request, strategy, tenants, names, figures, alike)
        left = ranked[self.k :]
        self.best_left_out = left[0] if left else None
        unranked = set(names).difference(name for _score, name in ranked)  # of kinds that size the VM nowhere
        return [*unranked, *(name for _score, name in left)]

    def decide(
        self, placer: Placer, fleet: Fleet, request: VmRequest, strategy: Strategy, *, explain: bool
    ) -> PlacementResult:
        """The engine's answer on ``fleet``; while a claimed host left out could come before its choice
        (:func:`~vnuma.placement.topk.outranks`), again on a read of more of them. A refusal on a read that
        left hosts out is decided again, and explained, on a snapshot of the whole fleet."""
        result, view = place(request, fleet, strategy, explain=explain), self
        while result.chosen is not None and topk.outranks(view.best_left_out, result, request, fleet):
            view = Cold(self.named, ranked=self.ranked, k=max(view.k, 1) * topk.GROWTH)
            with view.viewing(placer, attempt=0) as (fleet, _tenants):
                result = place(request, fleet, strategy, explain=explain)
        if result.chosen is None and not explain and view.partial:
            with Cold().viewing(placer, attempt=0) as (whole, _tenants):
                return place(request, whole, strategy, explain=True)
        return explained(result, request, fleet, strategy, explain=explain)

    def hold(self, placement: Placement) -> None:
        """Nothing to keep: the next attempt reads a new snapshot."""

    def committing(self) -> AbstractContextManager[object]:
        """Nothing to keep still."""
        return nullcontext()

    def settle(self, placement: Placement, claimed: Claimed | None) -> None:
        """Nothing to keep."""


def _named(request: VmRequest, tenants: Mapping[str, Tenant], fleet: Fleet) -> VmRequest:
    """The request as its tenant completes it (:func:`vnuma.placement.kept.for_tenant`), with a name
    (``TENANT-vmN`` when none was given)."""
    assert request.tenant is not None
    tenant = tenants.get(request.tenant)
    if tenant is None:
        raise NotFoundError(f"unknown tenant {request.tenant!r}", hint=f"vnuma tenant create {request.tenant}")
    name = request.name
    if not name:
        n = 1
        while fleet.has_vm(f"{request.tenant}-vm{n}"):
            n += 1
        name = f"{request.tenant}-vm{n}"
    check_name(name, "VM")
    if fleet.has_vm(name):
        raise ConflictError(f"VM {name!r} already exists", hint=f"vnuma vm show {name}")
    return for_tenant(replace(request, name=name), tenant)


def narrowed_view(request: VmRequest, strategy: Strategy, *, explain: bool) -> Cold:
    """The view ``place`` reads for ``request``: only the hosts the engine can choose (a :class:`Cold` with
    the hosts the request names), unless its answer lists every host's reason: asked for (``explain``), held
    to one host (``host``, every other host's "not the requested host"), or with alternatives (each one's
    rejections). A request sized per host (no vCPUs or memory) is decided over every host it reads, but alike
    unclaimed hosts fit alike and the first in name order wins their tie, so it is narrowed too. Claimed hosts
    are left out as well when their kept figures rank them after the choice (:func:`~vnuma.placement.topk.rankable`
    requests)."""
    if explain or request.host is not None or request.alternatives:
        return Cold()
    return Cold(named_hosts(request), ranked=(request, strategy) if topk.rankable(request) else None)


def place_vm(
    settings: Settings, request: VmRequest, strategy: Strategy, *, dry_run: bool, explain: bool = False,
    view: View | None = None,
) -> tuple[VmRequest, PlacementResult]:
    """Place a VM and, unless ``dry_run``, claim its resources in one transaction.

    Returns the request as completed (VM name, tenant isolation) and the
    result; ``explain`` gives every host's rejection and score. ``view``: where
    the ledger comes from (default :class:`Cold`, a snapshot per attempt).

    Raises:
        NotFoundError: unknown tenant or host.
        InvalidInputError: a malformed request.
        ConflictError: the VM name is taken, a quota would be exceeded, or every
            attempt lost its claim ("inventory busy").
    """
    with open_placer(settings.db_url) as placer:
        view = view or narrowed_view(request, strategy, explain=explain)
        return _decide_and_claim(placer, view, request, strategy, dry_run=dry_run, explain=explain)


def _decide_and_claim(
    placer: Placer, view: View, request: VmRequest, strategy: Strategy, *, dry_run: bool, explain: bool
) -> tuple[VmRequest, PlacementResult]:
    last = ""
    for attempt in range(CLAIM_ATTEMPTS):
        with view.viewing(placer, attempt=attempt) as (fleet, tenants):
            request = _named(request, tenants, fleet)
            result = view.decide(placer, fleet, request, strategy, explain=explain)
            if result.chosen is None or dry_run:
                return request, result
            view.hold(result.chosen)
        try:
            # Ctrl-C from here on: a lost claim stops here, a committed one finishes the command (interrupts.py).
            with interrupts.finishing():
                claimed = placer.claim(result.chosen, refit=_refit(request, strategy, result.chosen.alternative),
                                       guard=view.committing(), on_commit=partial(view.settle, result.chosen))
        except ConflictError as err:
            view.settle(result.chosen, None)
            last = str(err)
        except BaseException:
            view.settle(result.chosen, None)
            raise
        else:
            failpoints.reached("claimed")  # committed and settled: whatever happens here, the VM stays
            chosen = claimed.placement
            return request, result if chosen is result.chosen else replace(result, chosen=chosen)
        if attempt + 1 < CLAIM_ATTEMPTS:
            # Jitter, so that commands that lost the same race do not collide again in lockstep.
            time.sleep(random.uniform(0, RETRY_PAUSE_S * (attempt + 1)))
    raise ConflictError(
        f"inventory busy: VM {request.name!r} lost its claim to other commands {CLAIM_ATTEMPTS} times "
        f"(last: {last})",
        hint=_BUSY_HINT,
    )


def _refit(request: VmRequest, strategy: Strategy, decided: int) -> Callable[[Fleet], Placement | None]:
    """What the claim asks when someone claimed first: the engine's choice on the locked host's ledger, if it
    got alternative ``decided`` (the one the fleet-wide decision chose) or an earlier one. A later alternative
    is not taken there: the one decided may still fit on another host, and the first alternative that fits
    anywhere wins (:mod:`vnuma.placement.alternatives`); None, so the whole fleet decides again."""

    def refit(ledger: Fleet) -> Placement | None:
        (host,) = ledger.host_names()
        try:
            chosen = place(replace(request, host=host), ledger, strategy, explain=False).chosen
        except VnumaError:  # a quota the VM now breaks: the claim's own refusal says so
            return None
        return chosen if chosen is None or chosen.alternative <= decided else None

    return refit


def require_chosen(request: VmRequest, result: PlacementResult) -> Placement:
    """The chosen placement, or NoPlacementError with the best reason (``place``'s: its hint asks for every
    host's reason with --explain, unless a host-level refusal says what to do)."""
    if result.chosen is None:
        raise place_refusal(request.name, result)
    return result.chosen


def place_refusal(vm: str, result: PlacementResult) -> NoPlacementError:
    """``place``'s error for a VM no host takes: the engine's (:func:`vnuma.placement.engine.no_placement`),
    its hint asking for every host's reason with --explain unless the closest host's says what to do."""
    refused = no_placement(vm, result)
    refused.hint = refused.hint or EXPLAIN_HINT
    return refused
