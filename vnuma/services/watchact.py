"""``vnuma watch --act propose|apply`` and ``vnuma events apply ID``: events become moves, within the budget.

After each round, every open event of a VM (``noisy``, ``capped``, ``remote``) not yet acted on gets a
decision, kept in the inventory (:mod:`vnuma.inventory.history_proposals`) with its reason:

1. the budget is asked first for the event's host (:func:`vnuma.watch.budget.withheld`: its cordon, the moves
   per host and per fleet in the hour; the VM to move is not known yet); with ``--act apply``, an unfinished
   rebalance run withholds every move until it is resumed or aborted;
2. the planners are asked for one move, the rule's objectives in turn (:data:`OBJECTIVES`), first each as a
   re-pin on the event's host (``rebalance --objective O`` on that host), then each on the whole fleet (a
   move leaving the event's host); a move re-places the VM's stored request, as every rebalance move;
3. the budget is asked again with the move planned (its VM: opt-out, cooldown; where it goes: a migration
   needs ``--allow-migrate``, no return to the cells it left).

A move that may go is *proposed* (``--act propose``; ``vnuma events apply ID`` carries it out later) or
carried out at once (``--act apply``) as a journaled rebalance run naming the proposal
(:func:`vnuma.services.rebalance_apply.apply_plan`: ``vnuma rebalance --resume|--abort`` as for any run). A
move withheld is kept with its reason, once per reason and event: an event keeps being decided, round after round,
until a move is proposed for it or it closes, and a new reason is kept again. A proposal whose run is refused
before it begins (a permit missing) changed nothing and no longer counts against the budget; its event is not
decided again (the same move would be refused again): ``vnuma events apply ID`` with the permit carries it out.
A ``cell-drift`` event names memory used outside vnuma: no move of a VM remedies it, and that is said once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import ConflictError, InventoryError, NotFoundError, VnumaError
from vnuma.inventory import history_proposals as decisions
from vnuma.inventory.access import open_access
from vnuma.placement.model import Tenant
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance import Exclusion, Move, Plan
from vnuma.services import Settings
from vnuma.services.permits import granted
from vnuma.services.rebalance_apply import RunReport, apply_plan
from vnuma.services.rebalancing import held_up, plan_rebalance
from vnuma.services.watch import Watch
from vnuma.watch.budget import ACTS, HOST, HOUR_S, MIGRATION, TENANT, VM, Ask, Budget, Counted, verdict, withheld

OBJECTIVES: dict[str, tuple[Objective, ...]] = {
    "noisy": (Objective.BANDWIDTH,),
    "capped": (Objective.BANDWIDTH,),
    "remote": (Objective.LOCALITY, Objective.BANDWIDTH),
}
"""The planners' objectives that remedy each rule, tried in this order."""
NO_MOVE = "cell-drift: memory used outside vnuma; no move of a VM remedies it"
TRIES = 4
"""Plans asked per event and round: the best move, then (each withheld move excluded) the next best ones."""

Say = Callable[[str], None]
Key = tuple[str, str, str, int]


@dataclass(frozen=True, slots=True)
class Fleet:
    """What a decision needs of the inventory: each VM's tenant and host, the cordoned hosts, the tenants
    that opted out, and how many hosts there are."""

    tenant: Mapping[str, str | None]
    host: Mapping[str, str]
    cordoned: frozenset[str]
    opted_out: frozenset[str]
    hosts: int

    def excluding(self, exclusion: Exclusion, move: Move, scope: str) -> Exclusion:
        """``exclusion`` and what the budget's verdict on ``move`` withholds (``scope``): every VM of its tenant,
        the VM, or that destination."""
        if scope in (TENANT, VM):
            tenant = self.tenant.get(move.vm)
            same = {vm for vm, t in self.tenant.items() if t == tenant} if scope == TENANT else set()
            return replace(exclusion, vms=exclusion.vms | {move.vm} | same)
        return replace(exclusion, targets=exclusion.targets | {(move.vm, move.to_host, move.to_cells)})

    def ask(self, vm: str, host: str, at_s: float, move: Mapping[str, Any] | None = None) -> Ask:
        """The budget's question for ``vm`` leaving ``host`` at ``at_s`` (``move``: as planned, or None; ``vm``
        "": any VM of the host, before a plan names one)."""
        tenant = self.tenant.get(vm)
        return Ask(vm, tenant, host, None if move is None else move["to_host"], at_s, self.cordoned,
                   tenant in self.opted_out, None if move is None else tuple(move["to_cells"]))


