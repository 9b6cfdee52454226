"""The ``"resctrl"`` part of a host's dict: cache banks, bandwidth domains, monitors.

Pure: no I/O. The shape (``host show --json``)::

    {"caches": [{"id", "level", "type", "size_kib", "ways", "granularity_kib", "min_kib", "max_allocs",
                 "cpus": [int], "cells": [int], "controls": [{"type", "granularity_kib", "min_kib",
                 "max_allocs"}]}],
     "memory_bandwidth": [{"id", "granularity", "min", "max_allocs", "cpus": [int], "cells": [int]}],
     "monitors": {"cache": [feature], "memory_bandwidth": [feature], "max_monitors": int | null},
     "classes": {"used": int, "total": int} | null}

``classes`` is in ``host show``'s document only (:func:`classes_to_dict`): the
host's classes of service as its VMs see them
(:class:`vnuma.placement.resctrl.Classes`: ``total`` the groups VMs may make,
the host's count less the default group's; ``used`` the VMs holding a slice
or a cap), null where the host reports no class count.

A bank's top-level ``granularity_kib``/``min_kib``/``max_allocs``/``ways``
are its first control's (null without one: monitoring only); ``controls``
lists all of them (two on a CDP host: code and data). ``cells`` (the NUMA
cells whose CPUs the cache or domain covers) and ``ways`` are derived: they
are written for readers and ignored when the dict is read back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vnuma.codec.checks import (
    At,
    as_int,
    as_ints,
    as_list,
    as_mapping,
    as_opt_int,
    as_str,
    enum_of,
    get_key,
    list_of,
    take,
)
from vnuma.placement.resctrl import Classes
from vnuma.topology.resctrl import NO_RESCTRL, BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl

_TYPE = enum_of(CacheType)


def resctrl_to_dict(resctrl: Resctrl, cells_of: Callable[[frozenset[int]], tuple[int, ...]]) -> dict[str, Any]:
    """The dict form; ``cells_of(cpus)`` names the host cells holding those CPUs."""
    return {
        "caches": [_bank(b, cells_of) for b in resctrl.caches],
        "memory_bandwidth": [
            {
                "id": n.id, "granularity": n.granularity, "min": n.min, "max_allocs": n.max_allocs,
                "cpus": sorted(n.cpus), "cells": list(cells_of(n.cpus)),
            }
            for n in resctrl.memory_bandwidth
        ],
        "monitors": {
            "cache": list(resctrl.cache_monitors),
            "memory_bandwidth": list(resctrl.bandwidth_monitors),
            "max_monitors": resctrl.max_monitors,
        },
    }


def classes_to_dict(classes: Classes | None) -> dict[str, int] | None:
    """``"classes"`` of ``host show``'s ``"resctrl"``."""
    return None if classes is None else {"used": classes.used, "total": classes.total}


def classes_from_dict(doc: Mapping[str, Any]) -> Classes | None:
    """The :class:`Classes` of a ``host show --json`` document (what :func:`classes_to_dict` wrote), None
    where it has none; the document is trusted (it was read from the API)."""
    found = (doc.get("resctrl") or {}).get("classes")
    return None if found is None else Classes(int(found["used"]), int(found["total"]))


def _bank(bank: CacheBank, cells_of: Callable[[frozenset[int]], tuple[int, ...]]) -> dict[str, Any]:
    first = bank.controls[0] if bank.controls else None
    return {
        "id": bank.id,
        "level": bank.level,
        "type": bank.type.value,
        "size_kib": bank.size_kib,
        "ways": bank.ways,
        "granularity_kib": first.granularity_kib if first else None,
        "min_kib": first.min_kib if first else None,
        "max_allocs": first.max_allocs if first else None,
        "cpus": sorted(bank.cpus),
        "cells": list(cells_of(bank.cpus)),
        "controls": [
            {
                "type": c.type.value, "granularity_kib": c.granularity_kib, "min_kib": c.min_kib,
                "max_allocs": c.max_allocs,
            }
            for c in bank.controls
        ],
    }


def resctrl_from_dict(value: object, at: At) -> Resctrl:
    """Read the dict form back (``cells`` and ``ways`` ignored); the host checks it against its CPUs."""
    d = as_mapping(value, at)
    mat = at.key("monitors")
    monitors = as_mapping(get_key(d, "monitors", at, {}), mat)
    resctrl = Resctrl(
        caches=take(d, "caches", at, _BANKS, []),
        memory_bandwidth=take(d, "memory_bandwidth", at, _NODES, []),
        cache_monitors=take(monitors, "cache", mat, _strings, []),
        bandwidth_monitors=take(monitors, "memory_bandwidth", mat, _strings, []),
        max_monitors=take(monitors, "max_monitors", mat, as_opt_int, None),
    )
    return NO_RESCTRL if resctrl == NO_RESCTRL else resctrl


def _strings(value: object, at: At) -> tuple[str, ...]:
    return tuple(as_str(v, at.index(i)) for i, v in enumerate(as_list(value, at)))


def _bank_from_dict(value: object, parent: At, i: int) -> CacheBank:
    at = parent.index(i)
    d = as_mapping(value, at)
    return CacheBank(
        id=take(d, "id", at, as_int),
        level=take(d, "level", at, as_int),
        type=take(d, "type", at, _TYPE),
        size_kib=take(d, "size_kib", at, as_int),
        cpus=frozenset(take(d, "cpus", at, as_ints)),
        controls=take(d, "controls", at, _CONTROLS, []),
    )


def _control_from_dict(value: object, parent: At, i: int) -> CacheControl:
    at = parent.index(i)
    d: Mapping[str, Any] = as_mapping(value, at)
    return CacheControl(
        granularity_kib=take(d, "granularity_kib", at, as_int),
        min_kib=take(d, "min_kib", at, as_int),
        type=take(d, "type", at, _TYPE),
        max_allocs=take(d, "max_allocs", at, as_int),
    )


def _node_from_dict(value: object, parent: At, i: int) -> BandwidthNode:
    at = parent.index(i)
    d = as_mapping(value, at)
    return BandwidthNode(
        id=take(d, "id", at, as_int),
        cpus=frozenset(take(d, "cpus", at, as_ints)),
        granularity=take(d, "granularity", at, as_opt_int, None),
        min=take(d, "min", at, as_opt_int, None),
        max_allocs=take(d, "max_allocs", at, as_opt_int, None),
    )


_BANKS = list_of(_bank_from_dict)
_CONTROLS = list_of(_control_from_dict)
_NODES = list_of(_node_from_dict)
