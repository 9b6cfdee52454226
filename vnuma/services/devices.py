"""Device states: ``vnuma device taint|untaint|clean|set|list`` and ``host set --after-release``.

Each change is one inventory transaction under the host's lock (:meth:`Inventory.change_device_states`),
made by a pure change of :mod:`vnuma.topology.devstates`; admission's ``device-taint`` check reads the
result (:mod:`vnuma.placement.ledger.admit`). :func:`taint` is what a health reader calls too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vnuma.codec.devstates import device_state_to_dict
from vnuma.errors import InvalidInputError, NotFoundError, not_in_inventory
from vnuma.inventory import open_inventory
from vnuma.inventory.executor import Executor
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.names import natural_key
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.devstates import (
    AfterRelease,
    DeviceState,
    DeviceStateKind,
    DeviceStates,
    TaintEffect,
    cleaned,
    tainted,
    untainted,
    with_after_release,
)

Guard = Callable[[Executor], None]
"""Run first in a device change's transaction; what it raises writes nothing (``vnuma watch``'s lease check)."""

STATES = ("free", "claimed", "tainted", "cleaning")
"""What ``device list --state`` filters on: a device's state as the list shows it."""


@dataclass(frozen=True, slots=True)
class Changed:
    """A device state change: the device's state before and now (``address`` "" for a host's setting), and
    whether the host's device states changed."""

    host: str
    address: str
    before: DeviceState | None
    now: DeviceState
    changed: bool


def passable(host: Host, device: str) -> PciDevice:
    """The passable device (GPU, NIC or VF) of ``host`` that ``device`` names: its PCI address, the domain
    ``0000:`` may be left out.

    Raises:
        NotFoundError: the host has no such GPU or NIC.
    """
    address = device if device.count(":") >= 2 else f"0000:{device}"
    for d in host.devices:
        if d.address == address.lower() and d.kind in (DeviceKind.GPU, DeviceKind.NIC):
            return d
    raise NotFoundError(f"host {host.name!r} has no GPU or NIC {device}",
                        hint=f"see `vnuma device list --host {host.name}`")


def _change(settings: Settings, host: str, device: str | None, op: str, details: dict[str, Any],
            change: Any, guard: Guard | None = None) -> Changed:
    """Run ``change(states, address, who, host)`` on host ``host``'s device states in one transaction (``guard``
    first in it: :meth:`vnuma.inventory.repo.Inventory.change_device_states`)."""
    found: list[str] = []

    def apply(h: Host, who: str) -> DeviceStates:
        address = passable(h, device).address if device is not None else ""
        found.append(address)
        return change(h.device_states, address, who, h)

    with open_inventory(settings.db_url) as inventory:
        before_host, now = inventory.change_device_states(host, apply, op, {"device": device or "", **details},
                                                          guard)
    address = found[-1]
    return Changed(host, address, before_host.device_states.of(address), now.of(address) or DeviceState(address),
                   now != before_host.device_states)


def taint(
    settings: Settings, host: str, device: str, reason: str, effect: TaintEffect = TaintEffect.NO_SCHEDULE,
    who: str | None = None, guard: Guard | None = None,
) -> Changed:
    """Taint one device (a taint again replaces reason, effect, who and when): no new claim takes it; its VMs
    stay (``drain``: :func:`vnuma.services.devicedrain.drain_device` moves them). ``who`` defaults to the
    invocation's user; ``guard`` runs first in the taint's transaction (``vnuma watch``: its lease), and what
    it raises writes nothing.

    Raises:
        InvalidInputError: an empty reason.
        NotFoundError: unknown host or device.
    """
    from vnuma.inventory.devices import now_text

    if not reason.strip():
        raise InvalidInputError("a taint needs a reason", hint="say what is wrong with the device")
    return _change(
        settings, host, device, "device-taint", {"reason": reason, "effect": effect.value},
        lambda s, a, user, h: tainted(s, a, reason, effect, who or user, now_text()), guard,
    )


def untaint(settings: Settings, host: str, device: str) -> Changed:
    """Lift a device's taint: free again, or ``cleaning`` when a VM released it meanwhile on a cleaning host.

    Raises:
        NotFoundError: unknown host or device.
        DeviceStateError: the device is not tainted.
    """
    from vnuma.inventory.devices import now_text

    return _change(settings, host, device, "device-untaint", {},
                   lambda s, a, user, h: untainted(s, h.name, a, user, now_text()))


