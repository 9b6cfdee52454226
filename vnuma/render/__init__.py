"""Rendering: placement -> view model -> Jinja template -> validated libvirt domain XML.

Reads only template files and libvirt's RelaxNG schema; never talks to
libvirt. Public entry points are re-exported here, loaded when first asked
for (PEP 562), so a caller of one submodule (``render.view``,
``render.nccltopo``) does not load Jinja and the schema validator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnuma.render.domain import render_domain, render_view
    from vnuma.render.metadata import VNUMA_NS, read_metadata
    from vnuma.render.validate import validate_domain
    from vnuma.render.view import DomainView, RenderOptions, build_view, domain_uuid

_EXPORTS = {
    "VNUMA_NS": "vnuma.render.metadata",
    "DomainView": "vnuma.render.view",
    "RenderOptions": "vnuma.render.view",
    "build_view": "vnuma.render.view",
    "domain_uuid": "vnuma.render.view",
    "read_metadata": "vnuma.render.metadata",
    "render_domain": "vnuma.render.domain",
    "render_view": "vnuma.render.domain",
    "validate_domain": "vnuma.render.validate",
}

__all__ = [
    "VNUMA_NS",
    "DomainView",
    "RenderOptions",
    "build_view",
    "domain_uuid",
    "read_metadata",
    "render_domain",
    "render_view",
    "validate_domain",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
