"""How a VM's domain was rendered, as the inventory keeps it: the render options and operator template.

Light: imports neither SQLAlchemy nor libvirt, so read commands (``vm guest-view --nccl-topo``) use it too.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

from vnuma.errors import InventoryError
from vnuma.render.view import RenderOptions


def rendering_doc(options: RenderOptions, template: Path | None) -> dict[str, object]:
    """What the inventory records of how a domain was rendered."""
    return {"options": asdict(options), "template": str(template) if template is not None else None}


def rendering_of(doc: dict[str, object] | None) -> tuple[RenderOptions, Path | None]:
    """Render options and template back from :func:`rendering_doc` (defaults when never applied).

    Raises:
        InventoryError: a stored document this vnuma cannot read.
    """
    if doc is None:
        return RenderOptions(), None
    raw, template = doc.get("options"), doc.get("template")
    names = {f.name for f in fields(RenderOptions)}
    if not isinstance(raw, dict) or not set(raw) <= names or not isinstance(template, str | None):
        raise InventoryError(f"inventory: stored rendering {doc!r} is unreadable")
    options = RenderOptions(**{k: v for k, v in raw.items() if _chosen(k, v)})
    return options, Path(template) if template is not None else None


def _chosen(key: str, value: object) -> bool:
    """Whether a stored option was chosen: before the guest followed the host's arch, every rendering recorded
    arch x86_64 and machine q35, which no option could set (they stand for "the host's")."""
    return (key, value) not in (("arch", "x86_64"), ("machine", "q35"))
