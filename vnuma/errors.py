"""The one error hierarchy of vnuma; each class carries its process exit code.

User errors are `VnumaError` subclasses: the CLI prints them as one
``error: ...`` line (plus an optional ``hint: ...``) and exits with
``exit_code``. Programming mistakes are asserts or RuntimeError, never these.
"""

from __future__ import annotations

from typing import Any


class VnumaError(Exception):
    """Base of every user-facing error (exit 1; never raised directly)."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class NotFoundError(VnumaError):
    """An unknown host, tenant or VM."""

    exit_code = 3


class InvalidInputError(VnumaError):
    """Malformed input: XML, cpuset, size, request options, trace files."""

    exit_code = 4


class InputTooLargeError(InvalidInputError):
    """An input file larger than the cap set for it (``simulate --max-input-size``): exit 15, so a script can
    tell it from a malformed file and raise the cap."""

    exit_code = 15


class OptionsError(InvalidInputError):
    """Options that need or exclude each other (``--affinity`` without ``--group``): a usage error, exit 2
    as Click's own."""

    exit_code = 2


class OtherHostFileError(InvalidInputError):
    """A file saved on another host: none of the devices it names is the host's (exit 4, as a file of the
    wrong kind); the message names the devices it names and the host's."""


class ConfigError(InvalidInputError):
    """An unknown policy or strategy name, a bad setting."""


class ConflictError(VnumaError):
    """A name that already exists, or an action refused in the current state."""

    exit_code = 9


class LeaseError(ConflictError):
    """Another ``vnuma watch`` holds the inventory's lease (it writes the rounds), or took it from this one."""

    exit_code = 13


class GroupModeError(VnumaError):
    """A VM asking affinity of a replica group whose VMs asked anti-affinity, or the reverse (exit 12):
    a group is either affine or anti-affine."""

    exit_code = 12


class DeviceStateError(VnumaError):
    """A device state change that does not apply to the device's state (exit 14): an untaint of a device
    that is not tainted, a clean of a device that is not cleaning."""

    exit_code = 14


class NoPlacementError(VnumaError):
    """No host can take the VM; carries every host's rejection."""

    exit_code = 5

    def __init__(
        self, vm: str, rejections: tuple[Any, ...], *, best: str | None = None, hint: str | None = None,
        unfit: tuple[Any, ...] = (),
    ) -> None:
        """``best``: why, in one line (:meth:`vnuma.placement.refusal.Refusal.line`: the causes with how many hosts
        refused for each, and the closest host); ``hint``: what to do about it (the command that refuses says
        what its user can do: ``place`` asks for every reason with ``--explain``)."""
        detail = f": {best}" if best else ""
        super().__init__(f"no host can take VM {vm!r}{detail}", hint=hint)
        self.vm = vm
        self.rejections = rejections
        self.unfit = unfit
        """A request with alternatives: each alternative and why it fits nowhere
        (:class:`vnuma.placement.result.Unfit`)."""


class NoRoomError(VnumaError):
    """No plan of at most the allowed moves does what was asked: make room for a VM shape, or empty a
    host (exit 5, as for a VM no host takes); ``plan``: the plan's document, when one was made."""

    exit_code = 5

    def __init__(self, message: str, *, hint: str | None = None, plan: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.plan = plan


class InventoryError(VnumaError):
    """The database is unreachable, locked, or its schema is behind."""

    exit_code = 6


class InconsistentInventoryError(InventoryError):
    """``vnuma db check`` found claim rows or summary columns that disagree with the placements and topologies
    they were written from (exit 16)."""

    exit_code = 16


class RenderError(VnumaError):
    """A template error or a rendered domain that fails validation."""

    exit_code = 7


class HypervisorError(VnumaError):
    """libvirt refused or failed; keeps libvirt's own error code."""

    exit_code = 8

    def __init__(self, message: str, *, code: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


class AuthenticationError(VnumaError):
    """An API request without a valid token: none, malformed, unknown, revoked or expired (HTTP 401)."""

    exit_code = 10


class ForbiddenError(VnumaError):
    """An API token whose role does not allow the request (HTTP 403)."""

    exit_code = 11


def not_in_inventory(what: str, name: str) -> NotFoundError:
    """The one "unknown name" error (``what``: host, tenant, vm, token): also what a tenant's API token is
    told about another tenant's VM or tenant, word for word."""
    label = "VM" if what == "vm" else what
    return NotFoundError(f"{label} {name!r} is not in the inventory", hint=f"see `vnuma {what} list`")
