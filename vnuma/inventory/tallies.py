"""What the fleet has done, counted from what the inventory keeps: placements and refusals (the audit log),
moves (the rebalance journal); and each VM's state. SQL text on any :class:`Executor`.

These counts are the inventory's, not a process's: every process that reads them (each ``vnuma serve``
replica and worker, before and after a restart) gets the same figures. The audit log only grows, so it is
read incrementally (:func:`audit_rows` after an id); the journal is small and counted whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from vnuma.inventory.executor import Executor
from vnuma.inventory.reading import STATES

_CLAIM = '%"op": "claim"%'  # how audit.record writes a claim's change (json.dumps, sort_keys, default separators)
_ROWS = (
    "SELECT id, outcome, changes FROM audit_log WHERE id > :after "
    "AND (outcome = 'refused' OR (outcome = 'ok' AND changes LIKE :claim)) ORDER BY id"
)
_SETTLED = "SELECT MAX(id) FROM audit_log WHERE id > :after AND at < :before"
_MOVES = (
    "SELECT r.objective, COUNT(*) FROM rebalance_steps s JOIN rebalance_runs r ON r.id = s.run_id "
    "WHERE s.status IN ('done', 'undoing', 'undone') GROUP BY r.objective ORDER BY r.objective"
)


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit row that counts: a claim (``check`` None), or a refusal (``check``: the check that refused
    the host that came closest, when the refusal was a placement's; else None)."""

    id: int
    refused: bool
    check: str | None


def audit_rows(x: Executor, after: int) -> list[AuditRow]:
    """The claims and refusals logged with an id above ``after``, in id order."""
    out = []
    for row_id, outcome, changes in x.rows(_ROWS, {"after": after, "claim": _CLAIM}):
        refused = outcome == "refused"
        check = None
        if refused:
            attempts = json.loads(str(changes)).get("changes", [])
            check = next((str(c["check"]) for c in attempts if c.get("check")), None)
        out.append(AuditRow(int(row_id), refused, check))
    return out


def settled_id(x: Executor, after: int, before: str) -> int:
    """The highest audit id above ``after`` logged before ``before`` (an ISO time, UTC), else ``after``."""
    row = x.one(_SETTLED, {"after": after, "before": before})
    return int(row[0]) if row is not None and row[0] is not None else after


def moves_by_objective(x: Executor) -> dict[str, int]:
    """Journaled moves carried out (finished, including those undone later), by the objective of their run."""
    return {str(objective): int(n) for objective, n in x.rows(_MOVES)}


def vm_states(x: Executor) -> dict[str, str]:
    """Every VM's state, by name (without decoding placements)."""
    return {str(name): str(state) for name, state in x.rows(STATES)}
