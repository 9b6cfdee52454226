"""Errors as ``application/problem+json`` (RFC 9457): one status per error class, the CLI's message and hint.

A problem body carries ``type`` (``urn:vnuma:problem:SLUG``), ``title``,
``status``, ``detail`` (the CLI's ``error:`` line), ``hint`` (its ``hint:``
line or null), ``error`` (the class) and ``exit_code`` (what the CLI exits
with for the same error); a refused placement adds ``vm``, ``causes``, ``closest``
and ``rejections`` (every host's, :func:`vnuma.documents.refusal_doc`: what
``place --json`` prints for it). :data:`PROBLEMS` is the table the
manual prints beside the exit codes (``docs/api.md``; a test keeps them equal).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from vnuma.documents import refusal_doc, unfit_list
from vnuma.errors import (
    AuthenticationError,
    ConflictError,
    DeviceStateError,
    ForbiddenError,
    GroupModeError,
    HypervisorError,
    InvalidInputError,
    InventoryError,
    NoPlacementError,
    NoRoomError,
    NotFoundError,
    RenderError,
    VnumaError,
)

MEDIA_TYPE = "application/problem+json"

PROBLEMS: tuple[tuple[type[VnumaError], int, str, str], ...] = (
    (AuthenticationError, 401, "unauthenticated", "no valid token"),
    (ForbiddenError, 403, "forbidden", "the token's role does not allow this"),
    (NotFoundError, 404, "not-found", "unknown host, tenant, VM or token"),
    (NoPlacementError, 409, "no-placement", "no host can take the VM"),
    (NoRoomError, 409, "no-room", "no plan makes room"),
    (ConflictError, 409, "conflict", "conflict with the inventory's state"),
    (GroupModeError, 409, "group-mode", "a replica group is either affine or anti-affine"),
    (DeviceStateError, 409, "device-state", "the device is not in the state the change needs"),
    (InvalidInputError, 422, "invalid-input", "invalid input"),
    (RenderError, 500, "render", "template or rendered domain invalid"),
    (HypervisorError, 502, "hypervisor", "libvirt refused or failed"),
    (InventoryError, 503, "inventory", "inventory unreachable, locked or behind"),
)
"""(error class, HTTP status, type slug, title), most specific class first."""


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    """A problem response; ``extra`` members are added to the body."""
    body = {"type": f"urn:vnuma:problem:{slug}", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)


def from_error(err: VnumaError) -> JSONResponse:
    """The problem response for a vnuma error (an unlisted class: 500)."""
    found = ((status, slug, title) for cls, status, slug, title in PROBLEMS if isinstance(err, cls))
    status, slug, title = next(found, (500, "error", "error"))
    extra: dict[str, Any] = {"hint": err.hint, "error": type(err).__name__, "exit_code": err.exit_code}
    if isinstance(err, NoRoomError) and err.plan is not None:
        extra["plan"] = err.plan
    if isinstance(err, NoPlacementError):
        extra["vm"] = err.vm
        extra.update(refusal_doc(err.rejections))
        extra.update(unfit_list(err.unfit))
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    response = problem(status, slug, title, " ".join(str(err).split("\n")), **extra)
    if headers:
        response.headers.update(headers)
    return response