def move_doc(objective: Objective, move: Move) -> dict[str, Any]:
    """A planned move as a proposal keeps it."""
    return {"objective": str(objective), "vm": move.vm, "from_host": move.from_host,
            "from_cells": list(move.from_cells), "to_host": move.to_host, "to_cells": list(move.to_cells),
            "reason": move.reason, "cost_kib": move.cost_kib, "placement": placement_to_dict(move.placement)}


def plan_of(doc: Mapping[str, Any]) -> Plan:
    """The one-move plan a proposal keeps."""
    move = Move(doc["vm"], doc["from_host"], tuple(doc["from_cells"]), doc["to_host"], tuple(doc["to_cells"]),
                doc["reason"], doc["cost_kib"], placement_from_dict(doc["placement"]))
    return Plan(Objective(doc["objective"]), 0, 0, False, (move,))


def counted(x: Any, at_s: float, budget: Budget, but: int | None = None) -> list[Counted]:
    """The moves the budget counts at ``at_s`` (every one but the proposal ``but``)."""
    since = round((at_s - max(HOUR_S, budget.cooldown_s, budget.return_s)) * 1000)
    return [Counted(vm, host, at / 1000, tuple(move["from_cells"]) if move else ())
            for i, vm, host, at, move in decisions.counted(x, since) if i != but]


def words(move: Mapping[str, Any]) -> str:
    """A proposed move in a few words."""
    what = ("re-pin" if move["to_host"] == move["from_host"] else "migrate")
    where = move["to_host"] if what == "migrate" else move["from_host"]
    return f"{what} {move['vm']} to {where} cells {','.join(map(str, move['to_cells']))} ({move['objective']})"


