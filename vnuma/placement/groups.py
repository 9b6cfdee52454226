"""Replica groups: anti-affinity between the VMs of one group, the one rule every path asks.

Pure: no I/O. A VM may belong to a group (``--group G``) with an
anti-affinity scope (``--anti-affinity host|cell``): no two VMs of the group
on one host, or on one host cell (a memory controller). Between two members
the wider scope of the two applies (``host`` over ``cell``), so a group
whose members asked differently is still never crowded. The rule reads only
the members on the host the VM goes to (:attr:`HostState.groups`), so the
inventory's one-host ledger of a claim decides it as the engine does.

Asked by the engine's host filter ``group`` (a host that already holds a
member, or whose every CPU cell does under ``cell``), by the host view
(cells a member holds are not usable under ``cell``), and by admission
(check ``group``): every path that places or moves a VM honours it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

from vnuma.topology import format_cpuset

if TYPE_CHECKING:
    from vnuma.placement.ledger.host import HostState
    from vnuma.placement.model import Placement


class AntiAffinity(StrEnum):
    """How far apart the VMs of one group stay."""

    HOST = "host"
    CELL = "cell"


def _wider(a: AntiAffinity | None, b: AntiAffinity | None) -> AntiAffinity | None:
    if AntiAffinity.HOST in (a, b):
        return AntiAffinity.HOST
    return AntiAffinity.CELL if AntiAffinity.CELL in (a, b) else None


def _members(hs: HostState, group: str, vm: str) -> list[Placement]:
    return [p for p in hs.groups.get(group, ()) if p.vm != vm]


def group_refusal(
    hs: HostState, vm: str, group: str | None, scope: AntiAffinity | None, cells: Iterable[int] | None
) -> str | None:
    """Why VM ``vm`` of ``group`` may not go to ``hs`` (on host ``cells``; None: judge the host alone)."""
    if group is None:
        return None
    mine = frozenset(cells) if cells is not None else None
    for member in _members(hs, group, vm):
        wider = _wider(scope, member.anti_affinity)
        if wider is AntiAffinity.HOST:
            return f"group {group!r} (anti-affinity host) already has VM {member.vm!r} on host {hs.name!r}"
        shared = mine & set(member.host_cells) if wider is AntiAffinity.CELL and mine is not None else None
        if shared:
            return (
                f"group {group!r} (anti-affinity cell) already has VM {member.vm!r} on cell(s) "
                f"{format_cpuset(shared)} of host {hs.name!r}"
            )
    return None


def group_cells(hs: HostState, vm: str, group: str | None, scope: AntiAffinity | None) -> frozenset[int]:
    """The host cells of ``hs`` a VM of ``group`` may not use: those its members hold under ``cell``."""
    if group is None:
        return frozenset()
    return frozenset(
        c for m in _members(hs, group, vm) if _wider(scope, m.anti_affinity) is not None for c in m.host_cells
    )
