"""Replica groups: affinity or anti-affinity between the VMs of one group, the one rule every path asks.

Pure: no I/O. A VM may belong to a group (``--group G``) and ask how the
group's VMs stand to each other:

* anti-affinity (``--anti-affinity host|cell``): no two VMs of the group on
  one host, or on one host cell (a memory controller). Between two members
  the wider scope of the two applies (``host`` over ``cell``), so a group
  whose members asked differently is still never crowded. This reads only
  the members on the host the VM goes to (:attr:`GroupHost.groups`).
* affinity (``--affinity host``): every VM of the group on one host. A VM
  of the group may only go to the host its other members are on; while
  none is placed, any host. Between two members the affinity of either
  applies (a VM that gave only ``--group G`` joins G's host too). This
  reads where the members are on *every* host (:class:`GroupIndex`,
  :attr:`GroupHost.group_index`): the engine's ledger knows the whole fleet;
  the inventory's claim (one host's ledger) is told the members elsewhere,
  read under a lock of the group (:mod:`vnuma.inventory.placing`), so two
  racing first placements of a group cannot land on two hosts.

A group is either affine or anti-affine, never both (:func:`group_clash`):
a VM asking affinity for a group whose VMs asked anti-affinity, or the
reverse, is refused before any host is looked at (``GroupModeError``,
exit 12; admission's check ``group-mode`` under the claim's lock), and so
is a request asking both. VMs that gave only ``--group G`` go with either.

Asked by the engine's host filter ``group`` (a host that already holds a
member under anti-affinity ``host``, or whose every CPU cell does under
``cell``, or that is not the affine group's host), by the host view (cells
a member holds are not usable under ``cell``), and by admission (checks
``group-mode`` and ``group``): every path that places or moves a VM honours
it. A move that would take a VM of an affine group away from its other
members is refused (``vm migrate``, rebalance); a drain leaves such a VM on
the host (it does not move an affine group, see
:func:`vnuma.placement.rebalance.drain.why_not`), while a group's only VM
moves freely.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from vnuma.placement.model import Affinity, AntiAffinity, Placement
from vnuma.topology import format_cpuset

MODE_HINT = "a group is either affine or anti-affine: give this VM another group"


@dataclass(frozen=True, slots=True)
class GroupRefusal:
    """Why a group keeps a VM off a host, and what to do about it; ``gist``: the same in words that hold for every
    host the group keeps it off (None: ``reason`` already does)."""

    reason: str
    hint: str
    gist: str | None = None


class GroupIndex:
    """Every VM of each replica group a ledger knows of, on any host: group -> VM -> placement.

    A fleet fills it as it records and removes placements; a claim's one-host
    ledger is also given the group's VMs on other hosts (only as members: it
    holds none of their resources).
    """

    __slots__ = ("_affine", "_members")

    def __init__(self) -> None:
        self._members: dict[str, dict[str, Placement]] = {}
        self._affine: dict[str, int] = {}
        """Per group, how many members asked affinity (an anti-affine group's answer costs nothing)."""

    def add(self, p: Placement) -> None:
        """Count ``p`` as a member of its group (nothing without a group)."""
        if p.group is None:
            return
        self.discard(self._members.get(p.group, {}).get(p.vm))  # the same VM again (moved): counted once
        self._members.setdefault(p.group, {})[p.vm] = p
        if p.affinity is not None:
            self._affine[p.group] = self._affine.get(p.group, 0) + 1

    def discard(self, p: Placement | None) -> None:
        """Forget ``p``'s VM as a member of its group (None, or not a member: nothing)."""
        if p is None or p.group is None:
            return
        members = self._members.get(p.group, {})
        gone = members.pop(p.vm, None)
        if gone is None:
            return
        if gone.affinity is not None:
            self._affine[p.group] -= 1
            if not self._affine[p.group]:
                del self._affine[p.group]
        if not members:
            del self._members[p.group]

    def others(self, group: str, vm: str) -> list[Placement]:
        """The members of ``group`` but VM ``vm``, in VM name order."""
        members = self._members.get(group, {})
        return [members[name] for name in sorted(members) if name != vm]

    def is_affine(self, group: str) -> bool:
        """Did a member of ``group`` ask affinity?"""
        return group in self._affine


NO_GROUPS = GroupIndex()
"""What a host outside any fleet (a shape's template) knows of groups: nothing (never filled)."""


class GroupHost(Protocol):
    """What the rule reads of one host of a ledger (a :class:`vnuma.placement.ledger.host.HostState`): its
    name, its VMs of each group, and the ledger's :class:`GroupIndex` of every group's VMs on any host."""

    @property
    def name(self) -> str: ...

    @property
    def groups(self) -> Mapping[str, Sequence[Placement]]: ...

    @property
    def group_index(self) -> GroupIndex: ...


def _wider(a: AntiAffinity | None, b: AntiAffinity | None) -> AntiAffinity | None:
    if AntiAffinity.HOST in (a, b):
        return AntiAffinity.HOST
    return AntiAffinity.CELL if AntiAffinity.CELL in (a, b) else None


def _members(hs: GroupHost, group: str, vm: str) -> list[Placement]:
    return [p for p in hs.groups.get(group, ()) if p.vm != vm]


def group_clash(
    index: GroupIndex, vm: str, group: str | None, affinity: Affinity | None, scope: AntiAffinity | None
) -> str | None:
    """Why VM ``vm`` may not join ``group`` asking this at all (a group is affine or anti-affine), or None."""
    if group is None:
        return None
    if affinity is not None and scope is not None:
        return f"VM {vm!r} asks group {group!r} for both affinity {affinity} and anti-affinity {scope}"
    for member in index.others(group, vm) if affinity is not None or scope is not None else ():
        if affinity is not None and member.anti_affinity is not None:
            return (
                f"group {group!r} keeps its VMs apart (VM {member.vm!r} asked anti-affinity "
                f"{member.anti_affinity}); VM {vm!r} asks affinity {affinity}"
            )
        if scope is not None and member.affinity is not None:
            return (
                f"group {group!r} keeps its VMs together (VM {member.vm!r} asked affinity {member.affinity}); "
                f"VM {vm!r} asks anti-affinity {scope}"
            )
    return None


def group_hosts(index: GroupIndex, vm: str, group: str | None, affinity: Affinity | None) -> tuple[str, ...]:
    """The hosts an affine group holds VM ``vm`` to: its other members' hosts, sorted (one, unless VMs that
    gave only ``--group`` were placed apart before an affine one came); () when nothing binds it (no group,
    no other member, or no affinity asked by it or by a member)."""
    if group is None:
        return ()
    if affinity is None and not index.is_affine(group):
        return ()
    return tuple(sorted({m.host for m in index.others(group, vm)}))


def affinity_words(group: str, hosts: tuple[str, ...]) -> str:
    """``group 'g' (affinity host) has its VMs on host 'h1'``: where an affine group keeps its VMs."""
    where = f"host {hosts[0]!r}" if len(hosts) == 1 else "hosts " + ", ".join(repr(h) for h in hosts)
    return f"group {group!r} (affinity host) has its VMs on {where}"


def group_refusal(
    hs: GroupHost,
    vm: str,
    group: str | None,
    scope: AntiAffinity | None,
    cells: Iterable[int] | None,
    affinity: Affinity | None = None,
) -> GroupRefusal | None:
    """Why VM ``vm`` of ``group`` may not go to ``hs`` (on host ``cells``; None: judge the host alone)."""
    if group is None:
        return None
    hosts = group_hosts(hs.group_index, vm, group, affinity)
    if hosts and hosts != (hs.name,):
        return GroupRefusal(affinity_words(group, hosts), "place it on the group's host, or in another group")
    mine = frozenset(cells) if cells is not None else None
    for member in _members(hs, group, vm):
        wider = _wider(scope, member.anti_affinity)
        if wider is AntiAffinity.HOST:
            return GroupRefusal(
                f"group {group!r} (anti-affinity host) already has VM {member.vm!r} on host {hs.name!r}",
                "place it elsewhere, or leave the group",
                f"group {group!r} (anti-affinity host) has its VMs on {occupied(hs.group_index, group, vm, scope)}",
            )
        shared = mine & set(member.host_cells) if wider is AntiAffinity.CELL and mine is not None else None
        if shared:
            return GroupRefusal(
                f"group {group!r} (anti-affinity cell) already has VM {member.vm!r} on cell(s) "
                f"{format_cpuset(shared)} of host {hs.name!r}",
                "place it elsewhere, or leave the group",
            )
    return None


def occupied(index: GroupIndex, group: str, vm: str, scope: AntiAffinity | None) -> str:
    """Every host where ``group`` keeps VM ``vm`` (asking anti-affinity ``scope``) off, with the members there:
    ``hosts 'a' (VM 'g1'), 'b' (VMs 'g2', 'g3')``. Under ``cell`` every host holding a member (it keeps the VM
    off those cells); under ``host``, or beside a member that asked it, the hosts themselves."""
    hosts: dict[str, list[str]] = {}
    for m in index.others(group, vm):
        if _wider(scope, m.anti_affinity) is not None:
            hosts.setdefault(m.host, []).append(m.vm)
    listed = ", ".join(
        f"{h!r} ({'VM' if len(vms) == 1 else 'VMs'} {', '.join(map(repr, vms))})" for h, vms in sorted(hosts.items())
    )
    return f"host {listed}" if len(hosts) == 1 else f"hosts {listed}"


def group_cells(hs: GroupHost, vm: str, group: str | None, scope: AntiAffinity | None) -> frozenset[int]:
    """The host cells of ``hs`` a VM of ``group`` may not use: those its members hold under ``cell``."""
    if group is None:
        return frozenset()
    return frozenset(
        c for m in _members(hs, group, vm) if _wider(scope, m.anti_affinity) is not None for c in m.host_cells
    )
