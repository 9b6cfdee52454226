"""Tenant and placement use cases: create tenants, place (claim) and release VMs.

``place_vm`` opens the inventory with ``open_placing_inventory``: on a SQLite
file at head that is the DB-API path (no SQLAlchemy import, the bulk of a
``vnuma place`` process otherwise), elsewhere the ORM inventory; both give
the same answers and claim with the same guarantees.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import replace

from vnuma.errors import ConflictError, InvalidInputError, NoPlacementError, NotFoundError
from vnuma.inventory.sqlite_direct import PlacingInventory, open_placing_inventory
from vnuma.placement.engine import best_reason, place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, PlacementResult, Strategy, Tenant, VmRequest
from vnuma.placement.quota import check_quota
from vnuma.services import Settings
from vnuma.topology import gc_paused

CLAIM_ATTEMPTS = 5
RETRY_PAUSE_S = 0.02
_BUSY_HINT = "other commands are claiming on the same hosts right now; run the command again"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$")


def check_vm_name(name: str, what: str = "VM") -> None:
    """VM and tenant names become libvirt domain names and file names: keep them plain.

    Raises:
        InvalidInputError: empty, too long, or characters outside ``A-Za-z0-9_.+-``.
    """
    if not _NAME.match(name):
        raise InvalidInputError(
            f"bad {what} name {name!r}: 1-63 characters from A-Z a-z 0-9 _ . + -, "
            "starting with a letter or digit"
        )


def create_tenant(settings: Settings, tenant: Tenant) -> Tenant:
    """Record a new tenant."""
    check_vm_name(tenant.name, "tenant")
    for value, flag in ((tenant.max_vcpus, "--max-vcpus"), (tenant.max_gpus, "--max-gpus")):
        if value is not None and value < 0:
            raise InvalidInputError(f"{flag} must be 0 or more, got {value}")
    from vnuma.inventory.db import open_inventory

    open_inventory(settings.db_url).add_tenant(tenant)
    return tenant


def _unique_vm_name(inventory: PlacingInventory, tenant: str) -> str:
    taken = {p.vm for p, _state in inventory.list_vms(tenant=tenant)}
    n = 1
    while f"{tenant}-vm{n}" in taken:
        n += 1
    return f"{tenant}-vm{n}"


def plan_placement(
    inventory: PlacingInventory, request: VmRequest, strategy: Strategy
) -> tuple[VmRequest, PlacementResult]:
    """Run the engine on the inventory's current state (no writes)."""
    tenant = inventory.get_tenant(request.tenant)
    request = replace(request, isolation=tenant.isolation)
    if request.host is not None:
        inventory.get_host(request.host)
    hosts, placements = inventory.list_hosts(), inventory.placements_on(None)
    with gc_paused():
        fleet = Fleet(hosts, placements, inventory.tenant_isolations())
        result = place(request, fleet, strategy)
    if result.chosen is not None:
        used_vcpus, used_gpus = inventory.tenant_usage(tenant.name)
        chosen = result.chosen
        gpus = sum(1 for d in chosen.devices if d.kind == "gpu")
        check_quota(tenant, used_vcpus, used_gpus, chosen.vcpus, gpus)
    return request, result



def place_vm(
    settings: Settings, request: VmRequest, strategy: Strategy, *, dry_run: bool
) -> tuple[VmRequest, PlacementResult]:
    """Place a VM and, unless ``dry_run``, claim its resources in one transaction.

    Returns the request as completed (VM name, tenant isolation) and the result.

    A claim that loses a race (another operator took a pCPU, page or device
    first) is recomputed on the new state, up to ``CLAIM_ATTEMPTS`` times.

    Raises:
        NotFoundError: unknown tenant or host.
        ConflictError: the VM name is taken, or every attempt lost its claim
            ("inventory busy").
        NoPlacementError: nothing fits; carries every host's rejection.
    """
    with open_placing_inventory(settings.db_url) as inventory:
        try:
            inventory.get_tenant(request.tenant)
        except NotFoundError as err:
            raise NotFoundError(
                f"unknown tenant {request.tenant!r}", hint=f"vnuma tenant create {request.tenant}"
            ) from err
        if not request.name:
            request = replace(request, name=_unique_vm_name(inventory, request.tenant))
        check_vm_name(request.name)
        _ensure_vm_absent(inventory, request.name)
        return _plan_and_claim(inventory, request, strategy, dry_run=dry_run)


def _plan_and_claim(
    inventory: PlacingInventory, request: VmRequest, strategy: Strategy, *, dry_run: bool
) -> tuple[VmRequest, PlacementResult]:
    last = ""
    for attempt in range(CLAIM_ATTEMPTS):
        request, result = plan_placement(inventory, request, strategy)
        if result.chosen is None or dry_run:
            return request, result
        try:
            inventory.claim(result.chosen)
            return request, result
        except ConflictError as err:
            # A racing command that took the VM's name is not worth a retry.
            _ensure_vm_absent(inventory, request.name)
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
        raise NoPlacementError(request.name, result.rejections, best=best_reason(result))
    return result.chosen


def _ensure_vm_absent(inventory: PlacingInventory, name: str) -> None:
    try:
        inventory.get_vm(name)
    except NotFoundError:
        return
    raise ConflictError(f"VM {name!r} already exists", hint=f"vnuma vm show {name}")
