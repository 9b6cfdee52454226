"""Well-formedness of a guest NUMA distance (SLIT) matrix, as libvirt accepts it.

Pure: no I/O. libvirt 9.0.0 corrupts its heap on a ``<distances>`` block it
rejects (see LIBVIRT.md), so both the view builder (which omits distances it
cannot express) and the validator (which refuses them) use this one rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vnuma.topology import Host

LOCAL_DISTANCE = 10
MAX_DISTANCE = 255

Matrix = Mapping[int, Mapping[int, int]]


def distance_problem(matrix: Matrix, cell_ids: frozenset[int]) -> str | None:
    """First reason ``matrix`` (cell -> sibling -> value) is not a libvirt-safe SLIT, or None.

    Rules: every cell lists every cell (ids in ``cell_ids``, no others),
    values in 10..255, the diagonal is 10, off-diagonal values are not 10
    (libvirt refuses them), and the matrix is symmetric.
    """
    for cell in sorted(matrix):
        if cell not in cell_ids:
            return f"cell {cell} is not a guest NUMA cell"
        row = matrix[cell]
        for sibling in sorted(row):
            value = row[sibling]
            where = f"cell {cell} sibling id={sibling} value={value}"
            if sibling not in cell_ids:
                return f"{where}: there is no guest NUMA cell {sibling}"
            if not LOCAL_DISTANCE <= value <= MAX_DISTANCE:
                return f"{where}: distances must be within {LOCAL_DISTANCE}..{MAX_DISTANCE}"
            if sibling == cell and value != LOCAL_DISTANCE:
                return f"{where}: the distance of a cell to itself must be {LOCAL_DISTANCE}"
            if sibling != cell and value == LOCAL_DISTANCE:
                return f"{where}: only a cell's distance to itself may be {LOCAL_DISTANCE}"
        missing = cell_ids - set(row)
        if missing:
            return f"cell {cell} gives no distance to cell(s) {', '.join(map(str, sorted(missing)))}"
    for cell in sorted(cell_ids - set(matrix)):
        return f"cell {cell} has no <distances> while other cells do"
    for cell in sorted(matrix):
        for sibling, value in sorted(matrix[cell].items()):
            back = matrix[sibling][cell]
            if back != value:
                return (
                    f"cell {cell} sibling id={sibling} value={value}: not symmetric "
                    f"(cell {sibling} gives {back} back)"
                )
    return None


def mirrored(host: Host, cells: Iterable[tuple[int, int]]) -> dict[int, dict[int, int]]:
    """Guest cell -> guest cell -> distance, copied from the host cells of ``cells`` ((guest cell, host cell)
    pairs: the placed cells, the cold cell, the GPUs' nodes); empty when libvirt could not take them.

    Empty for one cell, when the host gives no distance for some pair, or
    when the mirror is not a valid SLIT (two guest cells on one host cell
    would need an off-diagonal 10, which libvirt refuses). The rendered
    ``<distances>`` and the guest view both come from here.
    """
    cells = list(cells)
    if len(cells) < 2:
        return {}
    matrix: dict[int, dict[int, int]] = {}
    for guest_a, host_a in cells:
        row: dict[int, int] = {}
        for guest_b, host_b in cells:
            value = host.cell(host_a).distance_to(host_b)
            if value is None:
                return {}
            row[guest_b] = value
        matrix[guest_a] = row
    if distance_problem(matrix, frozenset(matrix)) is not None:
        return {}
    return matrix
