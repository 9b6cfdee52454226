"""Which claimed hosts a placement must decode: ranked by the figures their last claims kept, best first.

Pure: no I/O. The engine takes, of the hosts that fit, the one of
the lowest key (:func:`vnuma.placement.order.host_key`: guest cells,
adjacency, score, name), and a host's score needs nothing of the host but its
:data:`~vnuma.placement.ledger.kinds.FIGURES` (:mod:`.scorers`). So a ledger
may leave out claimed hosts whose kept figures rank them low:

* :func:`ranking` orders those hosts as the engine visits them, by the
  very scorers the engine runs on its ledger (a request sized per host, by
  the highest score any of its sizes there can have);
* the caller decodes the best ``k`` of them (with every other host the
  ledger must hold, :mod:`vnuma.placement.ledger.kinds`) and the engine
  decides on that ledger;
* :func:`outranks` says whether a host left out could still come before the
  engine's choice: its best conceivable key (the fewest guest cells the
  request can take, adjacent, its score, its name) is compared with the
  choice's. If it could, the caller decodes more (:data:`GROWTH` times as
  many) and asks again; a refusal is asked again on every host.

The choice is then the one the whole fleet's ledger gives: every host left
out has a key after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from vnuma.placement.kept import for_tenant
from vnuma.placement.ledger.arrays import totals_of
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import SHAPES
from vnuma.placement.model import Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.order import host_key
from vnuma.placement.request import resolve_size
from vnuma.placement.result import PlacementResult
from vnuma.placement.scorers import total_scores
from vnuma.topology import Host

FIRST_K = 32
"""How many claimed hosts a first narrowed read decodes, of those it may leave out."""
GROWTH = 8
"""How many times more each further read decodes."""

Ranked = tuple[int, str]
"""A host left out: its score and its name."""


def rankable(request: VmRequest) -> bool:
    """Can the engine's choice for ``request`` be checked against hosts left out by their figures (and their
    kinds' shapes) alone? A request asking no GPU partition (whether some GPU offers it is asked of every
    shape), held to no host and without alternatives (their answers list every host)."""
    return request.partition is None and request.host is None and not request.alternatives


def ranking(
    request: VmRequest, strategy: Strategy, tenants: Mapping[str, Tenant], names: Sequence[str],
    figures: Sequence[tuple[int, ...]], alike: Callable[[str], Host],
) -> list[Ranked]:
    """Hosts ``names`` by their ``figures``, best first as the engine visits them (score, then name), each with
    its score for the request as its tenant completes it. A request sized per host (no vCPUs or memory) is sized
    as each host's kind (``alike``: a host of the same shape, decoded) sizes it, and scored the highest of its
    sizes (one per page size the kind offers it: the fit takes one of them); a host of a kind that sizes it
    none is left out unranked (it fits nowhere there)."""
    if not names:
        return []
    tenant = tenants.get(request.tenant or "")
    asked = for_tenant(request, tenant) if tenant is not None else request
    if asked.vcpus is not None and asked.memory_kib is not None:
        scores = total_scores(strategy, totals_of(figures), asked)
        return _ordered(zip((int(s) for s in scores), names, strict=True))
    kinds: dict[int, tuple[Host, list[int]]] = {}
    for i, name in enumerate(names):
        host = alike(name)
        kinds.setdefault(id(host), (host, []))[1].append(i)
    ranked: list[Ranked] = []
    for host, at in kinds.values():
        template = SHAPES.shape(host).template
        sizes = [sized for size in template.page_sizes(asked.page_size_kib)
                 if not isinstance(sized := resolve_size(asked, template, size), str)]
        if not sizes:
            continue
        totals = totals_of([figures[i] for i in at])
        best = np.max([total_scores(strategy, totals, sized) for sized in sizes], axis=0)
        ranked.extend(zip((int(s) for s in best), (names[i] for i in at), strict=True))
    return _ordered(ranked)


def _ordered(ranked: Iterable[Ranked]) -> list[Ranked]:
    return sorted(ranked, key=lambda sn: (-sn[0], sn[1]))


def outranks(best_left_out: Ranked | None, result: PlacementResult, request: VmRequest, fleet: Fleet) -> bool:
    """Might a host left out, the best ranked of them ``best_left_out``, come before ``result``'s choice (or
    take a VM ``result`` refuses)? None: no host was left out."""
    if best_left_out is None:
        return False
    chosen = result.chosen
    score = dict(result.scores).get(chosen.host) if chosen is not None else None
    if chosen is None or score is None:
        return True
    hs = fleet.state(chosen.host)
    cells = tuple(c.host_cell for c in chosen.cells)
    mine = host_key(cells, hs.is_adjacent(cells), score, chosen.host)
    best, name = best_left_out
    fewest = request.numa_nodes or 1
    return host_key(tuple(range(fewest)), True, best, name)[:4] < mine[:4]