class Actor:
    """Decides for the open events after each round (see the module docstring), and says what it did."""

    def __init__(self, settings: Settings, budget: Budget, mode: str, say: Say, warn: Say) -> None:
        assert mode in ACTS[1:]
        self.settings, self.budget, self.mode, self.say, self.warn = settings, budget, mode, say, warn
        self._access = open_access(settings.db_url)
        self.proposed = self.applied = self.withheld = 0

    def close(self) -> None:
        self._access.close()

    def after_round(self, watch: Watch, at_s: float) -> None:
        """After a round: decide for the watch's open events; the watch reads the inventory's view again when a
        move was carried out. A busy inventory is a warning (decided again next round)."""
        if not watch.events:
            return
        try:
            if self.act(watch.events, lambda: read_fleet(self.settings), at_s):
                watch.refresh(force=True)
        except InventoryError as err:
            self.warn(f"no decision this round: {err}")

    def act(self, events: Mapping[Key, int], fleet_of: Callable[[], Fleet], at_s: float) -> bool:
        """Decide for each open event of ``events`` not yet acted on (``fleet_of`` reads the inventory, only
        when one is); True when a move was carried out (the watch reads the inventory again)."""
        with self._access.begin(False) as x:
            before = decisions.of_events(x, events.values())
        todo = []
        for key, event_id in sorted(events.items(), key=lambda kv: kv[1]):
            past = before.get(event_id, [])
            if past and (past[-1].status != decisions.WITHHELD or key[0] not in OBJECTIVES
                         or any(d.status == decisions.REFUSED for d in past)):
                continue  # acted on (a proposal refused too: not proposed again), or no move remedies it, said once
            todo.append((key, event_id, {d.reason for d in past}))
        if not todo:
            return False
        fleet = fleet_of()
        moved = False
        for key, event_id, kept in todo:
            moved |= self._decide(key, event_id, fleet, at_s, kept)
        return moved

    def _decide(self, key: Key, event_id: int, fleet: Fleet, at_s: float, kept: set[str]) -> bool:
        rule, host, vm, _cell = key
        if rule not in OBJECTIVES:
            self._withhold(event_id, at_s, host, None, NO_MOVE, kept)
            return False
        with self._access.begin(False) as x:
            reason = withheld(self.budget, fleet.ask("", host, at_s), counted(x, at_s, self.budget))
        if reason is None and self.mode == "apply":
            reason = held_up(self.settings)
        if reason is not None:
            self._withhold(event_id, at_s, host, vm, reason, kept)
            return False
        found = self._admitted(event_id, (rule, host, vm), fleet, at_s, kept)
        if found is None:
            return False
        proposal, doc = found
        self.proposed += 1
        self.say(f"proposal {proposal} for event {event_id} ({rule} VM {vm}): {words(doc)}")
        if self.mode != "apply":
            return False
        try:
            report = carry_out(self.settings, proposal, self.budget, at_s)
        except VnumaError as err:
            self.warn(f"proposal {proposal} not carried out: {err}")
            return True
        self.applied += 1
        self.say(f"proposal {proposal} applied: rebalance run {report.run_id} {report.status}")
        for note in report.notes:  # what the steps could not do, what the cleaning command did
            self.say(f"proposal {proposal}: {note}")
        return True

    def _admitted(self, event_id: int, event: tuple[str, str, str], fleet: Fleet, at_s: float,
                  kept: set[str]) -> tuple[int, dict[str, Any]] | None:
        """The best move the budget lets go for the event (rule, host, VM), kept as a proposal (its id and
        document); None when there is none, and why is kept. Each move the budget withholds is kept with its
        reason and excluded from the next plan (its VM, or that destination, as the budget's verdict says), at
        most :data:`TRIES` plans; a limit on the host, or a migration not allowed (the re-pins come first), ends
        the search. That the planners found nothing is kept
        only when they found nothing at all."""
        rule, host, vm = event
        exclusion = Exclusion()
        tried = False
        for _ in range(TRIES):
            found = self._plan(rule, host, fleet.hosts > 1, exclusion)
            if isinstance(found, str):
                if not tried:
                    self._withhold(event_id, at_s, host, vm, found, kept)
                return None
            tried = True
            objective, move = found
            doc = move_doc(objective, move)
            with self._access.begin(True) as x:
                said = verdict(self.budget, fleet.ask(move.vm, move.from_host, at_s, doc),
                               counted(x, at_s, self.budget))
                if said is None:
                    return decisions.record(x, event_id, round(at_s * 1000), decisions.PROPOSED, move.from_host,
                                            move.reason, vm=move.vm, to_host=move.to_host,
                                            objective=str(objective), move=doc), doc
            reason, scope = said
            self._withhold(event_id, at_s, host, vm, f"{words(doc)}: {reason}", kept)
            if scope in (HOST, MIGRATION):
                break  # nothing from the host may go, or no migration, and the re-pins were tried first
            exclusion = fleet.excluding(exclusion, move, scope)
        return None

    def _withhold(self, event_id: int, at_s: float, host: str, vm: str | None, reason: str,
                  kept: set[str]) -> None:
        """Keep a move withheld, once per reason per event (``kept``: the event's reasons so far)."""
        if reason in kept:
            return
        kept.add(reason)
        with self._access.begin(True) as x:
            decisions.record(x, event_id, round(at_s * 1000), decisions.WITHHELD, host, reason, vm=vm)
        self.withheld += 1
        self.say(f"event {event_id}: no move: {reason}")

    def _plan(self, rule: str, host: str, fleet_wide: bool, exclusion: Exclusion) -> tuple[Objective, Move] | str:
        """The first move the rule's objectives plan, re-pins on ``host`` (every objective) before migrations,
        none that ``exclusion`` names; or why there is none."""
        for where in (host, None) if fleet_wide else (host,):
            for objective in OBJECTIVES[rule]:
                try:
                    plan = plan_rebalance(self.settings, objective, host=where, max_moves=1, exclude=exclusion)
                except VnumaError as err:
                    return f"{objective} plan: {err}"
                moves = [m for m in plan.moves if m.from_host == host]
                if moves:
                    return objective, moves[0]
        names = " or ".join(str(o) for o in OBJECTIVES[rule])
        return f"no move from host {host} improves the {names} objective"


