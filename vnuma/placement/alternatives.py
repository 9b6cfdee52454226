"""Requests with alternatives: the first alternative that fits anywhere in the fleet wins.

Pure: no I/O. A request lists alternatives (``vnuma place T --gpus 2 --or mig=3g.40gb:2 --or
vgpu=nvidia-559:2``; :mod:`vnuma.placement.altmodel`): alternative 0 is the request as asked, alternative
N its N-th ``--or``, the whole request with its devices replaced by the alternative's and its vCPUs and
memory the alternative's (:func:`variants`). :func:`place_first` is the one rule every path places such a
request by (``vnuma place``, the service, every move and rebalance plan, ``simulate``: all through
:func:`vnuma.placement.engine.place`): alternative 0 is placed on the fleet given as any request is (the
strategy chooses among the hosts where it fits); only when it fits on no host is alternative 1 tried, and so
on. The placement says which it got (:attr:`Placement.alternative`) and keeps the whole request with every
alternative (the chosen one's size as it was sized), so a later move, which places that request again,
takes an earlier alternative wherever it fits then.

Every alternative is checked before any is placed (:func:`checked_variants`): a request no alternative
could make, or a partition no GPU of the fleet offers, is an error naming the alternative.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.placement.altmodel import DEVICE_KEYS, Alternative
from vnuma.placement.asks import asked_changes, request_from
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.refusal import summarize
from vnuma.placement.request import validate_request
from vnuma.placement.result import PlacementResult, Unfit

AS_ASKED = "as asked"
"""How alternative 0 (the request itself) is named."""

_UNCONFINED = {"host": None, "avoid_hosts": frozenset(), "avoid_cells": frozenset(), "isolation": Isolation.CORE,
               "name": "", "tenant": None}
"""What :func:`variants` carries from the request to each alternative as it is (the rest is the cache's key)."""


def label(req: VmRequest, n: int) -> str:
    """Alternative ``n`` of ``req`` as messages name it: ``as asked``, ``alternative 1 (mig=3g.40gb:2)``."""
    return AS_ASKED if n == 0 else f"alternative {n} ({req.alternatives[n - 1].text})"


def variants(req: VmRequest) -> tuple[VmRequest, ...]:
    """The whole request of each alternative of ``req``, alternative 0 (``req`` itself) first; none lists
    alternatives, each keeps ``req``'s name, tenant, isolation and what it is confined to.

    Raises:
        InvalidInputError: an alternative whose options do not read as a request, naming it.
    """
    free = replace(req, **_UNCONFINED)  # the cache's key: a planner asks one request under many confinements
    made = _MADE.get(free)
    if made is None:
        base = replace(free, alternatives=())
        made = (base, *(_variant(req, base, n, a) for n, a in enumerate(req.alternatives, 1)))
        if len(_MADE) > 1 << 12:
            _MADE.clear()
        _MADE[free] = made
    keep = {k: getattr(req, k) for k in _UNCONFINED}
    return tuple(replace(v, **keep) for v in made)


_MADE: dict[VmRequest, tuple[VmRequest, ...]] = {}


def _variant(req: VmRequest, base: VmRequest, n: int, alt: Alternative) -> VmRequest:
    asked = {k: v for k, v in asked_changes(base).items() if k not in DEVICE_KEYS}
    asked.update(alt.asked)
    try:
        return request_from(asked)
    except InvalidInputError as err:
        raise InvalidInputError(f"VM {req.name!r}: {label(req, n)}: {err}", hint=err.hint) from None


def checked_variants(req: VmRequest, fleet: Fleet) -> tuple[VmRequest, ...]:
    """:func:`variants`, each checked as the engine checks a request (:func:`validate_request`: its partitions
    offered by some GPU of ``fleet`` among the rest).

    Raises:
        InvalidInputError: the first alternative that is no request, or names a vGPU type or MIG profile no
            GPU of the fleet offers; naming it.
        NotFoundError: as :func:`validate_request`.
    """
    made = variants(req)
    for n, v in enumerate(made):
        try:
            validate_request(v, fleet)
        except InvalidInputError as err:
            words = str(err).removeprefix(f"VM {v.name!r}: ")
            raise InvalidInputError(f"VM {req.name!r}: {label(req, n)}: {words}", hint=err.hint) from None
    return made


def place_first(
    req: VmRequest, fleet: Fleet, place_one: Callable[[VmRequest], PlacementResult]
) -> PlacementResult:
    """The first alternative of ``req`` that ``place_one`` (the engine on ``fleet``) places anywhere; the
    placement keeps ``req`` whole (:func:`kept`). When none fits: no placement, the request's own
    rejections, and every alternative's in :attr:`PlacementResult.unfit`. An alternative its tenant's quota
    refuses fits nowhere (said so in ``unfit``); when the quota refuses every one, its error is raised.

    Raises:
        InvalidInputError, NotFoundError: as :func:`checked_variants`.
        ConflictError: the tenant's quota refuses every alternative (the first one's refusal).
    """
    made = checked_variants(req, fleet)
    unfit: list[Unfit] = []
    quota: ConflictError | None = None
    first: PlacementResult | None = None
    for n, v in enumerate(made):
        try:
            result = place_one(v)
        except ConflictError as err:
            quota = quota or err
            unfit.append(Unfit(n, _text(req, n), refused=str(err)))
            continue
        if result.chosen is not None:
            chosen = replace(result.chosen, alternative=n, request=kept(req, n, result.chosen.request))
            return replace(result, chosen=chosen, unfit=tuple(unfit))
        first = first or result
        unfit.append(Unfit(n, _text(req, n), result.rejections))
    if first is None:
        assert quota is not None
        raise quota
    return replace(first, unfit=tuple(unfit))


def unfit_line(unfit: tuple[Unfit, ...]) -> str:
    """Why no alternative fits, in one line: each alternative's refusal (its one line,
    :meth:`vnuma.placement.refusal.Refusal.line`), ``as asked: ... | alternative 1 (mig=3g.40gb:2): ...``."""
    return "none of its alternatives fits: " + " | ".join(
        f"{unfit_label(u)}: {u.refused or summarize(u.rejections).line()}" for u in unfit)


def unfit_label(u: Unfit) -> str:
    """How an alternative tried is named: ``as asked``, ``alternative 1 (mig=3g.40gb:2)``."""
    return AS_ASKED if u.index == 0 else f"alternative {u.index} ({u.text})"


def _text(req: VmRequest, n: int) -> str:
    return AS_ASKED if n == 0 else req.alternatives[n - 1].text


def kept(req: VmRequest, n: int, placed: object) -> VmRequest:
    """What a VM placed under alternative ``n`` of ``req`` keeps: ``req`` with every alternative, the one it
    got sized as it was (``placed``: the engine's request of that alternative, sized when it asked no size)."""
    assert isinstance(placed, VmRequest)
    if n == 0:
        return replace(placed, alternatives=req.alternatives)
    alt = req.alternatives[n - 1].sized(asked_changes(placed))
    return replace(req, alternatives=(*req.alternatives[: n - 1], alt, *req.alternatives[n:]))
