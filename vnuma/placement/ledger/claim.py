"""What admission sees of one placement (:class:`Claim`), what a check answers (:class:`Refusal`), and the
pages and GPUs a placement takes: shared by the checks (:mod:`.admit`) and the ledger.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from vnuma.placement.ledger.cell import CoreState
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import Isolation, MemoryMode, Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.topology import DeviceKind

REPLACE_HINT = "the host changed since the placement was computed; place the VM again"


class Claim:
    """One placement as admission sees it: the host's ledger, the tenant, what the tenant holds, and
    (worked out once for every check) the pCPUs it holds, their cores and the cells it touches."""

    __slots__ = ("cells", "cores", "held", "hs", "isolations", "p", "pcpus", "returning", "tenant", "used")

    def __init__(
        self, p: Placement, hs: HostState, tenant: Tenant, isolations: Mapping[str, Isolation], used: Usage,
        returning: bool = False,
    ) -> None:
        self.p, self.hs, self.tenant, self.isolations, self.used = p, hs, tenant, isolations, used
        self.returning = returning
        """The VM goes back to the claims it held before a journaled run (an undo): see ``cordoned``."""
        self.held = hs.held_pcpus(p) if p.host == hs.name else frozenset()
        self.pcpus = self.held | p.shared_pcpus if p.shared_pcpus else self.held
        """Every pCPU it holds or floats over."""
        self.cores: dict[int, CoreState] = {}
        """Each of those (placeable) pCPUs' core."""
        cells = {ca.host_cell for ca in p.cells}
        index, host_cells = hs.shape.cpu_index, hs.cells
        for cpu in self.pcpus:
            i = index.get(cpu)
            if i is not None:
                cell = host_cells[i]
                self.cores[cpu] = cell.cores[cell.core_at[cpu]]
                cells.add(cell.id)
        self.cells = frozenset(cells)
        """The CPU cells it uses: its guest cells' host cells and the cells of its pCPUs."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a check refuses a claim; ``hint`` says what to do about it."""

    reason: str
    hint: str | None = None


class Check(Protocol):
    """A named admission check."""

    name: str

    def check(self, c: Claim) -> Refusal | None:
        """Why ``c`` is refused, or None."""
        ...


def page_needs(p: Placement) -> dict[tuple[int, int], int]:
    """Pages the placement takes per (host cell, page size KiB), the cold tier's memory-only cell included,
    zero counts left out (:func:`pages_by_cell`)."""
    cells = p.cells
    if any(ca.memory_mode is MemoryMode.INTERLEAVE for ca in cells):
        cells = tuple(sorted(cells, key=lambda c: c.guest_cell))
    needs = pages_by_cell(
        [(ca.host_cell, ca.page_size_kib, ca.pages if ca.page_size_kib > 0 else 0, ca.memory_mode) for ca in cells]
    )
    for ca in p.cold:
        key = (ca.host_cell, ca.page_size_kib)
        if ca.page_size_kib > 0 and ca.pages > 0:
            needs[key] = needs.get(key, 0) + ca.pages
    return needs


def pages_by_cell(guest_cells: Sequence[tuple[int, int, int, MemoryMode]]) -> dict[tuple[int, int], int]:
    """Pages per (host cell, page size KiB) of guest cells given in guest order as (host cell, page size,
    pages, memory mode); zero counts left out.

    A guest cell takes its pages from its host cell, except an ``interleave``
    one: its pages go round-robin over all the VM's host cells, the turn
    carried from one interleaved cell to the next, so equal cells
    interleaved over as many host cells take what they would take strict,
    to the page. The engine's fit (:mod:`vnuma.placement.fit`) asks this too.
    """
    needs: dict[tuple[int, int], int] = {}
    spread = sorted({cell for cell, _size, _n, _mode in guest_cells})
    k, turn = len(spread), 0
    for cell, size, n, mode in guest_cells:
        if mode is MemoryMode.INTERLEAVE and k > 1:
            for i, target in enumerate(spread):
                key = (target, size)
                needs[key] = needs.get(key, 0) + n // k + (1 if (i - turn) % k < n % k else 0)
            turn = (turn + n) % k
        else:
            needs[(cell, size)] = needs.get((cell, size), 0) + n
    return {key: n for key, n in needs.items() if n > 0}


def gpu_count(p: Placement) -> int:
    """GPUs the placement passes through."""
    return sum(1 for d in p.devices if d.kind is DeviceKind.GPU)
