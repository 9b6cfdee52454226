"""MIG geometries by GPU model: import (add or replace), list, remove (SQL text on any :class:`Executor`).

A row keeps the geometry as its profile file's JSON (:func:`vnuma.sources.migprofiles.profile_document`),
read back through the same checks as a file, and the PCI ids it matches. Changes are logged in the same
transaction (:mod:`.audit`).
"""

from __future__ import annotations

import json
from functools import lru_cache

from vnuma.errors import ConflictError, NotFoundError
from vnuma.inventory import audit
from vnuma.inventory.executor import Executor, Refused, Row
from vnuma.sources.migprofiles import parse_profile, profile_document
from vnuma.topology.mig import MigGeometry

_HINT = "see `vnuma gpu-profile list`"


def save_profile(x: Executor, g: MigGeometry, imported_at: str, *, replace: bool) -> bool:
    """Store ``g`` under its model; True when it replaced a stored one.

    Raises:
        ConflictError: the model is stored and ``replace`` is false, or another GPU model's geometry
            claims one of its PCI ids.
    """
    stored = list_profiles(x)
    old = next((s for s in stored if s.model == g.model), None)
    if old is not None and not replace:
        raise ConflictError(f"GPU model {g.model!r} already has a MIG profile",
                            hint="add --replace to replace it, or `vnuma gpu-profile remove` it first")
    for other in stored:
        shared = sorted(set(other.pci_ids) & set(g.pci_ids))
        if other.model != g.model and shared:
            raise ConflictError(f"PCI id {shared[0]} already belongs to GPU model {other.model!r}", hint=_HINT)
    params = {"model": g.model, "pci_ids": json.dumps(list(g.pci_ids)),
              "document": json.dumps(profile_document(g)), "imported_at": imported_at}
    if old is not None:
        x.run("UPDATE gpu_profiles SET pci_ids = :pci_ids, document = :document, imported_at = :imported_at "
              "WHERE model = :model", params)
    else:
        try:
            x.run("INSERT INTO gpu_profiles (model, pci_ids, document, imported_at) "
                  "VALUES (:model, :pci_ids, :document, :imported_at)", params)
        except Refused as err:  # a concurrent import of the same model
            raise ConflictError(f"GPU model {g.model!r} already has a MIG profile", hint=_HINT) from err
    audit.record(x, "gpu-profile-import", model=g.model, replaced=old is not None,
                 profiles=[p.name for p in g.profiles])
    return old is not None


PROFILES = "SELECT model, document FROM gpu_profiles ORDER BY model"


def list_profiles(x: Executor) -> list[MigGeometry]:
    """Every stored geometry, by model."""
    return decode_profiles(x.rows(PROFILES))


def decode_profiles(rows: list[Row]) -> list[MigGeometry]:
    """The geometries of the rows :data:`PROFILES` returned."""
    return [_decoded(str(model), str(document)) for model, document in rows]


@lru_cache(maxsize=256)
def _decoded(model: str, document: str) -> MigGeometry:
    # Geometries are immutable and the text is the whole input: every snapshot and claim reads them.
    return parse_profile(document, "json", origin=f"stored MIG profile {model!r}")


def remove_profile(x: Executor, model: str) -> None:
    """Forget the geometry of ``model``.

    Raises:
        NotFoundError: no geometry of that model is stored.
    """
    if x.one("SELECT 1 FROM gpu_profiles WHERE model = :model", {"model": model}) is None:
        raise NotFoundError(f"no MIG profile for GPU model {model!r}", hint=_HINT)
    x.run("DELETE FROM gpu_profiles WHERE model = :model", {"model": model})
    audit.record(x, "gpu-profile-remove", model=model)
