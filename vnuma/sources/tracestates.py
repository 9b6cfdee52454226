"""A trace host's device states (format: ``docs/traces.md``)::

    "device_states": {"tainted": {"0000:17:00.0": "Xid 79"}, "cleaning": ["0000:27:00.0"]}

Pure: no I/O. A tainted device (its reason) or a cleaning one takes no claim in the replay, as in the
inventory (:mod:`vnuma.topology.devstates`); each address must be one of the host's GPUs or NICs.
"""

from __future__ import annotations

from typing import Any

from vnuma.topology import PciDevice
from vnuma.topology.devstates import NO_DEVICE_STATES, DeviceState, DeviceStateKind, DeviceStates, TaintEffect


def states_from_trace(raw: Any, at: Any, devices: list[PciDevice]) -> DeviceStates:
    """The device states of a trace host's ``device_states`` object (None: none).

    Raises:
        InvalidInputError: not such an object, or an address that is not one of the host's GPUs or NICs.
    """
    if raw is None:
        return NO_DEVICE_STATES
    tainted = at.get(raw, "tainted", dict, optional=True) or {}
    cleaning = at.get(raw, "cleaning", list, optional=True) or []
    extra = sorted(set(raw) - {"tainted", "cleaning"})
    if extra:
        raise at.fail(f"unknown key {extra[0]!r} (keys: cleaning, tainted)")
    known = {d.address for d in devices}
    states = NO_DEVICE_STATES
    for address, reason in tainted.items():
        if address not in known or not isinstance(reason, str):
            raise at.key("tainted").fail(f"{address!r}: expected a GPU or NIC of the host and a reason")
        states = states.with_device(DeviceState(address, DeviceStateKind.TAINTED, reason, "trace", "",
                                                TaintEffect.NO_SCHEDULE))
    for i, address in enumerate(cleaning):
        if address not in known or address in tainted:
            raise at.key("cleaning").index(i).fail(f"{address!r}: expected a GPU or NIC of the host, not tainted")
        states = states.with_device(DeviceState(address, DeviceStateKind.CLEANING, "cleaning", "trace"))
    return states


def states_to_trace(states: DeviceStates) -> dict[str, Any] | None:
    """A host's device states as a trace writes them (None: none to write)."""
    tainted = {d.address: d.reason for d in states.devices if d.state is DeviceStateKind.TAINTED}
    cleaning = [d.address for d in states.devices if d.state is DeviceStateKind.CLEANING]
    if not tainted and not cleaning:
        return None
    return {**({"tainted": tainted} if tainted else {}), **({"cleaning": cleaning} if cleaning else {})}
