"""The rules for names operators give: hosts, tenants and VMs, one rule (:mod:`vnuma.topology.names`),
checked on every path that creates one; and the order names are listed in."""

from __future__ import annotations

import re

from vnuma.topology.names import check_name

__all__ = ["check_name", "natural_key"]

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key of a name in natural order: digit runs by their value (``vm2`` before ``vm10``), the rest by
    its characters; names differing only in leading zeros keep a fixed order."""
    return tuple(
        (1, int(part), part) if part.isdigit() else (0, 0, part) for part in _DIGITS.split(name) if part
    )
