"""``vnuma reconcile --yes``: carry out what a check proposed, each action re-checked just before it acts.

The report comes from :func:`vnuma.services.reconciling.check`; every proposed action is done, refused (the
claim check refuses an adoption) or skipped (the VM, its state or its domain changed since the check), and
the report comes back with each outcome. Reconcile changes the inventory only, never libvirt.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from vnuma.errors import ConflictError, HypervisorError, InvalidInputError, NotFoundError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.inventory import open_inventory
from vnuma.services import Settings
from vnuma.services.hypervisors import open_hypervisor
from vnuma.services.reconciling import DEFINED, RUNNING, Action, Finding, HostReport, Outcome, Report

if TYPE_CHECKING:
    from vnuma.inventory.repo import Inventory  # imports SQLAlchemy: only the annotations need it

_SINCE = " since the check"


def carry_out(settings: Settings, report: Report) -> Report:
    """Perform the report's proposed actions, each re-checked first; the report with every outcome.

    Raises:
        ConflictError: a rebalance run is unfinished (nothing is changed).
    """
    with open_inventory(settings.db_url) as inventory:
        run = inventory.unfinished_run()
        if run is not None and report.proposed:
            raise ConflictError(
                f"rebalance run {run.id} is unfinished ({run.status}); reconcile changes nothing meanwhile",
                hint="finish it with `vnuma rebalance --resume` or roll it back with `vnuma rebalance --abort`",
            )
        hosts = [_carry_host(inventory, h) for h in report.hosts]
    return Report(tuple(hosts))


def _carry_host(inventory: Inventory, report: HostReport) -> HostReport:
    pending = [f for f in report.findings if f.outcome is Outcome.PROPOSED]
    if not pending or report.uri is None:
        return report
    try:
        hv = open_hypervisor(inventory, report.host, report.uri)
    except HypervisorError as err:
        return replace(report, findings=tuple(_unreached(f, err) for f in report.findings))
    try:
        return replace(report, findings=tuple(_carry_one(inventory, hv, f) for f in report.findings))
    finally:
        hv.close()


def _unreached(f: Finding, err: HypervisorError) -> Finding:
    return _skipped(f, f"libvirt could not be read ({err})") if f.outcome is Outcome.PROPOSED else f


def _carry_one(inventory: Inventory, hv: Hypervisor, f: Finding) -> Finding:
    if f.outcome is not Outcome.PROPOSED:
        return f
    try:
        return _carry(inventory, hv, f)
    except HypervisorError as err:  # one domain's trouble does not hide what was done to the others
        return _unreached(f, err)


def _skipped(f: Finding, why: str) -> Finding:
    return replace(f, outcome=Outcome.SKIPPED, note=f"left alone: {why}")


def _carry(inventory: Inventory, hv: Hypervisor, f: Finding) -> Finding:
    now = hv.domain_state(f.name)
    if f.action is Action.ADOPT:
        assert f.placement is not None
        if now is DomainState.MISSING:
            return _skipped(f, "the domain vanished" + _SINCE)
        try:
            inventory.claim(f.placement)
        except (ConflictError, NotFoundError, InvalidInputError) as err:
            return replace(f, outcome=Outcome.REFUSED, note=f"refused: {err}")
        inventory.set_vm_state(f.name, RUNNING if now is DomainState.RUNNING else DEFINED)
        return replace(f, outcome=Outcome.DONE, note=f"adopted for tenant {f.placement.tenant!r}")
    try:
        _placement, state = inventory.get_vm(f.name)
    except NotFoundError:
        return _skipped(f, "the VM left the inventory" + _SINCE)
    if str(state) != f.seen_state:
        return _skipped(f, f"its state changed to {state}" + _SINCE)
    if f.action is Action.RELEASE:
        if now is not DomainState.MISSING:
            return _skipped(f, "the domain reappeared" + _SINCE)
        inventory.release(f.name)
        return replace(f, outcome=Outcome.DONE, note="freed its claims")
    assert f.new_state is not None
    if (now is DomainState.RUNNING) != (f.new_state == RUNNING) or now is DomainState.MISSING:
        return _skipped(f, f"libvirt's state changed to {now}" + _SINCE)
    inventory.set_vm_state(f.name, f.new_state)
    return replace(f, outcome=Outcome.DONE, note=f"recorded state {f.new_state}")