def carry_out(settings: Settings, proposal_id: int, budget: Budget, at_s: float,
              fleet: Fleet | None = None) -> RunReport:
    """Carry the proposal out as a journaled rebalance run naming it, within ``budget`` at ``at_s``.

    Raises:
        NotFoundError: no such proposal (exit 3).
        ConflictError: the proposal was withheld, or is already carried out (or being), or the budget
            withholds it now (the reason kept), or the run is refused (another run unfinished, a permit not
            given: see :func:`apply_plan`; refused before its run began, the reason is kept too, and the
            proposal is marked refused: it no longer counts against the budget).
    """
    with open_access(settings.db_url) as access:
        with access.begin(False) as x:
            found = decisions.get(x, proposal_id)
            runs = decisions.runs(x)
        if found is None:
            raise NotFoundError(f"proposal {proposal_id} is not in the inventory",
                                hint="see the proposals of `vnuma events`")
        if found.status == decisions.WITHHELD or found.move is None:
            raise ConflictError(f"proposal {proposal_id} is a move withheld, not proposed: {found.reason}",
                                hint="see `vnuma events`")
        if proposal_id in runs:
            run_id, status = runs[proposal_id]
            raise ConflictError(
                f"proposal {proposal_id} was already carried out: rebalance run {run_id} ({status})",
                hint="see `vnuma events`" if status in ("done", "aborted")
                else "finish it: vnuma rebalance --resume (carry on) or vnuma rebalance --abort (roll back)")
        fleet = fleet or read_fleet(settings)
        move = found.move
        with access.begin(True) as x:
            reason = withheld(budget, fleet.ask(move["vm"], move["from_host"], at_s, move),
                              counted(x, at_s, budget, but=proposal_id))
            if reason is None:
                decisions.mark_applying(x, proposal_id, round(at_s * 1000))
            else:
                decisions.record(x, found.event_id, round(at_s * 1000), decisions.WITHHELD, found.host,
                                 f"proposal {proposal_id}: {reason}", vm=found.vm)
        if reason is not None:
            raise ConflictError(f"proposal {proposal_id} is withheld: {reason}", hint="see `vnuma events`")
        try:
            return apply_plan(settings, plan_of(move), granted(budget.allow_restart, budget.allow_migrate),
                              origin={"proposal": proposal_id})
        except VnumaError as err:
            with access.begin(True) as x:
                if proposal_id not in decisions.runs(x):  # refused before its run began: nothing changed
                    decisions.mark_refused(x, proposal_id)
                    decisions.record(x, found.event_id, round(at_s * 1000), decisions.WITHHELD, found.host,
                                     f"proposal {proposal_id} not carried out: {err}", vm=found.vm)
            raise


def spent(settings: Settings, budget: Budget, at_s: float) -> str:
    """The budget and what of it the hour before ``at_s`` used, in one line (``vnuma events``)."""
    with open_access(settings.db_url) as access, access.begin(False) as x:
        hour = [c for c in counted(x, at_s, budget) if at_s - HOUR_S < c.at_s <= at_s]
    hosts = sorted({c.host for c in hour})
    used = "".join(f", {h} {sum(1 for c in hour if c.host == h)} of {budget.host_hour}" for h in hosts)
    return (f"budget: {len(hour)} of {budget.fleet_hour} moves in the last hour on the fleet{used} (per host: "
            f"{budget.host_hour}); cooldown {budget.cooldown_s}s, no_return {budget.return_s}s")


def read_fleet(settings: Settings) -> Fleet:
    """The inventory's VMs, cordoned hosts and opted-out tenants, as decisions need them."""
    from vnuma.inventory.reading import open_reader

    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    with open_access(settings.db_url) as access, access.begin(False) as x:
        out = decisions.opted_out(x)
    return Fleet({p.vm: p.tenant for p in snap.placements}, {p.vm: p.host for p in snap.placements},
                 frozenset(h.name for h in snap.hosts if h.cordoned), frozenset(out), len(snap.hosts))


def with_permits(budget: Budget, allow_migrate: bool, allow_restart: bool) -> Budget:
    """The ``[watch]`` budget with the command's permits."""
    return replace(budget, allow_migrate=allow_migrate, allow_restart=allow_restart)


def set_auto_move(settings: Settings, tenant: str, on: bool) -> tuple[bool, Tenant]:
    """Let the watch move ``tenant``'s VMs or not (``tenant update T --auto-move|--no-auto-move``); what it
    was, and the tenant.

    Raises:
        NotFoundError: no such tenant.
    """
    from vnuma.inventory.reading import open_reader

    with open_access(settings.db_url) as access, access.begin(True) as x:
        was = decisions.set_auto_move(x, tenant, on)
    if was is None:
        raise NotFoundError(f"tenant {tenant!r} is not in the inventory", hint="see `vnuma tenant list`")
    with open_reader(settings.db_url) as reader:
        return was, reader.snapshot().tenants[tenant]
