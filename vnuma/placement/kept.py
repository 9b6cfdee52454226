"""The request a placement keeps, as its VM asked it, and what every move asks again.

Pure: no I/O. A placement keeps its request (:attr:`vnuma.placement.model.Placement.request`): the engine's own
request object for a placement it made, or the stored document (:func:`vnuma.placement.asks.as_asked`'s form)
for one read from the inventory. :func:`kept_request` reads either; :func:`move_request` is what a move asks;
:func:`for_tenant` completes a new VM's request once, when it is placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from vnuma.placement.asks import ASKS, as_asked, request_from, written_default
from vnuma.placement.model import Isolation, Placement, Tenant, VmRequest
from vnuma.placement.resctrl import with_tenant_slices

RECONSTRUCTED = "reconstructed"
"""A stored request's mark (``"reconstructed": true``): rebuilt from where the VM was when vnuma did not keep
requests yet (the inventory's revision 0018, or a domain adopted without vnuma's request in its metadata)."""


def kept_request(p: Placement) -> VmRequest:
    """The request ``p``'s VM keeps, as asked (see :attr:`Placement.request`).

    Raises:
        InvalidInputError: a stored request that cannot be read.
    """
    kept = p.request
    if isinstance(kept, VmRequest):
        return kept
    assert kept is not None, f"placement of VM {p.vm!r} keeps no request"
    found = _READ.get(id(kept))
    if found is not None and found[0] is kept:  # a planner asks a VM's request many times
        return found[1]
    req = request_from({k: v for k, v in kept.items() if k != RECONSTRUCTED})
    if len(_READ) > 1 << 16:
        _READ.clear()
    _READ[id(kept)] = (kept, req)
    return req


_READ: dict[int, tuple[Mapping[str, Any], VmRequest]] = {}
"""Stored requests read once each (the document is held, so its id is not reused while it is here)."""


def kept_document(p: Placement) -> dict[str, Any] | None:
    """The request ``p``'s VM keeps as its document is stored: :func:`as_asked`, marked when reconstructed; an
    option a stored document predates (``alternatives``) written with its default, as it is read."""
    kept = p.request
    if kept is None or isinstance(kept, VmRequest):
        return None if kept is None else as_asked(kept)
    return {**{a.name: written_default(a) for a in ASKS if a.name not in kept}, **kept}


def move_request(p: Placement, isolation: Isolation) -> VmRequest:
    """What a move asks for ``p``'s VM: the request it keeps, with its tenant's isolation and none of the
    confinement its placement used (``--host``; the hosts and cells a move avoided)."""
    return replace(kept_request(p), isolation=isolation, host=None, avoid_hosts=frozenset(),
                   avoid_cells=frozenset())


def for_tenant(req: VmRequest, tenant: Tenant) -> VmRequest:
    """A new VM's request as its tenant completes it: the tenant's isolation, and the tenant's cache slice and
    bandwidth cap where the request asks none of its own (:func:`vnuma.placement.resctrl.with_tenant_slices`).
    Applied once, when the VM is placed: a later change of the tenant's defaults changes no VM's request."""
    return replace(with_tenant_slices(req, tenant), isolation=tenant.isolation)
