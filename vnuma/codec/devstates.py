"""Device states as plain dicts: ``host show --json``'s ``device_states``, the inventory's
``hosts.device_states`` column and a trace host's ``device_states`` key.

Pure: no I/O. Shape::

    {"after_release": "free" | "clean",
     "devices": [{"address": ..., "state": "tainted" | "cleaning" | null, "reason": ..., "by": ..., "since": ...,
                  "effect": "no-schedule" | "drain" | null, "after_release": "free" | "clean" | null,
                  "dirty": false, "cleaning_s": 0.0}, ...]}

Every key but ``address`` may be left out on input (its default: free, nothing kept).
"""

from __future__ import annotations

from typing import Any

from vnuma.codec.checks import At, as_bool, as_mapping, as_str, enum_of, list_of, take
from vnuma.topology.devstates import (
    NO_DEVICE_STATES,
    AfterRelease,
    DeviceState,
    DeviceStateKind,
    DeviceStates,
    TaintEffect,
)


def device_state_to_dict(d: DeviceState) -> dict[str, Any]:
    """One device's state as a dict."""
    return {
        "address": d.address,
        "state": None if d.state is None else d.state.value,
        "reason": d.reason,
        "by": d.by,
        "since": d.since,
        "effect": None if d.effect is None else d.effect.value,
        "after_release": None if d.after_release is None else d.after_release.value,
        "dirty": d.dirty,
        "cleaning_s": d.cleaning_s,
    }


def device_states_to_dict(states: DeviceStates) -> dict[str, Any]:
    """A host's device states as a dict (see the module doc)."""
    return {"after_release": states.after_release.value, "devices": [device_state_to_dict(d) for d in states.devices]}


def _opt(cls: Any) -> Any:
    check = enum_of(cls)
    return lambda value, at: None if value is None else check(value, at)


def _seconds(value: object, at: At) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise at.fail(f"{value!r} is not a number of seconds")
    return float(value)


def _device(value: object, at: At, i: int) -> DeviceState:
    at = at.index(i)
    d = as_mapping(value, at)
    return DeviceState(
        address=take(d, "address", at, as_str),
        state=take(d, "state", at, _opt(DeviceStateKind), None),
        reason=take(d, "reason", at, as_str, ""),
        by=take(d, "by", at, as_str, ""),
        since=take(d, "since", at, as_str, ""),
        effect=take(d, "effect", at, _opt(TaintEffect), None),
        after_release=take(d, "after_release", at, _opt(AfterRelease), None),
        dirty=take(d, "dirty", at, as_bool, False),
        cleaning_s=take(d, "cleaning_s", at, _seconds, 0.0),
    )


def device_states_from_dict(value: object, at: At) -> DeviceStates:
    """A host's device states from a dict (see the module doc).

    Raises:
        InvalidInputError: a missing key or a wrong type, named by its key path.
    """
    if value is None:
        return NO_DEVICE_STATES
    d = as_mapping(value, at)
    devices = take(d, "devices", at, list_of(_device), [])
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        if dev.address in seen:
            raise at.key("devices").index(i).fail(f"device {dev.address} is listed twice")
        seen.add(dev.address)
    return DeviceStates(
        take(d, "after_release", at, enum_of(AfterRelease), AfterRelease.FREE.value),
        tuple(sorted(devices, key=lambda s: s.address)),
    )
