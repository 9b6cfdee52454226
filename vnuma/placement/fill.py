"""Filling the fleet with copies of one VM shape (``vnuma capacity``), host by host.

Pure: no I/O. Placing copies one after another with :func:`~vnuma.placement.engine.place`
costs a fleet-wide decision per copy. For one sized shape and a tenant
without quotas that is not needed: a copy's host is the fitting host of the
lowest rank key (:func:`~vnuma.placement.engine.place_on`), and a host's key
and placement depend on that host's ledger alone, which only copies placed
on it change. So each host's own sequence of copies (keys and placements,
until it takes no more) decides the fleet's: merging the hosts' sequences by
key gives, copy for copy, what placing them one after another gives (a
property test compares the two).

Hosts of one hardware shape holding the same VMs (the same placements but
for VM and host names, and the same cordon) have the same ledger, so their
sequences are the same but for the host's name: each such group's is worked
out once, on its first host, and the copies are renamed.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, replace

from vnuma.placement.engine import place_on
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.order import HostKey
from vnuma.placement.result import Rejection


@dataclass(frozen=True, slots=True)
class Filled:
    """The copies in the order they are placed, and (when the fleet took no more before ``count``) each
    group of alike hosts' rejection of the next copy, on the group's first host, with the group's size."""

    placements: tuple[Placement, ...]
    stops: tuple[tuple[Rejection, int], ...]


def fill(
    request: VmRequest, fleet: Fleet, strategy: Strategy, hosts: list[HostState], count: int | None,
    name: str = "copy-{}",
) -> Filled:
    """Copies of ``request`` (sized; its tenant without quotas) on ``hosts`` of ``fleet`` until they take no
    more or ``count`` are placed; copy i (from 1) is VM ``name.format(i)``. Records each group's copies on
    its first host in ``fleet`` (a scratch ledger: the other hosts are left as they were)."""
    groups: dict[object, list[HostState]] = {}
    held: dict[str, list[Placement]] = {}
    for p in fleet.placements():
        held.setdefault(p.host, []).append(replace(p, vm="", host=""))
    for hs in hosts:
        alike = frozenset(Counter(held.get(hs.name, ())).items())
        groups.setdefault((id(hs.shape), hs.host.cordoned, alike), []).append(hs)
    sequences: dict[str, list[tuple[HostKey, Placement]]] = {}
    for g, members in enumerate(groups.values()):
        first = members[0]
        runs: list[tuple[HostKey, Placement]] = []
        while count is None or len(runs) < count:
            got = place_on(replace(request, name=name.format(f"{g}.{len(runs)}")), fleet, strategy, first)
            if isinstance(got, Rejection):
                break
            runs.append(got)
            fleet.record(got[1])
        for hs in members:
            sequences[hs.name] = runs
    placed: list[Placement] = []
    heap = [(_renamed(runs[0][0], hs.name), hs.name, 0) for hs in hosts if (runs := sequences[hs.name])]
    heapq.heapify(heap)
    while heap and (count is None or len(placed) < count):
        _key, host, k = heapq.heappop(heap)
        runs = sequences[host]
        placed.append(replace(runs[k][1], vm=name.format(len(placed) + 1), host=host))
        if k + 1 < len(runs):
            heapq.heappush(heap, (_renamed(runs[k + 1][0], host), host, k + 1))
    if count is not None and len(placed) >= count:
        return Filled(tuple(placed), ())
    after = replace(request, name=name.format(len(placed) + 1))
    stops = []
    for members in groups.values():
        got = place_on(after, fleet, strategy, members[0])
        assert isinstance(got, Rejection), "a host that took no more copy takes one now"
        stops.append((got, len(members)))
    return Filled(tuple(placed), tuple(stops))


def _renamed(key: HostKey, host: str) -> HostKey:
    return (key[0], key[1], key[2], host, key[4])
