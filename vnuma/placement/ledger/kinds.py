"""Which hosts a ledger of part of a fleet must hold to have the whole fleet's candidates (:mod:`.candidates`).

Pure: no I/O, and light: the inventory's read commands import it without the engine or numpy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from vnuma.placement.model import VmRequest

FIGURES = ("threads_used", "threads_total", "mem_used", "mem_total", "gpus_free", "gpus_total", "width")
"""What the scorers read of one host (:class:`~.arrays.Totals` but its divisors), in the order
:meth:`.arrays.FleetArrays.figures` gives them and :func:`.arrays.totals_of` takes them: kept by a claim on its
host's row, they rank claimed hosts a partial ledger leaves out (:mod:`vnuma.placement.topk`)."""


def named_hosts(request: VmRequest) -> frozenset[str]:
    """The hosts ``request`` names (those it avoids, and those of the cells it avoids): the candidates take
    each one by one (:meth:`.candidates.Candidates.indices`)."""
    return frozenset((*request.avoid_hosts, *(host for host, _cell in request.avoid_cells)))


def kept(kinds: Sequence[Hashable], claimed: Sequence[bool], named: Sequence[bool]) -> tuple[list[int], list[int]]:
    """Of hosts in name order, each of a kind (hosts of one kind unclaimed are alike to the engine; a finer
    partition than the ledger's shape and cordon will do), claimed or not, named by the request or not: the
    positions a ledger must hold for its candidates to be the whole fleet's (every claimed or named host, and
    of each kind the first other one), and per position kept how many left-out hosts it stands for."""
    positions: list[int] = []
    stands_for: list[int] = []
    first: dict[Hashable, int] = {}
    for i, (kind, taken, asked) in enumerate(zip(kinds, claimed, named, strict=True)):
        if taken or asked:
            positions.append(i)
            stands_for.append(0)
            continue
        at = first.get(kind)
        if at is None:
            first[kind] = len(positions)
            positions.append(i)
            stands_for.append(0)
        else:
            stands_for[at] += 1
    return positions, stands_for
