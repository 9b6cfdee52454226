"""A placement request from ``vnuma place``'s options or ``POST /v1/place``'s body: read once, here.

Both name the options of :data:`vnuma.placement.asks.ASKS` by the same names
(``--cell-vcpus 12,4`` is ``"cell_vcpus": "12,4"``) and both turn them into a
:class:`VmRequest` with :func:`place_request`, so a request means the same
whichever way it came. A tenant's cache slice and bandwidth cap are a
tenant's own options (:func:`slice_changes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.asks import request_from
from vnuma.placement.asktexts import check_slice
from vnuma.placement.model import (
    VmRequest,
)
from vnuma.services.names import check_name


def place_request(values: Mapping[str, Any], *, page_size_default: str) -> VmRequest:
    """The request ``vnuma place`` makes of its options (by name; ``page_size_default``: the configured page
    size, for a request that gives none).

    Raises:
        InvalidInputError: a bad VM or group name, or what :func:`vnuma.placement.asks.request_from` refuses.
    """
    if values.get("name") is not None:
        check_name(values["name"], "VM")  # an empty name is refused, not taken as "generate one"
    if values.get("group") is not None:
        check_name(values["group"], "group")
    return request_from(values, page_size_default=page_size_default)


def slice_changes(llc: str | None, llc_ways: str | None, mem_bw: str | None) -> dict[str, int | None]:
    """``tenant update``'s ``--llc SIZE|none``, ``--llc-ways N|none``, ``--mem-bw PCT|none`` as the tenant
    fields they change (a cache slice given one way clears the other; none clears it).

    Raises:
        InvalidInputError: a bad value (as :func:`vnuma.placement.asktexts.check_slice` says), or --llc and
            --llc-ways both.
    """
    def number(text: str, flag: str) -> int:
        if not text.isdecimal() or len(text) > 9:
            raise InvalidInputError(f"bad {flag} {text!r}: use a whole number, or none")
        return int(text)

    cleared = {v.strip().lower() for v in (llc, llc_ways) if v is not None} == {"none"}
    changes: dict[str, int | None] = {}
    if cleared:
        changes.update(llc_kib=None, llc_ways=None)
    elif llc is not None or llc_ways is not None:
        ways = number(llc_ways.strip(), "--llc-ways") if llc_ways is not None else None
        changes.update(llc_kib=check_slice(llc, ways, None), llc_ways=ways)
    if mem_bw is not None:
        cap = None if mem_bw.strip().lower() == "none" else number(mem_bw.strip(), "--mem-bw")
        check_slice(None, None, cap)
        changes["mem_bw"] = cap
    return changes
