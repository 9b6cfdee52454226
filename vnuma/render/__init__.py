"""Rendering: placement -> view model -> Jinja template -> validated libvirt domain XML.

Reads only template files and libvirt's RelaxNG schema; never talks to
libvirt. Public entry points are re-exported here.
"""

from vnuma.render.domain import render_domain, render_view
from vnuma.render.metadata import VNUMA_NS, read_metadata
from vnuma.render.validate import validate_domain
from vnuma.render.view import DomainView, RenderOptions, build_view, domain_uuid

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
