"""hwloc's NUMA distance matrices (``<distances2 type="NUMANode">``) -> each cell's SLIT distances.

Pure: no I/O; :mod:`vnuma.sources.hwloc` hands over the parsed document.
The latency matrix is read (``name="NUMALatency"``, else the first whose
``kind`` says latency, else the first), indexed by ``os`` or ``gp`` index.
An ``os`` index is the cell's id even when the file has no such node: the
usable step (:func:`vnuma.topology.leftout.usable`) leaves out the
distances to it, as for a capabilities ``<sibling>`` naming a missing cell,
and so it does for a negative distance; a ``gp`` index the file has no node
of names nothing and is refused.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.xmlsafe import element_where, read_int

_KIND_MEANS_LATENCY = 4
_KIND = re.compile(r"^[0-9]{1,9}$")


def read_distances(
    root: etree._Element, gp_ids: Mapping[int, int], what: str
) -> dict[int, tuple[tuple[int, int], ...]]:
    """Each node's row of the latency matrix, by node id (empty without a matrix); ``gp_ids``: the nodes'
    gp indexes -> os indexes.

    Raises:
        InvalidInputError: a matrix whose sizes disagree, an unreadable number, an
            index listed twice, an unknown indexing, or a gp index no node has.
    """
    matrices = [m for m in root.findall("distances2") if m.get("type") == "NUMANode"]
    if not matrices:
        return {}
    matrix = next((m for m in matrices if m.get("name") == "NUMALatency"), None)
    matrix = matrix if matrix is not None else next((m for m in matrices if _means_latency(m)), matrices[0])
    count = read_int(matrix.get("nbobjs"), what=what, element=matrix, field="attribute nbobjs")
    indexes = _numbers(matrix.findall("indexes"), what)
    values = _numbers(matrix.findall("u64values"), what, allow_negative=True)  # the usable step leaves those out
    if len(indexes) != count or len(values) != count * count:
        raise InvalidInputError(
            f"{element_where(what, matrix)}: distance matrix for {count} nodes has "
            f"{len(indexes)} indexes and {len(values)} values"
        )
    ids = _node_ids(matrix, indexes, gp_ids, what)
    return {
        ids[i]: tuple(sorted((ids[j], values[i * count + j]) for j in range(count))) for i in range(count)
    }


def _means_latency(matrix: etree._Element) -> bool:
    kind = (matrix.get("kind") or "0").strip()
    # Not str.isdigit(): it accepts "²", which int() refuses.
    return bool(_KIND.match(kind)) and bool(int(kind) & _KIND_MEANS_LATENCY)


def _numbers(elements: Iterable[etree._Element], what: str, *, allow_negative: bool = False) -> list[int]:
    numbers: list[int] = []
    for el in elements:
        for token in (el.text or "").split():
            numbers.append(read_int(token, what=what, element=el, field="a number", allow_negative=allow_negative))
    return numbers


def _node_ids(matrix: etree._Element, indexes: list[int], gp_ids: Mapping[int, int], what: str) -> list[int]:
    indexing = matrix.get("indexing", "os")
    if indexing not in ("os", "gp"):
        raise InvalidInputError(f"{element_where(what, matrix)}: unknown distance indexing {indexing!r}")
    twice = sorted(i for i, n in Counter(indexes).items() if n > 1)
    if twice:
        where = element_where(what, matrix)
        raise InvalidInputError(
            f"{where}: distance matrix lists NUMA node(s) {twice} ({indexing} index) twice"
        )
    if indexing == "os":
        return indexes
    missing = [i for i in indexes if i not in gp_ids]
    if missing:
        raise InvalidInputError(
            f"{element_where(what, matrix)}: distance matrix names NUMA node(s) {missing} ({indexing} index) "
            "that are not in the topology"
        )
    return [gp_ids[i] for i in indexes]
