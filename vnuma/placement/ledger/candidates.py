"""The hosts the engine's fast path must look at: every claimed host, and of each kind the first unclaimed one.

Pure: no I/O. Hosts no claim was ever recorded on are unclaimed: they equal their shape's template in every
respect but name and index (:mod:`.host`). Those of one *kind* (one shape and one cordon) get the same answer
from the pre-filter, the scorers, the exact fit and admission, renamed. The fast path ranks hosts by (score,
index) and, between two refusals that got as far, keeps the older; so among the unclaimed hosts of one kind
only the first in name order (the kind's *representative*) can be chosen, be the closest refusal or come
closest in the pre-filter's stages: if it does not fit, or admission refuses it, every other one is refused the
same way, later. The others are left out.

A request that names hosts (``avoid_hosts``, ``avoid_cells``, the hosts an affine group holds it to) makes
those differ from the other hosts of their kind: they are looked at one by one, and each kind's representative
is sought among its other unclaimed hosts.

A ledger of part of a fleet has the whole fleet's candidates when it holds every claimed host, every host a
request names, and of each kind the first unclaimed host not named (:func:`.kinds.kept`: what ``vnuma place``
reads of a large fleet).

Work: the sorted candidate array is kept as claims come (a host's first claim inserts one index: O(claimed
hosts)); a request naming hosts costs O(candidates + kinds + named hosts + the unclaimed hosts skipped over);
a request naming none costs nothing here. Memory: one index and one byte per host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from vnuma.placement.ledger.arrays import FleetArrays, IntArray
from vnuma.placement.ledger.host import HostState


class Candidates:
    """Sorted host indices (name order) the fast path pre-filters: claimed hosts and each shape's first unclaimed."""

    __slots__ = ("_arrays", "_by_name", "_claimed", "_cursor", "_indices", "_pristine", "_shape_of")

    def __init__(self, states: Sequence[HostState], by_name: Mapping[str, HostState], arrays: FleetArrays) -> None:
        self._by_name = by_name
        self._arrays = arrays
        self._claimed = bytearray(hs.built for hs in states)
        """Per host index, 1 once a claim was recorded there (the fleet builds a host at its first)."""
        self._shape_of: list[int] = []
        """Host index -> the number of its kind: its shape and cordon (in order of first appearance)."""
        pristine: dict[int, list[int]] = {}
        numbers: dict[tuple[int, bool], int] = {}
        claimed: list[int] = []
        for hs in states:
            number = numbers.setdefault((id(hs.shape), hs.host.cordoned), len(numbers))
            self._shape_of.append(number)
            if hs.built:
                claimed.append(hs.index)
            else:
                pristine.setdefault(number, []).append(hs.index)
        self._pristine = [np.array(pristine.get(n, ()), dtype=np.int64) for n in range(len(numbers))]
        """Per shape, the indices of its hosts unclaimed when the fleet was made, ascending."""
        self._cursor = [0] * len(numbers)
        """Per shape, the position in ``_pristine`` of its representative (past the end: none left)."""
        reps = [int(p[0]) for p in self._pristine if len(p)]
        self._indices: IntArray = np.array(sorted([*claimed, *reps]), dtype=np.int64)
        arrays.mirror(self._indices)

    def indices(self, named: Iterable[str] = ()) -> IntArray:
        """The candidates, ascending; with ``named`` (host names a request gives) those hosts too, each
        shape's representative then being its first unclaimed host not named. Never changed by the caller."""
        picked = {hs.index for name in named if (hs := self._by_name.get(name)) is not None}
        if not picked:
            return self._indices
        extra = set(picked)
        for number, cursor in enumerate(self._cursor):
            if self._representative(number, cursor, ()) in picked:  # stays, as a named host
                other = self._representative(number, cursor, picked)
                if other is not None:
                    extra.add(other)
        return np.union1d(self._indices, np.array(sorted(extra), dtype=np.int64))

    def claimed(self, hs: HostState) -> None:
        """A claim was recorded on host ``hs`` (the first makes it a candidate of its own)."""
        if self._claimed[hs.index]:
            return
        self._claimed[hs.index] = 1
        number = self._shape_of[hs.index]
        order = self._pristine[number]
        cursor = self._cursor[number]
        if cursor >= len(order) or int(order[cursor]) != hs.index:
            self._insert(hs.index)  # not its shape's representative (or built before the fleet was made)
            return
        while cursor < len(order) and self._claimed[int(order[cursor])]:
            cursor += 1
        self._cursor[number] = cursor
        if cursor < len(order):
            self._insert(int(order[cursor]))

    def _representative(self, number: int, cursor: int, skip: Iterable[int] | set[int]) -> int | None:
        """The first unclaimed host of shape ``number`` from ``cursor`` on that is not in ``skip``."""
        order = self._pristine[number]
        for i in range(cursor, len(order)):
            index = int(order[i])
            if not self._claimed[index] and index not in skip:
                return index
        return None

    def _insert(self, index: int) -> None:
        at = int(np.searchsorted(self._indices, index))
        if at < len(self._indices) and int(self._indices[at]) == index:
            return
        self._indices = np.insert(self._indices, at, index)
        self._arrays.mirror_insert(self._indices, at)
