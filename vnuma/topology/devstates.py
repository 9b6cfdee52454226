"""What a passable device is besides free or claimed: ``tainted`` or ``cleaning``, and what a host does
with a device its VM releases (``after_release``).

Pure: no I/O (the time a state began is given by the caller, as ISO 8601 UTC text).

* ``tainted`` (with a reason, who and when, and an effect): admission's ``device-taint`` check refuses any
  new claim of it (:mod:`vnuma.placement.ledger.admit`); the VMs holding it stay. Effect ``no-schedule`` is
  only that; ``drain`` also asks for a journaled run that moves its VMs off it (``vnuma device taint``).
* ``cleaning``: released by a VM on a host (or device) set to ``after_release`` ``clean``; it takes no claim
  until it is cleaned (``vnuma device clean``, or the configured cleaning command exiting 0).

A device the document does not name is as the topology says: free or claimed. The ledger keeps a blocked
(tainted or cleaning) device out of its free GPUs and NICs (:mod:`vnuma.placement.ledger.host`), so capacity,
the engine's choice and the pictures read one rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from vnuma.errors import DeviceStateError


class DeviceStateKind(StrEnum):
    """A device's state beside free and claimed."""

    TAINTED = "tainted"
    CLEANING = "cleaning"


class TaintEffect(StrEnum):
    """What a taint does: refuse new claims, or also move the device's VMs off it."""

    NO_SCHEDULE = "no-schedule"
    DRAIN = "drain"


class AfterRelease(StrEnum):
    """What a device a VM releases becomes: free at once, or ``cleaning`` until cleaned."""

    FREE = "free"
    CLEAN = "clean"


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device's state and settings. ``state`` None: free or claimed as the claims say (the row keeps
    a per-device ``after_release`` or the cleaning total). ``since``: when the state began (ISO 8601 UTC).
    ``dirty``: released while tainted on a cleaning host, so an untaint leaves it ``cleaning``.
    ``cleaning_s``: seconds it spent cleaning so far (every cleaning ended, summed)."""

    address: str
    state: DeviceStateKind | None = None
    reason: str = ""
    by: str = ""
    since: str = ""
    effect: TaintEffect | None = None
    after_release: AfterRelease | None = None
    dirty: bool = False
    cleaning_s: float = 0.0

    @property
    def blocked(self) -> bool:
        """True when it takes no new claim (tainted or cleaning)."""
        return self.state is not None


@dataclass(frozen=True, slots=True)
class DeviceStates:
    """A host's device states (by address order) and its ``after_release`` setting."""

    after_release: AfterRelease = AfterRelease.FREE
    devices: tuple[DeviceState, ...] = ()

    def of(self, address: str) -> DeviceState | None:
        """The state kept for ``address``, None when none is."""
        for d in self.devices:
            if d.address == address:
                return d
        return None

    @property
    def blocked(self) -> dict[str, DeviceStateKind]:
        """Address -> state of every device that takes no new claim."""
        return {d.address: d.state for d in self.devices if d.state is not None}

    def releases_to(self, address: str) -> AfterRelease:
        """What ``address`` becomes when its VM releases it (its own setting, else the host's)."""
        own = self.of(address)
        return own.after_release if own is not None and own.after_release is not None else self.after_release

    def with_device(self, new: DeviceState) -> DeviceStates:
        """These states with ``new`` in place of ``new.address``'s (dropped when it keeps nothing)."""
        kept = [d for d in self.devices if d.address != new.address]
        if new != DeviceState(new.address):
            kept.append(new)
        return replace(self, devices=tuple(sorted(kept, key=lambda d: d.address)))


NO_DEVICE_STATES = DeviceStates()


def tainted(
    states: DeviceStates, address: str, reason: str, effect: TaintEffect, by: str, now: str
) -> DeviceStates:
    """``states`` with ``address`` tainted (a taint again with another reason, effect or who replaces them and
    when; the same taint again changes nothing, its time included); a device that was cleaning stays to be
    cleaned once untainted (``dirty``)."""
    own = states.of(address) or DeviceState(address)
    if own.state is DeviceStateKind.TAINTED and (own.reason, own.effect, own.by) == (reason, effect, by):
        return states
    dirty = own.dirty or own.state is DeviceStateKind.CLEANING
    return states.with_device(replace(own, state=DeviceStateKind.TAINTED, reason=reason, by=by, since=now,
                                      effect=effect, dirty=dirty))


