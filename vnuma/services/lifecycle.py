"""``vnuma vm repin`` and ``vnuma vm migrate``: one VM re-fitted on its host or on another, as a one-move plan.

The new placement is the engine's, on the fleet as the inventory holds it
with the VM itself left out, from the VM's own request as it was asked
(:func:`vnuma.placement.kept.move_request`: its size, policies, page size,
guest shape and GPU affinity; a VM placed with ``auto`` may change its cell
count). The plan is
carried out by the journaled rebalance run (:mod:`.rebalance_apply`): the
claims move in one transaction, then libvirt changes, so a failure leaves
the old or the new placement claimed, never both or neither, for
``vnuma rebalance --resume`` or ``--abort``.
"""

from __future__ import annotations

from dataclasses import replace

from vnuma.errors import ConflictError, InvalidInputError, NotFoundError
from vnuma.inventory.reading import Snapshot, open_reader
from vnuma.placement.engine import no_placement, place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance.base import Plan, is_movable, make_move
from vnuma.services import Settings
from vnuma.topology import DeviceKind, format_cpuset


def plan_repin(settings: Settings, vm: str, cells: frozenset[int] | None = None) -> Plan:
    """The VM re-fitted on its own host (on ``cells`` only, when given); no moves when the engine keeps it.

    Raises:
        NotFoundError: unknown VM.
        InvalidInputError: ``cells`` the host lacks, or fewer than the guest cells the VM asked for.
        NoPlacementError: it fits nowhere on its host now (exit 5, the host's reason).
    """
    snap, p = _read(settings, vm)
    host = next(h for h in snap.hosts if h.name == p.host)
    avoid: frozenset[tuple[str, int]] = frozenset()
    if cells is not None:
        have = {c.id for c in host.cells if c.cpus}
        if not cells or not cells <= have:
            raise InvalidInputError(
                f"--cells {format_cpuset(cells) or '(none)'}: host {host.name!r} has CPU cells {format_cpuset(have)}"
            )
        if p.numa_nodes is not None and len(cells) < p.numa_nodes:
            raise InvalidInputError(
                f"VM {vm!r} asked for {p.numa_nodes} guest cells; --cells gives {len(cells)}",
                hint="give at least as many host cells",
            )
        avoid = frozenset((host.name, c) for c in have - cells)
    new = _refit(snap, p, host.name, avoid)
    if _same(p, new):
        return Plan(Objective.REPIN, 0, 0, True, ())
    return Plan(Objective.REPIN, 1, 0, True, (make_move(p, new, "repin"),))


def plan_migrate(settings: Settings, vm: str, to: str) -> Plan:
    """The VM re-fitted on host ``to``.

    Raises:
        NotFoundError: unknown VM or host.
        InvalidInputError: ``to`` is the VM's own host (that is a repin).
        ConflictError: ``to`` is cordoned.
        NoPlacementError: it does not fit on ``to`` (exit 5, the reason).
    """
    snap, p = _read(settings, vm)
    dest = next((h for h in snap.hosts if h.name == to), None)
    if dest is None:
        raise NotFoundError(f"host {to!r} is not in the inventory", hint="see `vnuma host list`")
    if to == p.host:
        raise InvalidInputError(
            f"VM {vm!r} is already on host {to!r}", hint=f"re-fit it there with `vnuma vm repin {vm}`"
        )
    if dest.cordoned:
        raise ConflictError(
            f"host {to!r} is cordoned: it takes no incoming moves", hint=f"`vnuma host uncordon {to}` first"
        )
    new = _refit(snap, p, to, frozenset())
    return Plan(Objective.MIGRATE, 1, 0, True, (make_move(p, new, f"migrate to {to}"),))


def _read(settings: Settings, vm: str) -> tuple[Snapshot, Placement]:
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    p = next((q for q in snap.placements if q.vm == vm), None)
    if p is None:
        raise NotFoundError(f"VM {vm!r} is not in the inventory", hint="see `vnuma vm list`")
    return snap, p


def _refit(snap: Snapshot, p: Placement, host: str, avoid: frozenset[tuple[str, int]]) -> Placement:
    if not is_movable(p):
        others = sorted(d.address for d in p.devices if d.kind is not DeviceKind.GPU and d.peer_of is None)
        raise ConflictError(
            f"VM {p.vm!r} holds devices vnuma does not move ({', '.join(others)}: not GPUs, or NICs placed before "
            "vnuma recorded how they were asked)",
            hint=f"release and place it again: vnuma vm release {p.vm}",
        )
    fleet = Fleet(snap.hosts, snap.placements, snap.tenants.values())
    fleet.remove(p.vm)
    isolation = snap.tenants[str(p.tenant)].isolation  # a tenant with VMs cannot be removed
    req: VmRequest = replace(move_request(p, isolation), host=host, avoid_cells=avoid)
    result = place(req, fleet, Strategy.PACK, explain=True)
    if result.chosen is not None:
        return result.chosen
    refused = no_placement(p.vm, result)
    refused.hint = refused.hint or f"see each cell's free pCPUs, memory and devices: vnuma stats --host {host}"
    raise refused


def _same(old: Placement, new: Placement) -> bool:
    """The engine kept the VM where it is (same host, cells, pCPUs, emulator pCPUs and devices)."""
    where = (old.host, old.cells, old.emulator_pcpus, old.devices)
    return where == (new.host, new.cells, new.emulator_pcpus, new.devices)
