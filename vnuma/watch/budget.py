"""The limits within which the closed loop acts: the one statement of when a move may be proposed or made.

Pure: no I/O. ``vnuma watch --act propose|apply`` and ``vnuma events apply ID`` ask :func:`withheld` before
each move, with the moves already counted (:class:`Counted`: every proposal neither withheld nor refused when
carried out, at the time it was proposed or made), and record the answer: None (the move may go) or the reason it
is withheld. The budget holds whatever the events: however many VMs are noisy at once, a move is only ever admitted when

* the tenant of the VM has not opted out of automatic moves (``tenant update T --no-auto-move``);
* neither the host it leaves nor the one it goes to is cordoned;
* it stays on its host (a re-pin), or migration was allowed (``--allow-migrate``) — the planners are asked
  for a re-pin first, so a migration is only proposed where no re-pin helps;
* it does not take the VM back to the cells it left by a move within ``return_s`` (``no_return``, a day by
  default): two VMs whose loads alternate are moved apart once, never swapped back and forth;
* the VM has not been moved (or proposed for a move) within the cooldown;
* fewer than ``host_hour`` moves left its host, and fewer than ``fleet_hour`` moves were made on the whole
  fleet, in the hour before.

A restart is never decided here: the move's kind is decided when it is carried out, from libvirt
(:mod:`vnuma.services.movekinds`), and a move that needs a stop and start is refused there unless
``--allow-restart`` was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

ACTS = ("off", "propose", "apply")
"""``--act``: measure only, propose moves, or carry them out."""
HOUR_S = 3600


@dataclass(frozen=True, slots=True)
class Budget:
    """The operator's limits (the ``[watch]`` table: ``moves_per_host_hour``, ``moves_per_hour``,
    ``cooldown``, ``no_return``) and the permits of the command that acts (``--allow-migrate``, ``--allow-restart``)."""

    host_hour: int = 2
    fleet_hour: int = 10
    cooldown_s: int = 3600
    return_s: int = 86400
    allow_migrate: bool = False
    allow_restart: bool = False


@dataclass(frozen=True, slots=True)
class Counted:
    """A move that counts against the budget: the VM, the host it leaves, when (Unix seconds), and the cells
    it left there."""

    vm: str
    host: str
    at_s: float
    left: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Ask:
    """A move asked for: ``vm`` of ``tenant`` from ``host`` to ``to_host`` (None: not planned yet, a
    re-pin assumed; ``to_cells``: its cells there) at ``at_s``; ``cordoned``: the fleet's cordoned hosts;
    ``opted_out``: the tenant does not want automatic moves."""

    vm: str
    tenant: str | None
    host: str
    to_host: str | None
    at_s: float
    cordoned: frozenset[str] = frozenset()
    opted_out: bool = False
    to_cells: tuple[int, ...] | None = None


TENANT, VM, MOVE, MIGRATION, HOST = "tenant", "vm", "move", "migration", "host"
"""What a withheld move's limit is about (:func:`verdict`): its tenant (any move of its VMs: an opt-out), its
VM (any move of it: a cooldown), that move alone (where it goes: a cordoned host, a return), any migration (not
allowed), or the host it leaves (any move from it: a cordon, the hourly counts)."""


def withheld(budget: Budget, ask: Ask, counted: Iterable[Counted]) -> str | None:
    """Why ``ask`` may not go now (one sentence, as ``vnuma events`` shows it), or None: it may."""
    found = verdict(budget, ask, counted)
    return None if found is None else found[0]


def verdict(budget: Budget, ask: Ask, counted: Iterable[Counted]) -> tuple[str, str] | None:
    """:func:`withheld`'s reason and what it withholds (:data:`VM`, :data:`MOVE` or :data:`HOST`), or None: the
    move may go. The planners, told to exclude what is withheld, try the next best move."""
    counted = list(counted)
    if ask.opted_out:
        return (f"tenant {ask.tenant} opted out of automatic moves (vnuma tenant update {ask.tenant} --auto-move)",
                TENANT)
    for host in (ask.host, ask.to_host):
        if host is not None and host in ask.cordoned:
            return f"host {host} is cordoned: nothing moves on it", HOST if host == ask.host else MOVE
    if ask.to_host is not None and ask.to_host != ask.host and not budget.allow_migrate:
        return f"no re-pin on {ask.host} helps; migrating {ask.vm} to {ask.to_host} needs --allow-migrate", MIGRATION
    back = [c for c in counted if c.vm == ask.vm and (c.host, c.left) == (ask.to_host, ask.to_cells)
            and ask.at_s - budget.return_s < c.at_s <= ask.at_s]
    if back:
        when = datetime.fromtimestamp(back[-1].at_s, UTC).isoformat(timespec="seconds")
        return (f"{ask.vm} would go back to {ask.to_host} cells {','.join(map(str, back[-1].left))}, which it left "
                f"at {when}: no swap back within no_return in the [watch] table", MOVE)
    hour = [c for c in counted if ask.at_s - HOUR_S < c.at_s <= ask.at_s]
    last = max((c.at_s for c in counted if c.vm == ask.vm and c.at_s <= ask.at_s), default=None)
    if last is not None and ask.at_s - last < budget.cooldown_s:
        until = datetime.fromtimestamp(last + budget.cooldown_s, UTC).isoformat(timespec="seconds")
        return f"VM {ask.vm} is in its cooldown after a move, until {until} (cooldown in the [watch] table)", VM
    on_host = sum(1 for c in hour if c.host == ask.host)
    if on_host >= budget.host_hour:
        return (f"host {ask.host}: {on_host} moves in the last hour, the most allowed "
                "(moves_per_host_hour in the [watch] table)", HOST)
    if len(hour) >= budget.fleet_hour:
        return (f"fleet: {len(hour)} moves in the last hour, the most allowed (moves_per_hour in the [watch] table)",
                HOST)
    return None