def clean(settings: Settings, host: str, device: str, how: str = "by hand") -> Changed:
    """Mark a cleaning device clean (free again); the seconds it spent cleaning are added to its total.

    Raises:
        NotFoundError: unknown host or device.
        DeviceStateError: the device is not cleaning.
    """
    from vnuma.inventory.devices import now_text

    def change(s: DeviceStates, a: str, user: str, h: Host) -> DeviceStates:
        own = s.of(a)
        return cleaned(s, h.name, a, seconds_between(own.since if own else "", now_text()))

    return _change(settings, host, device, "device-clean", {"how": how}, change)


def set_after_release(settings: Settings, host: str, device: str | None, value: str) -> Changed:
    """What a device a VM releases becomes: ``free`` or ``clean`` for the host (``device`` None), or for one
    device (``host``: as its host says).

    Raises:
        InvalidInputError: an unknown value.
        NotFoundError: unknown host or device.
    """
    choices = [v.value for v in AfterRelease] + ([] if device is None else ["host"])
    if value not in choices:
        raise InvalidInputError(f"unknown --after-release {value!r}", hint=f"one of {', '.join(choices)}")
    setting = None if value == "host" else AfterRelease(value)
    return _change(settings, host, device, "device-set", {"after_release": value},
                   lambda s, a, user, h: with_after_release(s, a or None, setting))


def seconds_between(start: str, end: str) -> float:
    """Seconds from ``start`` to ``end`` (the states' ISO 8601 texts; 0 when either is missing)."""
    from datetime import datetime

    if not start or not end:
        return 0.0
    return max((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 0.0)


def device_rows(hosts: list[Host], holders: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """``device list --json``: one row per passable device of ``hosts`` (natural host order, then address):
    ``host``, ``address``, ``kind`` (gpu, nic, vf), ``state`` (free, claimed, tainted, cleaning), ``vm`` (its
    holder, or null), the state's ``reason``, ``by``, ``since``, ``effect``, its ``after_release`` (its own or
    its host's) and ``cleaning_s`` (seconds spent cleaning so far)."""
    rows = []
    for h in sorted(hosts, key=lambda h: natural_key(h.name)):
        for d in h.devices:
            if d.kind not in (DeviceKind.GPU, DeviceKind.NIC):
                continue
            own = h.device_states.of(d.address) or DeviceState(d.address)
            vm = holders.get((h.name, d.address))
            state = own.state.value if own.state is not None else "claimed" if vm else "free"
            doc = device_state_to_dict(own)
            rows.append({
                "host": h.name, "address": d.address, "kind": "vf" if d.pf is not None else d.kind.value,
                "state": state, "vm": vm, "reason": doc["reason"], "by": doc["by"], "since": doc["since"],
                "effect": doc["effect"], "after_release": h.device_states.releases_to(d.address).value,
                "cleaning_s": own.cleaning_s,
            })
    return rows


def list_devices(settings: Settings, host: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
    """:func:`device_rows` of every host (or one), only those in ``state`` when given.

    Raises:
        NotFoundError: unknown host.
        InvalidInputError: an unknown state.
    """
    if state is not None and state not in STATES:
        raise InvalidInputError(f"unknown device state {state!r}", hint=f"one of {', '.join(STATES)}")
    with open_inventory(settings.db_url) as inventory:
        snap = inventory.snapshot()
    hosts = snap.hosts
    if host is not None:
        hosts = [h for h in hosts if h.name == host]
        if not hosts:
            raise not_in_inventory("host", host)
    rows = device_rows(hosts, holders(snap.placements))
    return [r for r in rows if state is None or r["state"] == state]


def holders(placements: Iterable[Placement]) -> dict[tuple[str, str], str]:
    """(host, device address) -> the VM holding it: its whole devices, the VFs and GPUs of its partitions."""
    return {(p.host, a): p.vm for p in placements for a in _held(p)}


def _held(p: Placement) -> list[str]:
    return [d.address for d in p.devices] + [a.vf for a in p.partitions if a.vf is not None] + [
        a.gpu for a in p.partitions]


__all__ = ["STATES", "Changed", "DeviceStateKind", "clean", "list_devices", "set_after_release", "taint", "untaint"]


def changed_doc(c: Changed) -> dict[str, Any]:
    """The document of a device state change (``device taint|untaint|clean|set --json`` and the API):
    ``host``, ``address``, the device's ``state`` (null: free or claimed), ``reason``, ``by``, ``since``,
    ``effect``, its own ``after_release`` (null: its host's), ``cleaning_s``, and ``changed``."""
    doc = device_state_to_dict(c.now)
    del doc["dirty"]
    return {"host": c.host, **doc, "changed": c.changed}
