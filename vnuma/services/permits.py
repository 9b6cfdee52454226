"""What carrying a plan out may do to a running VM, and the words of the command that grants it.

``rebalance``, ``host drain`` and ``place --rebalance`` grant a stop and start with ``--allow-restart``
and live migration with ``--allow-migrate``; ``vm migrate`` migrates live unless ``--cold`` (a stop and
start); ``vm repin`` re-pins live where it can and otherwise stops and starts the VM, unless ``--live``.
A refused move's hint names the option of the command that carried the plan out, never another's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Permits:
    """``restart``: a running VM may be stopped and started; ``migrate``: migrated live. ``restart_hint``
    and ``migrate_hint`` say how the command grants each ("a stop and start (--allow-restart)"; None: the
    command never needs it)."""

    restart: bool
    migrate: bool
    restart_hint: str
    migrate_hint: str | None


def granted(allow_restart: bool, allow_migrate: bool) -> Permits:
    """The permits of ``rebalance``, ``host drain`` and ``place --rebalance`` (and their API requests)."""
    return Permits(
        allow_restart, allow_migrate,
        restart_hint="a stop and start (--allow-restart)", migrate_hint="live migration (--allow-migrate)",
    )


def repin_permits(live: bool) -> Permits:
    """A re-pin is live where the domain allows; ``live`` forbids the restart otherwise needed. It never
    leaves its host."""
    return Permits(not live, False, restart_hint="a stop and start (leave out --live)", migrate_hint=None)


def migrate_permits(cold: bool) -> Permits:
    """A migration is live, or with ``cold`` a stop and start."""
    return Permits(
        cold, not cold, restart_hint="a stop and start (--cold)", migrate_hint="live migration (leave out --cold)"
    )
