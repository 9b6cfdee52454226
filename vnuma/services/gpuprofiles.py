"""MIG geometries by GPU model: read one (a profile file, a shipped one, or saved nvidia-smi text) and keep,
list or forget it in the inventory.

The inventory only knows the geometries imported into it: the two vnuma ships
(``vnuma gpu-profile list --shipped``) are imported by name like a file, so
what placement uses is always what an operator chose. A GPU takes the geometry
whose PCI ids list its ``vendor:device`` (:func:`vnuma.topology.mig.geometry_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.inventory.access import open_access
from vnuma.inventory.gpuprofiles import list_profiles, remove_profile, save_profile
from vnuma.services import Settings
from vnuma.services.files import read_input
from vnuma.sources.migprofiles import (
    DEMO_PROFILE,
    demo_geometry,
    geometry_from_nvidia_smi,
    parse_profile,
    profile_document,
    shipped_profiles,
)
from vnuma.topology.mig import MigGeometry

FORMATS = {".toml": "toml", ".json": "json"}


def document(g: MigGeometry) -> dict[str, Any]:
    """``g`` as JSON: the profile file's keys (``gpu-profile list/show/import --json``)."""
    return profile_document(g)


def shipped() -> dict[str, MigGeometry]:
    """The geometries vnuma ships, by name (``a100-sxm4-40gb``)."""
    return shipped_profiles()


def read_geometry(
    source: str, *, lgipp: Path | None = None, model: str | None = None, pci_ids: Sequence[str] = (),
    gpu: int | None = None,
) -> MigGeometry:
    """The geometry ``source`` names: a shipped one's name, ``demo`` (the demo host's GPUs), a ``.toml``/``.json``
    profile file, or (with ``lgipp``) saved ``nvidia-smi mig -lgip`` text beside the ``-lgipp`` text, for GPU
    model ``model``.

    Raises:
        InvalidInputError: an unreadable or invalid file (:class:`~vnuma.topology.mig.ProfileError`), an
            unknown name, or nvidia-smi text without ``model``.
    """
    if lgipp is not None:
        if not model:
            raise InvalidInputError("nvidia-smi text does not name the GPU model",
                                    hint="add --model 'NVIDIA H100 80GB HBM3' (the name nvidia-smi -L prints)")
        lgip_text = read_input(Path(source), "nvidia-smi -lgip").decode("utf-8", "replace")
        lgipp_text = read_input(lgipp, "nvidia-smi -lgipp").decode("utf-8", "replace")
        return geometry_from_nvidia_smi(lgip_text, lgipp_text, model=model, gpu=gpu, pci_ids=tuple(pci_ids),
                                        source=f"nvidia-smi mig -lgip ({source}) and -lgipp ({lgipp})")
    if model or pci_ids or gpu is not None:
        raise InvalidInputError("--model, --pci-id and --gpu go with nvidia-smi text (--lgipp FILE)",
                                hint="a profile file names its model and PCI ids itself")
    path = Path(source)
    if path.suffix in FORMATS:
        return parse_profile(read_input(path, "MIG profile"), FORMATS[path.suffix], origin=str(path))  # type: ignore[arg-type]
    if source == DEMO_PROFILE:
        return demo_geometry()
    known = shipped()
    if source in known:
        return known[source]
    raise InvalidInputError(
        f"{source!r} is neither a .toml/.json profile file nor a shipped profile",
        hint=f"shipped: {', '.join(known)} (vnuma gpu-profile list --shipped), and {DEMO_PROFILE} for the demo "
        "host's GPUs; nvidia-smi text needs --lgipp FILE",
    )


def import_geometry(settings: Settings, geometry: MigGeometry, *, replace: bool = False) -> bool:
    """Keep ``geometry`` for its GPU model; True when it replaced the one kept before.

    Raises:
        ConflictError: the model is kept already (without ``replace``), or another model claims its PCI ids.
    """
    at = datetime.now(UTC).isoformat(timespec="seconds")
    with open_access(settings.db_url) as access, access.begin(True) as x:
        return save_profile(x, geometry, at, replace=replace)


def geometries(settings: Settings) -> list[MigGeometry]:
    """The geometries kept in the inventory, by model."""
    with open_access(settings.db_url) as access, access.begin(False) as x:
        return list_profiles(x)


def remove(settings: Settings, model: str) -> None:
    """Forget the geometry of GPU model ``model``.

    Raises:
        NotFoundError: none is kept for it.
    """
    with open_access(settings.db_url) as access, access.begin(True) as x:
        remove_profile(x, model)