def untainted(states: DeviceStates, host: str, address: str, by: str, now: str) -> DeviceStates:
    """``states`` with ``address``'s taint lifted: free, or ``cleaning`` when a VM released it meanwhile
    on a cleaning host (``dirty``).

    Raises:
        DeviceStateError: the device is not tainted.
    """
    own = states.of(address)
    if own is None or own.state is not DeviceStateKind.TAINTED:
        now_state = "cleaning" if own is not None and own.state is DeviceStateKind.CLEANING else "not tainted"
        raise DeviceStateError(f"device {address} of host {host!r} is {now_state}: nothing to untaint",
                               hint=f"see `vnuma device list --host {host}`")
    if own.dirty:
        return states.with_device(replace(own, state=DeviceStateKind.CLEANING, reason="released by a VM", by=by,
                                          since=now, effect=None, dirty=False))
    return states.with_device(replace(own, state=None, reason="", by="", since="", effect=None))


def cleaned(states: DeviceStates, host: str, address: str, spent_s: float) -> DeviceStates:
    """``states`` with ``address`` clean again (free), its ``spent_s`` seconds of cleaning added to its total.

    Raises:
        DeviceStateError: the device is not cleaning.
    """
    own = states.of(address)
    if own is None or own.state is not DeviceStateKind.CLEANING:
        now_state = "tainted" if own is not None and own.state is DeviceStateKind.TAINTED else "not cleaning"
        raise DeviceStateError(f"device {address} of host {host!r} is {now_state}: nothing to clean",
                               hint=f"see `vnuma device list --host {host}`")
    return states.with_device(replace(own, state=None, reason="", by="", since="", effect=None,
                                      cleaning_s=own.cleaning_s + max(spent_s, 0.0)))


def still_cleaning(states: DeviceStates, address: str, reason: str) -> DeviceStates:
    """``states`` with a cleaning device's reason replaced (a cleaning command that failed says why)."""
    own = states.of(address)
    assert own is not None and own.state is DeviceStateKind.CLEANING, address
    return states.with_device(replace(own, reason=reason))


def released(states: DeviceStates, addresses: Iterable[str], by: str, now: str) -> DeviceStates:
    """``states`` after ``by`` (``VM 'x'``) released ``addresses``: each one its (or its host's)
    ``after_release`` sends to cleaning becomes ``cleaning`` (a tainted one stays tainted, to be cleaned once
    untainted)."""
    for address in sorted(set(addresses)):
        if states.releases_to(address) is not AfterRelease.CLEAN:
            continue
        own = states.of(address) or DeviceState(address)
        if own.state is DeviceStateKind.TAINTED:
            states = states.with_device(replace(own, dirty=True))
        elif own.state is None:
            states = states.with_device(replace(own, state=DeviceStateKind.CLEANING, reason=f"released by {by}",
                                                by=by, since=now))
    return states


def with_after_release(states: DeviceStates, address: str | None, value: AfterRelease | None) -> DeviceStates:
    """``states`` with the host's (``address`` None) or one device's ``after_release`` set (None for a device:
    as its host's)."""
    if address is None:
        assert value is not None
        return replace(states, after_release=value)
    own = states.of(address) or DeviceState(address)
    return states.with_device(replace(own, after_release=value))


def reclaimed(states: DeviceStates, addresses: Iterable[str], by: str) -> DeviceStates:
    """``states`` after ``by`` got ``addresses`` back (an undo of a journaled run): what its own release made
    ``cleaning`` is as it was before, free under its VM."""
    for address in sorted(set(addresses)):
        own = states.of(address)
        if own is not None and own.state is DeviceStateKind.CLEANING and own.by == by:
            states = states.with_device(replace(own, state=None, reason="", by="", since=""))
    return states
