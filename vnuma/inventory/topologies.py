"""Stored host topologies: the compact JSON column and its decoding, once per distinct shape.

The ``hosts.topology`` column holds ``codec.host_to_dict(host)`` without the
keys that have columns of their own (``name``, ``uri``, ``source``,
``reserved_cpus``, ``cordoned``, ``resctrl_policy``) or come from other tables
(``gpu_profiles``), and without ``resctrl`` when the host has
none, ``hmat`` when it publishes none, ``mdevs`` and ``nvlinks`` when it has none, ``arch`` when x86_64 (so texts
written before vnuma read them stay what they are, and a text without ``arch`` is an x86_64 host's).
Hosts of one hardware model therefore store the same text, and
:class:`ShapeDecoder` parses and checks each distinct text once:
loading a fleet of 10,000 hosts costs a few distinct decodes plus a cheap
assembly per host. ``hosts.topology_digest`` (:func:`digest_topology`) names
the text, so a fleet load (:func:`assemble_hosts`) reads each distinct text
once from the database instead of once per host (~9 KB per 128-CPU host).
Both inventory read paths (ORM and DB-API) assemble hosts here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from vnuma.codec import host_from_dict, host_to_dict, left_out_from_list, left_out_to_list
from vnuma.codec.checks import At
from vnuma.codec.devstates import device_states_from_dict, device_states_to_dict
from vnuma.errors import InvalidInputError, InventoryError
from vnuma.topology import Cell, Host, Mdev, PciDevice, Source, format_cpuset, gc_paused, parse_cpuset
from vnuma.topology.devstates import NO_DEVICE_STATES, DeviceStates
from vnuma.topology.hmat import Hmat
from vnuma.topology.leftout import LeftOut
from vnuma.topology.nvlink import NvLink
from vnuma.topology.resctrl import Resctrl, parse_policy

_OWN_COLUMNS = ("name", "uri", "source", "reserved_cpus", "cordoned", "resctrl_policy")

HostRowTuple = tuple[str, str | None, str, str, str, object, str, str, str | None]
"""A fleet-load row: name, uri, source, reserved cpuset, topology digest, cordoned, resctrl policy text,
device states text, topology text or None.

