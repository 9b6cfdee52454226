"""The reads of a warm ledger (a serving process's): only what changed since its last read.

Every change to a host or to the VMs on it bumps the host's
``host_generation`` and sets its change mark in the transaction that makes
it (a claim, a release, a move, a refresh, a reservation, a cordon, a device
state; :mod:`.changes`). A process that keeps a ledger between placements
keeps the watermark of its last read; each read (:func:`read_changes`, one
transaction) takes a new watermark with the count of removed hosts and that of
changes to the tenants and the kept MIG geometries (``gpu_profiles``, which
hosts carry but whose change bumps no generation), the marks (id and
generation: a host removed and added again under its name gets a new id) of
just the hosts changed since the old watermark, and the row and placements of
those whose mark moved. When a host's own row, the set of hosts, the tenants
or the kept MIG geometries changed, it reads the whole snapshot again
(:func:`read_warm_snapshot`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vnuma.inventory.changes import CHANGED_SINCE, watermark
from vnuma.inventory.executor import Executor, Row
from vnuma.inventory.reading import Snapshot, decode_placements, read_snapshot
from vnuma.placement.model import Placement

Mark = tuple[int, int]
"""A host's (id, generation)."""

MARKS = "SELECT name, id, host_generation FROM hosts"
ROWS = "SELECT name, uri, source, reserved_cpuset, topology_digest, cordoned, resctrl_policy, device_states FROM hosts"
HOST_ROW = ROWS + " WHERE name = :name"
HOST_VMS = (
    "SELECT v.name, v.placement FROM vms v JOIN hosts h ON h.id = v.host_id WHERE h.name = :name ORDER BY v.name"
)


@dataclass(frozen=True, slots=True)
class Watermark:
    """Where a read left off: changes at or above ``since`` are read next time; ``removed`` counts the hosts
    ever removed and ``catalog`` the changes to the tenants and the MIG geometries (a change in either means
    "read everything")."""

    since: int
    removed: int
    catalog: int = 0


@dataclass(frozen=True, slots=True)
class Changes:
    """The new watermark; the mark of each host changed since the old watermark; the row and the placements of
    each host whose mark moved."""

    watermark: Watermark
    marks: dict[str, Mark]
    rows: dict[str, Row]
    placements: dict[str, list[Placement]]


def _marks(rows: list[Row]) -> dict[str, Mark]:
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def _rows(rows: list[Row]) -> dict[str, Row]:
    return {str(r[0]): tuple(r[1:]) for r in rows}


def read_marks(x: Executor) -> dict[str, Mark]:
    """Every host's mark (equal marks: unchanged hosts and VMs; ``vnuma watch`` reads its view again on a change)."""
    return _marks(x.rows(MARKS))


def read_changes(x: Executor, known: Mapping[str, Mark], since: Watermark) -> Changes:
    """The new watermark, the marks of the hosts changed since ``since``, and the row and placements of each
    of those whose mark is not the ``known`` one."""
    mark, marks_rows = x.batch([(watermark(x), None), (CHANGED_SINCE, {"since": since.since})])
    marks = _marks(marks_rows)
    changed = sorted(name for name, mark in marks.items() if known.get(name) != mark)
    queries = [q for name in changed for q in ((HOST_ROW, {"name": name}), (HOST_VMS, {"name": name}))]
    found = x.batch(queries) if queries else []
    rows = {name: _rows(found[2 * i])[name] for i, name in enumerate(changed) if found[2 * i]}
    placements = {name: decode_placements(found[2 * i + 1]) for i, name in enumerate(changed)}
    return Changes(_watermark(mark), marks, rows, placements)


def _watermark(rows: list[Row]) -> Watermark:
    return Watermark(int(rows[0][0]), int(rows[0][1]), int(rows[0][2]))


WarmSnapshot = tuple[Watermark, dict[str, Mark], dict[str, Row], Snapshot]
"""The watermark, every host's mark and row, and the whole snapshot."""


def read_warm_snapshot(x: Executor) -> WarmSnapshot:
    """The watermark (taken first), every host's mark and row, and the whole snapshot, as one transaction sees
    them."""
    mark, marks, rows = x.batch([(watermark(x), None), (MARKS, None), (ROWS, None)])
    return _watermark(mark), _marks(marks), _rows(rows), read_snapshot(x)
