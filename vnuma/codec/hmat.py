"""The ``"hmat"`` part of a host's dict: rated latency and bandwidth between cells, or null.

Pure: no I/O. The shape (``host show --json``)::

    {"latency_ns": {"<initiator>": {"<target>": int}}, "bandwidth_kib_s": {...},
     "write_latency_ns": {...}, "write_bandwidth_kib_s": {...}, "ignored_initiators": [cpuset]}

Entries the host does not publish are omitted; the whole value is null when
it publishes none. ``ignored_initiators`` lists hwloc initiator cpusets that
cover no cell's CPUs entirely (empty from capabilities).
"""

from __future__ import annotations

from typing import Any

from vnuma.codec.checks import At
from vnuma.topology.hmat import Hmat, hmat_from_json, nested


def hmat_to_dict(hmat: Hmat) -> dict[str, Any] | None:
    if hmat.empty and not hmat.ignored:
        return None
    out: dict[str, Any] = {
        name: {str(i): {str(t): v for t, v in row.items()} for i, row in nested(matrix).items()}
        for name, matrix in hmat.matrices().items()
    }
    out["ignored_initiators"] = list(hmat.ignored)
    return out


def hmat_from_dict(value: object, at: At) -> Hmat:
    """See :func:`vnuma.topology.hmat.hmat_from_json` (the one reader of this form)."""
    return hmat_from_json(value, at)
