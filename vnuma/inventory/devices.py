"""Device states in the inventory: the ``hosts.device_states`` column, changed under the host's lock.

Every query is SQL text run by an :class:`~vnuma.inventory.executor.Executor` in its opener's transaction.
A change (:func:`change_states`) locks the host row, decodes the host, asks a pure change of
:mod:`vnuma.topology.devstates` for the new states, writes them and bumps the host's generation (so a warm
ledger reads the host again: its row changed). The claim's transaction reads the same row under the same lock
(:data:`.reading.HOST`), so a taint and a claim of its device are decided one after the other.

A VM releasing devices (:func:`after_release`, in the releasing transaction: a release, a move's old claims)
sends each to ``cleaning`` where its host (or the device) is set to ``after_release`` ``clean``; a VM that gets
its devices back by an undo (:func:`after_return`) finds them as before its own release.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from vnuma.inventory.changes import bump
from vnuma.inventory.executor import Executor
from vnuma.inventory.gpuprofiles import PROFILES
from vnuma.inventory.reading import HOST, host_of
from vnuma.inventory.topologies import decode_device_states, encode_device_states
from vnuma.placement.model import Placement
from vnuma.topology import DeviceKind, Host
from vnuma.topology.devstates import NO_DEVICE_STATES, DeviceStates, reclaimed, released

SET_STATES = "UPDATE hosts SET device_states = :states WHERE id = :host"
"""A host's device states, written with one more change counted (:func:`_write`)."""
STATES_OF = "SELECT name, device_states FROM hosts WHERE id = :host"


def now_text() -> str:
    """The time now as the states keep it (ISO 8601, UTC, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def change_states(x: Executor, name: str, change: Callable[[Host], DeviceStates]) -> tuple[Host, DeviceStates]:
    """Lock host ``name``, work out its new device states with ``change(host)`` and write them when they
    differ: the host as it was and the states now.

    Raises:
        NotFoundError: no such host.
        whatever ``change`` raises (nothing is written then).
    """
    host_id, host = host_of(name, *x.batch([(HOST + x.lock, {"name": name}), (PROFILES, None)]))
    new = change(host)
    if new != host.device_states:
        _write(x, host_id, new)
    return host, new


def _update(x: Executor, host_id: int, change: Callable[[DeviceStates], DeviceStates]) -> None:
    row = x.one(STATES_OF, {"host": host_id})
    if row is None or not row[1]:
        return  # nothing kept: every device free on release (the default)
    states = decode_device_states(str(row[0]), str(row[1]))
    new = change(states)
    if new != states:
        _write(x, host_id, new)


def _write(x: Executor, host_id: int, states: DeviceStates) -> None:
    x.write_batch([(SET_STATES, [{"states": encode_device_states(states), "host": host_id}]),
                   (bump(x), [{"host": host_id}])])


def devices_of(p: Placement) -> set[str]:
    """The devices a placement holds that a release may send to cleaning: passed-through GPUs and NICs (their
    IOMMU companions follow them) and vGPU VFs (a MIG instance's GPU is shared by its other tenants: it is
    never cleaned for one of them)."""
    whole = {d.address for d in p.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC)}
    return whole | {a.vf for a in p.partitions if a.vf is not None}


def left(before: Placement, after: Placement | None = None) -> set[str]:
    """The devices of :func:`devices_of` that ``before`` holds on its host and ``after`` (None: a release) does
    not hold there: those the VM leaves, which a host set to ``after_release`` ``clean`` sends to cleaning."""
    kept = devices_of(after) if after is not None and after.host == before.host else set()
    return devices_of(before) - kept


def after_release(x: Executor, host_id: int, before: Placement, after: Placement | None = None) -> None:
    """VM ``before.vm`` released what ``before`` held on host ``host_id`` and ``after`` does not hold there."""
    gone = left(before, after)
    if gone:
        _update(x, host_id, lambda s: released(s, gone, f"VM {before.vm!r}", now_text()))


def after_return(x: Executor, host_id: int, p: Placement) -> None:
    """VM ``p.vm`` got back what ``p`` holds on host ``host_id`` (an undo)."""
    mine: Iterable[str] = devices_of(p)
    if mine:
        _update(x, host_id, lambda s: reclaimed(s, mine, f"VM {p.vm!r}"))


__all__ = ["NO_DEVICE_STATES", "after_release", "after_return", "change_states", "devices_of", "left", "now_text"]
