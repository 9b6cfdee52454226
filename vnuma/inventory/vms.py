"""VM rows: release, look up, change state (claims are written by :mod:`.placing`).

Functions take an open ``Session`` inside the caller's transaction and
return dataclasses; ORM rows never leave ``vnuma.inventory``.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from vnuma.errors import InvalidInputError
from vnuma.inventory import devices, hosts
from vnuma.inventory.claims import decode_placement
from vnuma.inventory.claimtables import CpuClaim, DeviceClaim, PageClaim, PartitionClaim, ResctrlClaim
from vnuma.inventory.executor import AlchemyExecutor
from vnuma.inventory.lookup import named_row
from vnuma.inventory.models import VmRow
from vnuma.inventory.reading import decode_rendering
from vnuma.inventory.schema import VmState

_LIST_HINT = "see `vnuma vm list`"


def _vm_row(session: Session, name: str) -> VmRow:
    return named_row(session, VmRow, name, "vm")


def release(session: Session, name: str) -> None:
    """Delete a VM and all its claims; its devices go to cleaning where their host says so
    (:func:`.devices.after_release`)."""
    row = _vm_row(session, name)
    for table in (CpuClaim, PageClaim, DeviceClaim, ResctrlClaim, PartitionClaim):
        session.execute(delete(table).where(table.vm_id == row.id))
    session.execute(delete(VmRow).where(VmRow.id == row.id))
    hosts.bump_generation(session, row.host_id)
    devices.after_release(AlchemyExecutor(session.connection()), row.host_id, decode_placement(name, row.placement))


def set_vm_state(session: Session, name: str, state: str) -> None:
    """Record a VM's lifecycle state (placed, defined, running, stopped)."""
    try:
        value = VmState(state)
    except ValueError:
        choices = ", ".join(s.value for s in VmState)
        raise InvalidInputError(f"VM {name!r}: unknown state {state!r} (one of {choices})") from None
    row = _vm_row(session, name)
    session.execute(update(VmRow).where(VmRow.id == row.id).values(state=value.value))


def record_defined(session: Session, name: str, rendering: dict[str, Any]) -> None:
    """The VM's domain was defined: state ``defined`` and how it was rendered, in one update.

    One write, so a process killed after libvirt's define leaves either the
    old state and rendering or both new ones (reconcile settles the former).
    """
    row = _vm_row(session, name)
    doc = json.dumps(rendering, sort_keys=True, separators=(",", ":"))
    values = {"rendering": doc, "state": VmState.DEFINED.value}
    session.execute(update(VmRow).where(VmRow.id == row.id).values(**values))


def get_rendering(session: Session, name: str) -> dict[str, Any] | None:
    """How the VM's domain was last rendered by `vnuma apply`, None if never applied."""
    return decode_rendering(name, _vm_row(session, name).rendering)
