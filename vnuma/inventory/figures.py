"""The figures a claim keeps on its host's row: what the engine's scorers read of the host, so a placement can
rank claimed hosts without decoding them (:func:`vnuma.inventory.narrowed.read_narrowed`).

One rule, written here: the statement that counts a change to a host (:mod:`.changes`, the ORM's
``bump_generation``) clears them, and the claim and move batches (:mod:`.placing`) then set them on the host
that took the VM from its own one-host ledger, after the claim (:meth:`FleetArrays.figures
<vnuma.placement.ledger.arrays.FleetArrays.figures>`). A host whose last change was anything else (a release, a
device state, a reservation, a refresh) keeps none until its next claim, and a read decodes it. ``vnuma db
check`` compares kept figures with the ledger's (:mod:`.dbcheck`).
"""

from __future__ import annotations

from vnuma.placement.ledger.kinds import FIGURES

COLUMNS = tuple(f"fig_{name}" for name in FIGURES)
"""The hosts table's columns, in :data:`~vnuma.placement.ledger.arrays.FIGURES` order (NULL: none kept)."""
CLEARED = ", ".join(f"{column} = NULL" for column in COLUMNS)
"""The SET list that clears them (part of every change's statement)."""
SET = f"UPDATE hosts SET {', '.join(f'{c} = :{c}' for c in COLUMNS)} WHERE id = :host"
KEPT = f"SELECT name, {', '.join(COLUMNS)} FROM hosts WHERE {COLUMNS[0]} IS NOT NULL"
"""Every host with figures kept: its name, then the figures."""


def params(host_id: int, figures: tuple[int, ...]) -> dict[str, int]:
    """:data:`SET`'s parameters for host ``host_id`` keeping ``figures``."""
    return {"host": host_id, **dict(zip(COLUMNS, figures, strict=True))}