The text is read only for rows without a digest (written behind vnuma's back)."""


def encode_topology(host: Host) -> str:
    """The topology column's text for a host (its shape only: no name, URI, source, reservation or cordon)."""
    doc: dict[str, Any] = host_to_dict(host)
    for key in (*_OWN_COLUMNS, "gpu_profiles", "device_states"):  # MIG geometries: the gpu_profiles table
        del doc[key]
    if host.resctrl.empty:
        del doc["resctrl"]
    if doc["hmat"] is None:
        del doc["hmat"]
    if not doc["mdevs"]:
        del doc["mdevs"]
    if not doc["nvlinks"]:
        del doc["nvlinks"]
    if doc["arch"] == "x86_64":
        del doc["arch"]
    return json.dumps(doc, separators=(",", ":"))


def encode_left_out(left_out: Iterable[LeftOut]) -> str:
    """The ``hosts.left_out`` column's text: the parts as JSON, ``""`` for none."""
    items = left_out_to_list(left_out)
    return json.dumps(items, separators=(",", ":"), ensure_ascii=False) if items else ""


def decode_left_out(name: str, text: str | None) -> tuple[LeftOut, ...]:
    """The parts a ``hosts.left_out`` text lists.

    Raises:
        InventoryError: a text that is not such a list (hint: refresh or import the host again).
    """
    if not text:
        return ()
    try:
        return left_out_from_list(json.loads(text))
    except (ValueError, InvalidInputError) as err:
        raise InventoryError(
            f"inventory: the parts left out of host {name!r} are unreadable: {err}",
            hint=f"record it again: `vnuma host refresh {name}`, or remove and import it",
        ) from err


def digest_topology(topology: str) -> str:
    """The ``topology_digest`` column's value for a topology text (SHA-256, hex)."""
    return hashlib.sha256(topology.encode()).hexdigest()


def assemble_hosts(rows: Iterable[HostRowTuple], text_of: Callable[[str], str]) -> list[Host]:
    """Hosts of fleet-load rows, in row order; ``text_of(digest)`` reads one stored text by digest.

    Each distinct digest is read and decoded once; the cyclic GC is paused meanwhile.

    Raises:
        InventoryError: a stored topology cannot be read back.
    """
    decoder = ShapeDecoder()
    texts: dict[str, str] = {}
    hosts = []
    with gc_paused():
        for name, uri, source, reserved, digest, cordoned, policy, states, own_text in rows:
            if own_text is None:
                own_text = texts.get(digest)
                if own_text is None:
                    own_text = texts[digest] = text_of(digest)
            hosts.append(decoder.host(name, uri, source, own_text, reserved, bool(cordoned), policy or "", states))
    return hosts


_Parts = tuple[
    tuple[Cell, ...], tuple[PciDevice, ...], Source, frozenset[int], Resctrl, Hmat, tuple[Mdev, ...],
    tuple[NvLink, ...], str,
]
_Shape = tuple[
    tuple[Cell, ...], tuple[PciDevice, ...], frozenset[int], Resctrl, Hmat, tuple[Mdev, ...], tuple[NvLink, ...], str
]


class ShapeDecoder:
    """Decodes host rows, reusing the cells and devices of topology texts already seen."""

    def __init__(self) -> None:
        self._shapes: dict[str, _Shape] = {}
        self._parts: dict[tuple[str, str, str], _Parts] = {}

    def __len__(self) -> int:
        """Distinct (topology, source, reservation) rows decoded so far."""
        return len(self._parts)

    def host(
        self, name: str, uri: str | None, source: str, topology: str, reserved_cpuset: str, cordoned: bool = False,
        resctrl_policy: str = "", device_states: str | None = "",
    ) -> Host:
        """The Host of one row (rows of one topology, source and reservation share all but name, URI and cordon).

        Raises:
            InventoryError: the stored row cannot be read back (hint: refresh the host).
        """
        try:
            parts = self._parts.get((topology, source, reserved_cpuset))
            if parts is None:
                parts = self._parts[(topology, source, reserved_cpuset)] = self._decode_parts(
                    name, topology, source, reserved_cpuset
                )
            cells, devices, kind, reserved, resctrl, hmat, mdevs, nvlinks, arch = parts
            policy = _POLICIES.get(resctrl_policy)
            if policy is None:
                policy = _POLICIES.setdefault(resctrl_policy, parse_policy(resctrl_policy))
            return Host(name, cells, devices, uri, kind, reserved, cordoned, resctrl, hmat, policy, mdevs,
                        nvlinks=nvlinks, device_states=decode_device_states(name, device_states or ""), arch=arch)
        except (ValueError, TypeError, InvalidInputError) as err:
            raise InventoryError(
                f"inventory: stored topology of host {name!r} is unreadable: {err}",
                hint=f"re-discover it with `vnuma host refresh {name}`",
            ) from err

    def _decode_parts(
        self, name: str, topology: str, source: str, reserved_cpuset: str
    ) -> _Parts:
        shape = self._shapes.get(topology)
        if shape is None:
            shape = self._shapes[topology] = self._decode(name, topology)
        cells, devices, cpu_ids, resctrl, hmat, mdevs, nvlinks, arch = shape
        reserved = parse_cpuset(reserved_cpuset)
        stray = reserved - cpu_ids
        if stray:
            raise InvalidInputError(f"reserved CPU(s) {format_cpuset(stray)} do not exist")
        return cells, devices, Source(source), reserved, resctrl, hmat, mdevs, nvlinks, arch

    @staticmethod
    def _decode(name: str, topology: str) -> _Shape:
        doc = json.loads(topology)
        if not isinstance(doc, dict):
            raise InvalidInputError("not a JSON object")
        base = host_from_dict({**doc, "name": name})
        return base.cells, base.devices, base.cpu_ids, base.resctrl, base.hmat, base.mdevs, base.nvlinks, base.arch



_POLICIES: dict[str, Any] = {}
"""Policy texts read (a handful of distinct ones in a fleet), each parsed once."""

_KEPT = ShapeDecoder()
"""The decoder of single host rows (a claim's, a ``host show``'s): a serving process claims on the same
hosts again and again, and decodes each topology once. Its parts are frozen, so threads share them."""
_KEPT_MAX = 256


def decode_host(
    name: str, uri: str | None, source: str, topology: str, reserved_cpuset: str, cordoned: object = False,
    resctrl_policy: str | None = "", device_states: str | None = "",
) -> Host:
    """One host from its stored columns (topologies decoded before are reused)."""
    global _KEPT
    if len(_KEPT) > _KEPT_MAX:
        _KEPT = ShapeDecoder()
    return _KEPT.host(name, uri, source, topology, reserved_cpuset, bool(cordoned), resctrl_policy or "",
                      device_states or "")


def encode_device_states(states: DeviceStates) -> str:
    """The ``hosts.device_states`` column's text: ``""`` for the default (nothing kept)."""
    if states == NO_DEVICE_STATES:
        return ""
    return json.dumps(device_states_to_dict(states), separators=(",", ":"), ensure_ascii=False)


def decode_device_states(name: str, text: str) -> DeviceStates:
    """The device states a ``hosts.device_states`` text holds (each distinct text decoded once).

    Raises:
        InvalidInputError: a text that is not such a document (the host decoder turns it into InventoryError).
    """
    if not text:
        return NO_DEVICE_STATES
    found = _STATES.get(text)
    if found is None:
        if len(_STATES) > _KEPT_MAX:
            _STATES.clear()
        found = _STATES[text] = device_states_from_dict(json.loads(text), At(f"host {name!r}: device_states"))
    return found


_STATES: dict[str, DeviceStates] = {}
