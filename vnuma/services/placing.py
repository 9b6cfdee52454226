"""Placing a VM: one snapshot of the inventory, the engine's decision, one claim.

``place_vm`` reads one snapshot (hosts, placements, tenants) in one
transaction, decides with the engine on a ledger built from it, and claims
in one more transaction, where admission re-checks the chosen placement
under the host lock (:mod:`vnuma.inventory.placing`). A claim lost to a
racing command is decided again on a new snapshot, up to
``CLAIM_ATTEMPTS`` times. The engine takes its fast path unless the caller
wants every host's reason (``explain``) or nothing fits (then the refusal
is explained).
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

from vnuma.errors import ConflictError, NotFoundError
from vnuma.inventory.placer import Placer, open_placer
from vnuma.inventory.reading import Snapshot
from vnuma.placement.engine import no_placement, place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, PlacementResult, Strategy, VmRequest
from vnuma.services import Settings
from vnuma.services.names import check_vm_name
from vnuma.topology import gc_paused

CLAIM_ATTEMPTS = 5
RETRY_PAUSE_S = 0.02
_BUSY_HINT = "other commands are claiming on the same hosts right now; run the command again"
def _named(request: VmRequest, snap: Snapshot) -> VmRequest:
    """The request with its tenant's isolation and a name (``TENANT-vmN`` when none was given)."""
    assert request.tenant is not None
    tenant = snap.tenants.get(request.tenant)
    if tenant is None:
        raise NotFoundError(f"unknown tenant {request.tenant!r}", hint=f"vnuma tenant create {request.tenant}")
    taken = {p.vm for p in snap.placements}
    name = request.name
    if not name:
        n = 1
        while f"{request.tenant}-vm{n}" in taken:
            n += 1
        name = f"{request.tenant}-vm{n}"
    check_vm_name(name)
    if name in taken:
        raise ConflictError(f"VM {name!r} already exists", hint=f"vnuma vm show {name}")
    return replace(request, name=name, isolation=tenant.isolation)


def decide(snap: Snapshot, request: VmRequest, strategy: Strategy, *, explain: bool) -> PlacementResult:
    """The engine's answer on a snapshot (a refusal is always explained)."""
    with gc_paused():
        fleet = Fleet(snap.hosts, snap.placements, snap.tenants.values())
        result = place(request, fleet, strategy, explain=explain)
        if result.chosen is None and not explain:
            result = place(request, fleet, strategy, explain=True)
    return result


def place_vm(
    settings: Settings, request: VmRequest, strategy: Strategy, *, dry_run: bool, explain: bool = False
) -> tuple[VmRequest, PlacementResult]:
    """Place a VM and, unless ``dry_run``, claim its resources in one transaction.

    Returns the request as completed (VM name, tenant isolation) and the
    result; ``explain`` gives every host's rejection and score.

    Raises:
        NotFoundError: unknown tenant or host.
        InvalidInputError: a malformed request.
        ConflictError: the VM name is taken, a quota would be exceeded, or every
            attempt lost its claim ("inventory busy").
    """
    with open_placer(settings.db_url) as placer:
        return _decide_and_claim(placer, request, strategy, dry_run=dry_run, explain=explain)


def _decide_and_claim(
    placer: Placer, request: VmRequest, strategy: Strategy, *, dry_run: bool, explain: bool
) -> tuple[VmRequest, PlacementResult]:
    last = ""
    for attempt in range(CLAIM_ATTEMPTS):
        with gc_paused():  # decoding a fleet makes many small acyclic objects (see gc_paused)
            snap = placer.snapshot()
        request = _named(request, snap)
        result = decide(snap, request, strategy, explain=explain)
        if result.chosen is None or dry_run:
            return request, result
        try:
            placer.claim(result.chosen)
            return request, result
        except ConflictError as err:
            last = str(err)
        if attempt + 1 < CLAIM_ATTEMPTS:
            # Jitter, so that commands that lost the same race do not collide again in lockstep.
            time.sleep(random.uniform(0, RETRY_PAUSE_S * (attempt + 1)))
    raise ConflictError(
        f"inventory busy: VM {request.name!r} lost its claim to other commands {CLAIM_ATTEMPTS} times "
        f"(last: {last})",
        hint=_BUSY_HINT,
    )


def require_chosen(request: VmRequest, result: PlacementResult) -> Placement:
    """The chosen placement, or NoPlacementError with the best reason."""
    if result.chosen is None:
        raise no_placement(request.name, result)
    return result.chosen
