"""``vnuma device taint ... --effect drain``: taint the device, then plan (and carry out as a journaled run)
moving every VM holding it off it (:func:`vnuma.placement.rebalance.devicedrain.plan_device_drain`).

The run is the rebalance journal's (:mod:`vnuma.services.rebalance_apply`): ``vnuma rebalance --resume`` or
``--abort`` finishes or rolls back an interrupted one, and an abort puts each moved VM back onto the device
(admission lets a VM ``returning`` by an undo back onto its tainted device).
"""

from __future__ import annotations

from typing import Any

from vnuma.errors import NoRoomError
from vnuma.inventory.reading import open_reader
from vnuma.placement.rebalance.base import FleetState, Plan
from vnuma.placement.rebalance.devicedrain import plan_device_drain
from vnuma.services import Settings, failpoints
from vnuma.services.devices import Changed, taint
from vnuma.services.rebalancing import refuse_unfinished_run
from vnuma.topology import count_of
from vnuma.topology.devstates import TaintEffect


def drain_device(
    settings: Settings, host: str, device: str, reason: str, *, for_apply: bool = False, who: str | None = None
) -> tuple[Changed, Plan]:
    """Taint ``device`` of ``host`` with effect ``drain`` (first: a VM placed meanwhile cannot take it), then plan
    moving each VM holding it off it.

    Raises:
        NotFoundError: unknown host or device.
        InvalidInputError: an empty reason.
        ConflictError: ``for_apply`` and a rebalance run is unfinished (nothing is tainted then).
    """
    if for_apply:
        refuse_unfinished_run(settings)
    changed = taint(settings, host, device, reason, TaintEffect.DRAIN, who)
    failpoints.reached("tainted")
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    state = FleetState(tuple(snap.hosts), tuple(sorted(snap.placements, key=lambda p: (p.host, p.vm))),
                       {name: t.isolation for name, t in snap.tenants.items()})
    return changed, plan_device_drain(state, host, changed.address)


def device_drain_refusal(host: str, address: str, plan: Plan, partial: bool, doc: dict[str, Any]) -> NoRoomError | None:
    """A device drain that would leave VMs on the device moves nothing unless ``partial``: the refusal (exit 5,
    carrying the plan's document ``doc``), or None."""
    if not plan.left or partial:
        return None
    vm, why = plan.left[0]
    return NoRoomError(
        f"device {address} of host {host}: {count_of(len(plan.left), 'VM')} cannot leave it ({vm}: {why}); "
        "nothing was moved",
        hint="--partial moves the others; or release, resize or make room for what stays", plan=doc,
    )
