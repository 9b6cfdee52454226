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

from vnuma.codec.checks import At, as_int, as_list, as_mapping, as_str
from vnuma.topology.hmat import NO_HMAT, Hmat, Matrix, nested


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
    d = as_mapping(value, at)
    matrices = {name: _matrix(d.get(name, {}), at.key(name)) for name in NO_HMAT.matrices()}
    ignored = tuple(as_str(v, at.key("ignored_initiators").index(i))
                    for i, v in enumerate(as_list(d.get("ignored_initiators", []), at.key("ignored_initiators"))))
    return Hmat(**matrices, ignored=ignored)


def _matrix(value: object, at: At) -> Matrix:
    out = []
    for initiator, row in as_mapping(value, at).items():
        for target, number in as_mapping(row, at.key(initiator)).items():
            where = at.key(initiator).key(target)
            try:
                pair = (int(initiator), int(target))
            except ValueError:
                raise where.fail("cell ids must be integers") from None
            out.append((*pair, as_int(number, where)))
    return tuple(sorted(out))
