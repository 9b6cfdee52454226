"""``stats --svg``: the fleet at a glance, one row per host, one block per cell, filled by use.

Pure: no I/O; returns the SVG text (:func:`fleet_svg`). Per CPU cell, three
bars: pCPUs (claimed, reserved, free), memory (the cell's page pools,
claimed KiB of total) and one square per GPU: claimed (a tainted GPU a VM
still holds too), free, **stranded** — free on a cell with no free pCPU or
no free page left, so no request can use it there — or, never free,
**tainted** or **cleaning** (no VM holds it). Figures are the placement ledger's
(:func:`vnuma.report.usage.cell_use`), as ``vnuma stats`` prints them.

Past :data:`GROUP_AT` hosts the picture groups hosts of one shape (the same
cells, pools and GPUs) and the same use (each cell's pCPU and memory use
rounded to a tenth, its GPUs claimed, stranded, tainted and cleaning) into one row, ``N ×``,
largest groups first, with the hosts' names in the row's tooltip: a few
hundred rows stay readable, thousands do not.

Element ids: ``row-I`` (a host or a group, top to bottom), ``row-I-cell-C``,
``row-I-cell-C-gpu-K``; stranded, tainted and cleaning GPU squares have the class ``stranded``,
``tainted`` or ``cleaning``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import drawsvg as dw

from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement
from vnuma.report import palette
from vnuma.report.svgparts import Elements, Owner, rect, text
from vnuma.report.usage import CellUse, cell_use
from vnuma.topology import Host, format_size_kib

GROUP_AT = 200
"""More hosts than this: hosts of one shape and use share a row."""
LABEL_W, CELL_W, CELL_GAP, ROW_H = 190, 74, 6, 40
BAR_W, BAR_H, GPU = 62, 7, 7
NAMES_IN_TOOLTIP = 20


@dataclass(frozen=True, slots=True)
class CellLoad:
    """What the fleet picture shows of one cell."""

    cell: int
    pcpus: int
    claimed: int
    reserved: int
    memory_kib: int
    memory_claimed_kib: int
    gpus: int
    gpus_claimed: int
    gpus_stranded: int
    gpus_tainted: int = 0
    """Tainted GPUs no VM holds (a VM's tainted GPU counts as claimed)."""
    gpus_cleaning: int = 0
    """Cleaning GPUs (no VM holds one)."""

    @property
    def key(self) -> tuple[int, ...]:
        """Shape and use, rounded: what makes two hosts' rows alike in the grouped picture."""
        cpu = round(10 * self.claimed / self.pcpus) if self.pcpus else 0
        mem = round(10 * self.memory_claimed_kib / self.memory_kib) if self.memory_kib else 0
        return (self.pcpus, self.reserved, self.memory_kib, self.gpus, cpu, mem, self.gpus_claimed,
                self.gpus_stranded, self.gpus_tainted, self.gpus_cleaning)


def _load(c: CellUse) -> CellLoad:
    total = sum(p.total * p.size_kib for p in c.pools)
    claimed = sum(p.claimed * p.size_kib for p in c.pools)
    free_gpus = c.gpus_free
    no_room = c.pcpus_free == 0 or all(p.free == 0 for p in c.pools)
    held = c.gpus_total - free_gpus - c.gpus_idle_blocked
    return CellLoad(c.cell, c.pcpus_total, c.pcpus_claimed, c.pcpus_reserved, total, claimed, c.gpus_total,
                    held, free_gpus if no_room else 0, c.gpus_idle_blocked - c.gpus_cleaning, c.gpus_cleaning)


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the picture: a host, or the hosts of one group."""

    hosts: tuple[str, ...]
    cells: tuple[CellLoad, ...]


def fleet_rows(hosts: Sequence[Host], placements: Sequence[Placement],
               isolation: Mapping[str, Isolation]) -> list[Row]:
    """The rows of the picture: one per host in name order, or grouped past :data:`GROUP_AT` hosts."""
    fleet = Fleet(list(hosts), list(placements), dict(isolation))
    rows = [Row((h.name,), tuple(_load(c) for c in cell_use(fleet, h.name, largest=False)))
            for h in sorted(hosts, key=lambda h: h.name)]
    if len(rows) <= GROUP_AT:
        return rows
    groups: dict[tuple[tuple[int, ...], ...], list[Row]] = {}
    for r in rows:
        groups.setdefault(tuple(c.key for c in r.cells), []).append(r)
    merged = [Row(tuple(n for r in rs for n in r.hosts), rs[0].cells) for rs in groups.values()]
    return sorted(merged, key=lambda r: (-len(r.hosts), r.hosts[0]))


def _share(n: int, d: int) -> float:
    return n / d if d else 0.0


def _bar(x: float, y: float, parts: Sequence[tuple[float, str]], title: str, id_: str) -> Elements:
    """A bar split into shares (0..1) of the given colours, the rest free."""
    out: Elements = [rect(x, y, BAR_W, BAR_H, Owner(palette.FREE, title, stroke_width=0.5), id_)]
    cx = x
    for share, colour in parts:
        w = BAR_W * max(0.0, min(share, 1.0))
        if w > 0:
            out.append(rect(cx, y, w, BAR_H, Owner(colour, title, stroke=colour, stroke_width=0)))
            cx += w
    return out


def _cell(x: float, y: float, c: CellLoad, rid: str) -> Elements:
    cid = f"{rid}-cell-{c.cell}"
    box = dw.Rectangle(x, y, CELL_W - CELL_GAP, ROW_H - 6, fill=palette.CELL_FILL, stroke=palette.OUTLINE,
                       stroke_width=0.5, rx=2, id=cid)
    box.append_title(f"cell {c.cell}")
    out: Elements = [box]
    bx = x + 3
    cpus = [(_share(c.claimed, c.pcpus), palette.USED), (_share(c.reserved, c.pcpus), palette.RESERVED)]
    out += _bar(bx, y + 3, cpus,
                f"cell {c.cell}: pCPUs {c.claimed} claimed, {c.reserved} reserved of {c.pcpus}", f"{cid}-pcpus")
    out += _bar(bx, y + 3 + BAR_H + 2, [(_share(c.memory_claimed_kib, c.memory_kib), palette.USED)],
                f"cell {c.cell}: memory {format_size_kib(c.memory_claimed_kib) if c.memory_claimed_kib else '0'} of "
                f"{format_size_kib(c.memory_kib)} claimed",
                f"{cid}-memory")
    gy = y + 3 + 2 * (BAR_H + 2) + 1
    free_ok = c.gpus - c.gpus_claimed - c.gpus_stranded - c.gpus_tainted - c.gpus_cleaning
    kinds = (["claimed"] * c.gpus_claimed + ["free"] * free_ok + ["stranded"] * c.gpus_stranded
             + ["tainted"] * c.gpus_tainted + ["cleaning"] * c.gpus_cleaning)
    fills = {"claimed": palette.USED, "free": palette.FREE_GPU, "stranded": palette.STRANDED,
             "tainted": palette.TAINTED, "cleaning": palette.CLEANING}
    for k, kind in enumerate(kinds):
        gx = bx + (k % 7) * (GPU + 2)
        row_y = gy + (k // 7) * (GPU + 2)
        o = Owner(fills[kind], f"cell {c.cell}: GPU {k + 1} of {c.gpus}: {kind}",
                  kind if kind in ("stranded", "tainted", "cleaning") else "", stroke=palette.OUTLINE, stroke_width=0.4)
        out.append(rect(gx, row_y, GPU, GPU, o, f"{cid}-gpu-{k}"))
    return out


def _legend(x: float, y: float) -> Elements:
    out: Elements = []
    items = [(palette.USED, "claimed"), (palette.RESERVED, "reserved"), (palette.FREE, "free"),
             (palette.FREE_GPU, "free GPU"), (palette.STRANDED, "stranded GPU (its cell has no free pCPU or page)"),
             (palette.TAINTED, "tainted GPU"), (palette.CLEANING, "cleaning GPU")]
    cx = x
    for colour, label in items:
        out.append(rect(cx, y, 12, 10, Owner(colour, label, stroke_width=0.5)))
        out.append(text(label, cx + 16, y + 9, 10))
        cx += 24 + 6.2 * len(label)
    return out


def fleet_svg(hosts: Sequence[Host], placements: Sequence[Placement], isolation: Mapping[str, Isolation]) -> str:
    """The fleet picture of ``hosts`` and what ``placements`` hold on them, as SVG text."""
    rows = fleet_rows(hosts, placements, isolation)
    grouped = len(hosts) > GROUP_AT
    most = max((len(r.cells) for r in rows), default=1)
    width = LABEL_W + most * CELL_W + 20
    height = 56 + len(rows) * ROW_H + 10
    d = dw.Drawing(width, height, id_prefix="vnuma")
    d.append(dw.Rectangle(0, 0, width, height, fill=palette.BACKGROUND))
    title = f"{len(hosts)} host{'s' * (len(hosts) != 1)}"
    if grouped:
        title += f" in {len(rows)} rows (hosts of one shape and use share a row)"
    title += " · per cell: pCPUs, memory, GPUs"
    d.append(text(title, 10, 18, 13, font_weight="bold"))
    for el in _legend(10, 28):
        d.append(el)
    y = 50.0
    for i, r in enumerate(rows):
        rid = f"row-{i}"
        group = dw.Group(id=rid)
        names = r.hosts[:NAMES_IN_TOOLTIP]
        more = f" and {len(r.hosts) - len(names)} more" if len(r.hosts) > len(names) else ""
        group.append_title(", ".join(names) + more)
        label = r.hosts[0] if len(r.hosts) == 1 else f"{len(r.hosts)} × {r.hosts[0]}…"
        group.append(text(label if len(label) <= 28 else label[:27] + "…", 10, y + ROW_H / 2, 11))
        for k, c in enumerate(r.cells):
            for el in _cell(LABEL_W + k * CELL_W, y, c, rid):
                group.append(el)
        d.append(group)
        y += ROW_H
    return d.as_svg()
