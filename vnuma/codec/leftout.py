"""The parts of a host an import left out, as JSON: ``[{"what": str, "why": str}]``.

Pure: no I/O. ``host show --json`` and ``host import|add --json`` carry this
list under ``left_out`` (see :mod:`vnuma.topology.leftout`), ``host refresh
--json`` and the batch outcomes too; the inventory
keeps it beside the host in the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vnuma.codec.checks import At, as_list, as_mapping, as_str, take
from vnuma.codec.hosts import host_summary
from vnuma.topology.leftout import Imported, LeftOut


def imported_summary(imported: Imported) -> dict[str, Any]:
    """What ``host add|import --json`` print: the host's summary (as ``host list``) and ``left_out``."""
    return {**host_summary(imported.host), "left_out": left_out_to_list(imported.left_out)}


def left_out_to_list(items: Iterable[LeftOut]) -> list[dict[str, str]]:
    """``[{"what", "why"}]``, in the order found."""
    return [{"what": i.what, "why": i.why} for i in items]


def left_out_from_list(value: Any, at: At | None = None) -> tuple[LeftOut, ...]:
    """The parts of a ``left_out`` list (None: none).

    Raises:
        InvalidInputError: not a list of objects with string ``what`` and ``why``, naming the key.
    """
    if value is None:
        return ()
    at = at or At("left_out")
    out = []
    for i, item in enumerate(as_list(value, at)):
        d = as_mapping(item, at.index(i))
        out.append(LeftOut(take(d, "what", at.index(i), as_str), take(d, "why", at.index(i), as_str)))
    return tuple(out)
