"""The history picture of ``stats --bandwidth --since``: one time-series chart per VM and per L3 domain.

Pure: no I/O. Each chart is a :class:`Chart` (a title, its lines of (time,
value) points, one unit); charts are stacked top to bottom, all on the same
time axis (the earliest to the latest point of the picture), each on its own
value axis from 0 to its largest value. A gap between two points longer than
``gap_s`` breaks the line (a host that was not read, a restarted watch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import drawsvg as dw

from vnuma.report import palette
from vnuma.report.svgparts import text

WIDTH, CHART_H, LEFT, TOP, GAP = 720.0, 90.0, 70.0, 24.0, 34.0
LOCAL, REMOTE, TOTAL = "#2f9e44", "#e8590c", "#4263eb"
"""The colours of a VM's local and remote traffic and of a domain's total."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a chart: its label, colour and points (Unix seconds, value), in time order."""

    label: str
    colour: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Chart:
    """A titled chart of lines in one unit."""

    title: str
    unit: str
    lines: tuple[Line, ...]


def _runs(points: Sequence[tuple[float, float]], gap_s: float) -> list[list[tuple[float, float]]]:
    runs: list[list[tuple[float, float]]] = []
    for p in points:
        if runs and p[0] - runs[-1][-1][0] <= gap_s:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _chart(c: Chart, y: float, t0: float, t1: float, gap_s: float) -> list[dw.DrawingBasicElement]:
    top = max((v for line in c.lines for _, v in line.points), default=0.0) or 1.0
    span = (t1 - t0) or 1.0
    plot_w = WIDTH - LEFT - 10

    def at(t: float, v: float) -> tuple[float, float]:
        return LEFT + (t - t0) / span * plot_w, y + CHART_H - v / top * CHART_H

    out: list[dw.DrawingBasicElement] = [
        text(c.title, LEFT, y - 6, 12, font_weight="bold"),
        dw.Rectangle(LEFT, y, plot_w, CHART_H, fill=palette.BACKGROUND, stroke=palette.OUTLINE, stroke_width=0.6),
        text(f"{top:,.0f} {c.unit}", LEFT - 4, y + 10, 9, text_anchor="end"),
        text(f"0 {c.unit}", LEFT - 4, y + CHART_H, 9, text_anchor="end"),
    ]
    for n, line in enumerate(c.lines):
        out.append(text(line.label, WIDTH - 12 - 70 * n, y - 6, 10, text_anchor="end", fill=line.colour))
        for run in _runs(line.points, gap_s):
            coords = [xy for p in run for xy in at(*p)]
            if len(run) == 1:
                out.append(dw.Circle(coords[0], coords[1], 1.5, fill=line.colour))
            else:
                out.append(dw.Lines(*coords, close=False, fill="none", stroke=line.colour, stroke_width=1.2))
    return out


def history_svg(charts: Sequence[Chart], first: str, last: str, gap_s: float) -> str:
    """The picture (SVG text) of ``charts``, the time axis labelled ``first`` and ``last`` (ISO times)."""
    times = [t for c in charts for line in c.lines for t, _ in line.points]
    t0, t1 = (min(times), max(times)) if times else (0.0, 1.0)
    height = TOP + len(charts) * (CHART_H + GAP) + 20
    d = dw.Drawing(WIDTH, height, id_prefix="vnuma")
    d.append(dw.Rectangle(0, 0, WIDTH, height, fill=palette.BACKGROUND))
    d.append(text(f"{first}  …  {last}", LEFT, 14, 11))
    for i, c in enumerate(charts):
        for element in _chart(c, TOP + GAP / 2 + i * (CHART_H + GAP), t0, t1, gap_s):
            d.append(element)
    if not charts:
        d.append(text("no samples in the history for this period", LEFT, 40, 12))
    return d.as_svg()
