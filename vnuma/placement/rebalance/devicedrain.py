"""A device drain: move every VM holding one device off it, each re-placed by its stored request.

Pure: no I/O. The device is tainted before the plan is made, so the fleet's ledger already keeps it from every
new claim (admission's ``device-taint``): re-placing a VM's stored request on that ledger is re-placing it
with the device excluded, while the rest of its host stays usable (the engine may keep it there on other
devices). A VM that fits nowhere else stays, with the reason. Work bound: one engine placement per VM holding
the device.
"""

from __future__ import annotations

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import FleetState, Move, Plan, is_movable, make_move
from vnuma.placement.rebalance.drain import largest_first, try_unit
from vnuma.placement.rebalance.search import Search


def holds(p: Placement, address: str) -> bool:
    """Whether ``p`` holds ``address``: passed through, or a partition's GPU or vGPU VF on it."""
    return any(d.address == address for d in p.devices) or any(
        a.gpu == address or a.vf == address for a in p.partitions)


def plan_device_drain(state: FleetState, host: str, address: str) -> Plan:
    """Move each VM of ``host`` holding ``address`` (largest first) to where the engine places its stored
    request now; ``before``/``after``: the VMs holding it before and after the plan, ``left`` (VM, why) for
    each that stays."""
    search = Search(state, 0.0, None)
    holding = sorted((p for p in search.placements_on(host) if holds(p, address)), key=largest_first)
    moves: list[Move] = []
    left: list[tuple[str, str]] = []
    for p in holding:
        if not is_movable(p):
            left.append((p.vm, "it holds devices a move does not re-place (NICs placed before vnuma recorded how "
                               "they were asked, or other devices)"))
            continue
        placed, why = try_unit(search, [p], lambda m, _target: move_request(m, search.iso(m.tenant)), explain=True)
        if not placed:
            left.append((p.vm, f"fits nowhere without device {address} ({why})"))
            continue
        old, new = placed[0]
        search.apply(old, new)
        moves.append(make_move(old, new, f"drain device {address} of host {host}"))
    return Plan(Objective.DRAIN, len(holding), len(left), not left, tuple(moves), tuple(left))
