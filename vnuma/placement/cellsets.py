"""Choosing which host cells a multi-node VM spans, closest first.

Pure: no I/O. The caller has already kept only the cells that can each
take one guest cell (CPUs, pages); what is left to decide is the set.

Search (never all permutations, never all subsets): every feasible cell
is tried as an *anchor*; around it the other feasible cells are ordered by
(distance from the anchor, the strategy's cell preference, cell id) and up
to three candidate sets are built:

1. the anchor plus its ``n - 1`` nearest cells;
2. if those lack GPUs: the nearest cells that have free GPUs until enough
   are reached, topped up with the nearest others;
3. if still short: the cells with the most free GPUs.

The first candidate that holds enough GPUs is kept per anchor, so variant 3
finds a set whenever any set containing the anchor has enough GPUs. Among
the kept sets the best is chosen by :func:`vnuma.placement.order.cellset_key`
(tightest, then preferred cells, then ids; neighbours join an anchor in
:func:`~vnuma.placement.order.neighbour_key` order). Closeness
is measured from the anchor; on socket-grouped SLIT tables (the normal case)
that yields the tightest group, and an adjacent pair whenever one exists.

Work bound: with C feasible cells, O(C) anchors x O(C log C) per anchor =
O(C^2 log C) comparisons plus O(C n^2) distance look-ups; a 64-cell host
needs a few thousand steps, well under 10 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from vnuma.placement.ledger.host import HostState
from vnuma.placement.order import SetKey, cellset_key, neighbour_key


def _variants(
    anchor: int, others: list[int], n: int, need: int, gpus: Mapping[int, int], hs: HostState
) -> Iterator[tuple[int, ...]]:
    yield (anchor, *others[: n - 1])
    if need <= 0:
        return
    missing = need - gpus[anchor]
    chosen: list[int] = []
    for b in sorted((b for b in others if gpus[b] > 0), key=lambda b: (hs.distance[(anchor, b)], -gpus[b])):
        if missing <= 0 or len(chosen) == n - 1:
            break
        chosen.append(b)
        missing -= gpus[b]
    if missing <= 0:
        rest = [b for b in others if b not in chosen][: n - 1 - len(chosen)]
        yield (anchor, *chosen, *rest)
    top = sorted(others, key=lambda b: (-gpus[b], hs.distance[(anchor, b)]))[: n - 1]
    yield (anchor, *top)


def choose_cells(
    hs: HostState,
    feasible: Sequence[int],
    n: int,
    need_gpus: int,
    gpus: Mapping[int, int],
    pref: Mapping[int, int],
    *,
    anchors: Sequence[int] | None = None,
    accept: Callable[[tuple[int, ...]], bool] | None = None,
) -> tuple[int, ...] | None:
    """The best set of ``n`` distinct feasible cells holding ``need_gpus`` free GPUs, in guest order.

    ``anchors`` (when given) restricts which cell becomes guest cell 0 (the
    one that must also hold an isolated emulator pCPU); ``accept`` is an
    extra test on a whole set (socket GPU affinity). Guest order: the anchor
    when ``anchors`` is given, then ascending host cell id.
    """
    if len(feasible) < n:
        return None
    best: tuple[SetKey, tuple[int, ...]] | None = None
    pool = set(feasible)
    for a in anchors if anchors is not None else feasible:
        if n == 1:
            found: tuple[int, ...] | None = (
                (a,) if gpus[a] >= need_gpus and (not accept or accept((a,))) else None
            )
        else:
            others = sorted(pool - {a}, key=neighbour_key(hs, a, pref))
            found = None
            for cand in _variants(a, others, n, need_gpus, gpus, hs):
                if (
                    len(cand) == n
                    and sum(gpus[c] for c in cand) >= need_gpus
                    and (not accept or accept(cand))
                ):
                    found = cand
                    break
        if found is None:
            continue
        ids = tuple(sorted(found))
        key = cellset_key(hs, ids, pref)
        if best is None or key < best[0]:
            order = (found[0], *sorted(found[1:])) if anchors is not None else ids
            best = (key, order)
    return best[1] if best else None
