"""The planner's working fleet: apply and undo moves, engine re-placements, the clock.

Pure: no I/O (the clock is passed in). Every candidate move is a real
:func:`~vnuma.placement.engine.place` on the working fleet with the VM
itself removed first, so it only ever uses capacity free at that step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from vnuma.placement.engine import place
from vnuma.placement.kept import move_request
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import IoThreadPolicy, Isolation, Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance.base import FleetState, Move, Plan, VmLoad


class Deadline(Exception):
    """The time limit passed (internal: the planners catch it and return the best found)."""


class Search:
    """A working fleet with apply/undo, a per-host VM index, the clock and cached empty-host answers;
    ``loads``: the measured bandwidth of the state (by VM)."""

    def __init__(self, state: FleetState, time_limit_s: float, clock: Callable[[], float] | None) -> None:
        # The time limit counts from here: building the working fleet (~1 s at 1,000 hosts) is planning time.
        self.clock = clock
        self.deadline = clock() + time_limit_s if clock is not None else 0.0
        self.fleet = Fleet(state.hosts, state.placements, state.isolation)
        self.isolation = dict(state.isolation)
        self.loads: Mapping[str, VmLoad] = state.loads
        self.excluded = state.excluded
        self.on_host: dict[str, set[str]] = {name: set() for name in self.fleet.host_names()}
        for p in state.placements:
            self.on_host[p.host].add(p.vm)
        self._fewest: dict[tuple[int, VmRequest], int] = {}
        self._empty: dict[int, Fleet] = {}

    def remaining(self, time_limit_s: float) -> float:
        """Seconds left before the deadline (without a clock: the whole ``time_limit_s``)."""
        return self.deadline - self.clock() if self.clock is not None else time_limit_s

    def first_half(self, time_limit_s: float, plan: Callable[[], Plan]) -> Plan:
        """``plan()`` with half the time limit from now (the rest is a solver's), never past the plan's own."""
        deadline = self.deadline
        if self.clock is not None:
            self.deadline = min(deadline, self.clock() + time_limit_s / 2)
        try:
            return plan()
        finally:
            self.deadline = deadline

    def tick(self) -> None:
        """Raise :class:`Deadline` once the time limit has passed."""
        if self.clock is not None and self.clock() > self.deadline:
            raise Deadline

    def iso(self, tenant: str) -> Isolation:
        """A tenant's isolation (``core`` when unknown, as the fleet assumes)."""
        return self.isolation.get(tenant, Isolation.CORE)

    def placements_on(self, host: str) -> list[Placement]:
        """The placements on ``host`` now, in VM name order."""
        found = (self.fleet.placement(vm) for vm in sorted(self.on_host[host]))
        return [p for p in found if p is not None]

    def apply(self, old: Placement, new: Placement) -> None:
        """Replace ``old`` by ``new`` in the working fleet (undo: ``apply(new, old)``)."""
        self.fleet.remove(old.vm)
        self.on_host[old.host].discard(old.vm)
        # The engine admitted ``new`` on exactly this state (``old`` removed), and an undo
        # restores what was there: both are recorded as they are.
        self.fleet.record(new)
        self.on_host[new.host].add(new.vm)

    def cpu_cells(self, host: str) -> int:
        """How many CPU (guest-capable) cells ``host`` has."""
        return len(self.fleet.state(host).shape.cells)

    def fewest_cells(self, p: Placement) -> int:
        """Guest cells the engine gives ``p`` alone on an empty host of its shape: with its GPUs on its
        cells when that fits there, else without GPUs (its cell count when nothing fits)."""
        shape = self.fleet.state(p.host).shape
        alone = replace(move_request(p, Isolation.CORE), tenant=None, host=None)
        for req in (alone, _without_gpus(alone)) if alone.gpus else (alone,):
            key = (id(shape), req)
            if key not in self._fewest:
                empty = self._empty.get(id(shape))
                if empty is None:
                    empty = self._empty[id(shape)] = Fleet([shape.host])
                chosen = place(req, empty, Strategy.PACK, explain=False).chosen
                self._fewest[key] = len(chosen.cells) if chosen is not None else 0
            if self._fewest[key]:
                return self._fewest[key]
        return len(p.cells)

    def fits(self, request: VmRequest) -> bool:
        """Does ``request`` fit on the working fleet now?"""
        self.tick()
        return place(request, self.fleet, Strategy.PACK, explain=False).chosen is not None

    def replace_vm(self, old: Placement, req: VmRequest, blocked: frozenset[int] | None) -> Placement | None:
        """:meth:`refit` with ``old``'s host's ``blocked`` cells avoided (None: its whole host)."""
        if blocked is None:
            req = replace(req, avoid_hosts=req.avoid_hosts | {old.host})
        else:
            req = replace(req, avoid_cells=req.avoid_cells | {(old.host, c) for c in blocked})
        return self.refit(old, req)

    def refit(self, old: Placement, req: VmRequest) -> Placement | None:
        """The engine's placement of ``req`` with ``old`` removed; None when nothing fits or it lands on
        ``old``'s host and cells with its devices, or ``old``'s VM is excluded. A destination the state's
        exclusion bars is avoided and the engine asked again (its next best). The fleet is left as it was."""
        if old.vm in self.excluded.vms:
            return None
        self.tick()
        self.fleet.remove(old.vm)
        try:
            chosen = place(req, self.fleet, Strategy.PACK, explain=False).chosen
            while chosen is not None and self.excluded.bars(old.vm, chosen):
                req = replace(req, avoid_cells=req.avoid_cells | {(chosen.host, c) for c in chosen.host_cells})
                chosen = place(req, self.fleet, Strategy.PACK, explain=False).chosen
        finally:
            self.fleet.record(old)
        same = chosen is not None and (chosen.host, chosen.host_cells, chosen.devices) == (
            old.host, old.host_cells, old.devices)
        if chosen is None or same:
            return None
        return chosen


def _without_gpus(req: VmRequest) -> VmRequest:
    """``req`` without its GPUs, nor what only GPUs allow (per-cell GPU counts, NICs near them, iothreads on a
    device's cell)."""
    policy = IoThreadPolicy.EMULATOR if req.iothread_policy is IoThreadPolicy.DEVICE_LOCAL else req.iothread_policy
    return replace(req, gpus=0, cell_gpus=None, nics=0, nics_per_gpu=False, iothread_policy=policy)


def greedy(
    search: Search,
    objective: Objective,
    before: int,
    best_step: Callable[[Search], tuple[int, Move] | None],
    max_moves: int,
) -> Plan:
    """Apply the best step (gain, move) until none gains, ``max_moves`` or the deadline; optimal at 0."""
    total, moves = before, []
    try:
        for _ in range(max_moves):
            found = best_step(search)
            if found is None:
                break
            gain, move = found
            old = search.fleet.placement(move.vm)
            assert old is not None
            search.apply(old, move.placement)
            moves.append(move)
            total -= gain
    except Deadline:
        pass
    return Plan(objective, before, total, total == 0, tuple(moves))
