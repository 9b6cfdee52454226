"""Every tie-break of the engine, in one place: how equally good choices are ordered.

Pure: no I/O. Lower keys win. Results are deterministic: the same ledger
and request always give the same keys, and hosts are held in name order,
so input order never matters.

* **Hosts** (:func:`host_key`): fewer guest cells (``numa_nodes`` auto),
  then an adjacent cell set over a non-adjacent one, then the higher
  strategy score (:mod:`.scorers`), then the host name, then the cell ids.
  The fast path visits hosts by (score descending, name) and takes the
  first adjacent fit of the smallest cell count: the same order.
* **Cell sets** (:func:`cellset_key`): where the host's HMAT rates pairs
  of its CPU cells, the highest lowest bandwidth between the set's cells,
  the lowest highest latency between them, then the same for each cell's
  own memory (:meth:`~vnuma.placement.ledger.host.HostState.rated`); then, and
  alone on hosts without HMAT, the smallest largest pairwise SLIT
  distance, the smallest sum of pairwise distances, the smallest sum of
  cell preferences, the sorted cell ids. :data:`SET_CRITERIA` names the
  parts; :func:`decided_by` says which one set a choice apart.
* **Cells** (:func:`cell_preference`), lower first: under ``pack`` and
  ``first-fit`` the cell with the least capacity left (best fit: first-fit's
  "first" is the host order; inside the host it fills cells as pack does);
  under ``gpu-first`` cells with
  free GPUs come last (a GPU VM still gets the GPU cells it needs: the set
  search adds them for its GPU count).
* **Neighbours of an anchor cell** (:func:`neighbour_key`): HMAT's rating
  of the pair (where present), distance from the anchor, then preference,
  then cell id.

pCPUs within a cell follow :mod:`.cpus` (sibling pairs of whole free cores
first, lowest ids first); GPUs follow :mod:`.gpus` (where free GPUs are most
at risk, lowest addresses first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vnuma.placement.ledger.cell import CellState
from vnuma.placement.ledger.host import HostState
from vnuma.placement.objectives import Strategy

HostKey = tuple[int, int, int, str, tuple[int, ...]]
SetKey = tuple[int, int, int, int, int, int, int, tuple[int, ...]]
SET_CRITERIA = (
    "hmat-bandwidth", "hmat-latency", "hmat-local-bandwidth", "hmat-local-latency", "slit-distance", "slit-sum",
    "cell-preference", "cell-ids",
)
"""The parts of a :data:`SetKey`, in order, by the names ``--explain`` gives them."""


def host_key(cells: tuple[int, ...], adjacent: bool, score: int, host: str) -> HostKey:
    """The key of one host's fit: guest cells, adjacency, score, name, cells."""
    return (len(cells), int(not adjacent), -score, host, cells)


def cellset_key(hs: HostState, ids: tuple[int, ...], pref: Mapping[int, int]) -> SetKey:
    """The key of a sorted cell set: best rated by HMAT, then tightest by SLIT, then the preferred cells,
    then ids."""
    rated = _UNRATED if hs.shape.ratings is None else hs.rated(ids)
    return (*rated, hs.max_distance(ids), hs.sum_distance(ids), sum(pref[c] for c in ids), ids)


_UNRATED = (0, 0, 0, 0)  # HostState.rated on a host without HMAT ratings, without the call


def decided_by(best: SetKey, runner_up: SetKey | None) -> str:
    """The criterion (:data:`SET_CRITERIA`) that put ``best`` before ``runner_up``; ``only-choice`` without
    one."""
    if runner_up is None:
        return "only-choice"
    return next(name for name, a, b in zip(SET_CRITERIA, best, runner_up, strict=True) if a != b)


def cell_preference(cell: CellState, capacity: int, strategy: Strategy) -> int:
    """A cell's preference (lower first) given the request's capacity there."""
    if strategy is Strategy.GPU_FIRST:
        return len(cell.gpus_free) * 1_000_000 + capacity
    return capacity


def neighbour_key(
    hs: HostState, anchor: int, pref: Mapping[int, int]
) -> Callable[[int], tuple[tuple[int, int], int, int, int]]:
    """The order in which cells join ``anchor``'s set: best rated by HMAT, nearest, preferred, lowest id."""
    if hs.shape.ratings is None:
        return lambda b: ((0, 0), hs.distance[(anchor, b)], pref[b], b)
    return lambda b: (hs.rated_pair(anchor, b), hs.distance[(anchor, b)], pref[b], b)
