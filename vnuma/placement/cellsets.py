"""Choosing which host cells a multi-node VM spans, closest first.

Pure: no I/O. The caller has already kept only the cells that can each
take one guest cell (CPUs, pages); what is left to decide is the set.

Search (never all permutations, and all subsets only where HMAT asks for
them and they are few): every feasible cell is tried as an *anchor*;
around it the other feasible cells are ordered by (HMAT's rating of the
pair where the host has one, distance from the anchor, the strategy's cell
preference, cell id) and up to three candidate sets are built:

1. the anchor plus its ``n - 1`` nearest cells;
2. if those lack GPUs: the nearest cells that have free GPUs until enough
   are reached, topped up with the nearest others;
3. if still short: the cells with the most free GPUs.

The first candidate that holds enough GPUs is kept per anchor, so variant 3
finds a set whenever any set containing the anchor has enough GPUs. Among
the kept sets the best is chosen by :func:`vnuma.placement.order.cellset_key`
(best rated by HMAT where the host has it, then tightest by SLIT, then
preferred cells, then ids; neighbours join an anchor in
:func:`~vnuma.placement.order.neighbour_key` order). Closeness
is measured from the anchor; on socket-grouped SLIT tables (the normal case)
that yields the tightest group, and an adjacent pair whenever one exists.
HMAT figures need not be grouped so, so on a host whose HMAT rates pairs of
CPU cells every set of ``n`` feasible cells is ranked instead, up to
:data:`EXHAUSTIVE_SETS` of them (8 cells hold at most 70 sets): there the
chosen set is the best rated of all.

Work bound: with C feasible cells, O(C) anchors x O(C log C) per anchor =
O(C^2 log C) comparisons plus O(C n^2) distance look-ups; a 64-cell host
needs a few thousand steps, well under 10 ms. The exhaustive ranking of an
HMAT host costs at most :data:`EXHAUSTIVE_SETS` sets x n^2 look-ups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import combinations
from math import comb

from vnuma.placement.ledger.host import HostState
from vnuma.placement.order import SetKey, cellset_key, decided_by, neighbour_key

EXHAUSTIVE_SETS = 4096
"""On a host whose HMAT rates pairs of CPU cells, every set of ``n`` feasible cells is ranked when there are at
most this many: HMAT tables need not be grouped by socket as SLIT tables are, so the anchor search could miss the
best-rated set."""


def _variants(
    anchor: int, others: list[int], n: int, need: int, gpus: Mapping[int, int], hs: HostState
) -> Iterator[tuple[int, ...]]:
    yield (anchor, *others[: n - 1])
    if need <= 0:
        return
    missing = need - gpus[anchor]
    chosen: list[int] = []
    rated = hs.shape.ratings is not None
    near = sorted(
        (b for b in others if gpus[b] > 0),
        key=lambda b: (hs.rated_pair(anchor, b) if rated else (0, 0), hs.distance[(anchor, b)], -gpus[b]),
    )
    for b in near:
        if missing <= 0 or len(chosen) == n - 1:
            break
        chosen.append(b)
        missing -= gpus[b]
    if missing <= 0:
        rest = [b for b in others if b not in chosen][: n - 1 - len(chosen)]
        yield (anchor, *chosen, *rest)
    top = sorted(
        others, key=lambda b: (-gpus[b], hs.rated_pair(anchor, b) if rated else (0, 0), hs.distance[(anchor, b)])
    )[: n - 1]
    yield (anchor, *top)


def _candidates(
    hs: HostState, feasible: Sequence[int], n: int, need_gpus: int, gpus: Mapping[int, int],
    pref: Mapping[int, int], anchors: Sequence[int] | None, accept: Callable[[tuple[int, ...]], bool] | None,
) -> Iterator[tuple[int, ...]]:
    """Candidate sets, anchor first, each with ``n`` cells and enough GPUs and accepted."""
    if n == 1:  # the common case, kept tight
        singles = anchors if anchors is not None else feasible
        yield from ((a,) for a in singles if gpus[a] >= need_gpus and (not accept or accept((a,))))
        return

    def fine(cand: tuple[int, ...]) -> bool:  # ``cand`` in guest order: the test sees the order the set takes
        return sum(gpus[c] for c in cand) >= need_gpus and (not accept or accept(cand))

    if hs.shape.ratings is not None and comb(len(feasible), n) <= EXHAUSTIVE_SETS:
        allowed = set(anchors) if anchors is not None else None
        for ids in combinations(sorted(feasible), n):
            if allowed is None:
                cand: tuple[int, ...] = ids
            else:
                first = next((c for c in ids if c in allowed), None)
                if first is None:
                    continue
                cand = (first, *(c for c in ids if c != first))
            if fine(cand):
                yield cand
        return
    pool = set(feasible)
    for a in anchors if anchors is not None else feasible:
        others = sorted(pool - {a}, key=neighbour_key(hs, a, pref))
        for cand in _variants(a, others, n, need_gpus, gpus, hs):
            cand = _placed_order(cand, anchors is not None)
            if len(cand) == n and fine(cand):
                yield cand
                break


def _placed_order(found: tuple[int, ...], anchored: bool) -> tuple[int, ...]:
    """A candidate set in the guest order it is placed in: the anchor first when anchors are given, then
    ascending host cell id."""
    return (found[0], *sorted(found[1:])) if anchored else tuple(sorted(found))


def rank_cells(
    hs: HostState,
    feasible: Sequence[int],
    n: int,
    need_gpus: int,
    gpus: Mapping[int, int],
    pref: Mapping[int, int],
    *,
    anchors: Sequence[int] | None = None,
    accept: Callable[[tuple[int, ...]], bool] | None = None,
) -> tuple[tuple[int, ...], str] | None:
    """The best set of ``n`` distinct feasible cells holding ``need_gpus`` free GPUs, in guest order, and the
    criterion that set it before the next best set found (:func:`vnuma.placement.order.decided_by`).

    ``anchors`` (when given) restricts which cell becomes guest cell 0 (the
    one that must also hold an isolated emulator pCPU); ``accept`` is an
    extra test on a whole set (socket GPU affinity). Guest order: the anchor
    when ``anchors`` is given, then ascending host cell id.
    """
    if len(feasible) < n:
        return None
    best: tuple[SetKey, tuple[int, ...]] | None = None
    runner_up: SetKey | None = None
    for found in _candidates(hs, feasible, n, need_gpus, gpus, pref, anchors, accept):
        ids = tuple(sorted(found))
        key = cellset_key(hs, ids, pref)
        if best is None or key < best[0]:  # a set's key ends with its ids: a lower key is another set
            if best is not None:
                runner_up = best[0]
            best = (key, found)
        elif (runner_up is None or key < runner_up) and key != best[0]:
            runner_up = key
    return None if best is None else (best[1], decided_by(best[0], runner_up))
