"""The building blocks of vnuma's pictures: boxes laid out in rows, filled rectangles with a tooltip, text.

Pure: no I/O. Every element is a drawsvg element, so text and attribute
values are escaped by the library; a :class:`Box` knows its size before it
is drawn, so a picture is laid out in one pass and drawn in a second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import drawsvg as dw

from vnuma.report import palette

FONT = "DejaVu Sans, Verdana, sans-serif"
PAD = 4

Elements = list[dw.DrawingBasicElement]
Draw = Callable[[float, float], Elements]


@dataclass(frozen=True, slots=True)
class Box:
    """A laid-out part of the picture: its size and how to draw it at a position."""

    w: float
    h: float
    draw: Draw


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds a PU, a page share or a device: its fill, outline, classes and tooltip."""

    fill: str
    title: str
    css: str = ""
    stroke: str = palette.OUTLINE
    stroke_width: float = 0.6


def rect(x: float, y: float, w: float, h: float, o: Owner, id_: str | None = None) -> dw.Rectangle:
    kw: dict[str, object] = {"fill": o.fill, "stroke": o.stroke, "stroke_width": o.stroke_width}
    if id_:
        kw["id"] = id_
    if o.css:
        kw["class_"] = o.css
    """A rectangle filled and outlined as ``o`` says, with ``o.title`` as its tooltip."""
    r = dw.Rectangle(x, y, w, h, **kw)
    r.append_title(o.title)
    return r


def text(content: str, x: float, y: float, size: float = 11, **kw: object) -> dw.Text:
    """Text in the pictures' font (escaped by drawsvg)."""
    kw.setdefault("fill", palette.OUTLINE)
    return dw.Text(content, size, x, y, font_family=FONT, **kw)


def frame(x: float, y: float, w: float, h: float, fill: str, title: str, id_: str) -> dw.Rectangle:
    """The rounded outline of a socket, a cell or a group."""
    r = dw.Rectangle(x, y, w, h, fill=fill, stroke=palette.OUTLINE, stroke_width=1, rx=3, id=id_)
    r.append_title(title)
    return r


def stack(boxes: Sequence[Box], across: int, gap: float = 8) -> Box:
    """Boxes in rows of ``across``, left to right, rows top to bottom."""
    rows = [boxes[i : i + across] for i in range(0, len(boxes), across)]
    w = max((sum(b.w for b in row) + gap * (len(row) - 1) for row in rows), default=0)
    h = sum(max(b.h for b in row) for row in rows) + gap * max(len(rows) - 1, 0)

    def draw(x: float, y: float) -> Elements:
        out: Elements = []
        for row in rows:
            cx = x
            for b in row:
                out += b.draw(cx, y)
                cx += b.w + gap
            y += max(b.h for b in row) + gap
        return out

    return Box(w, h, draw)


def framed(title: str, inner: Box, fill: str, id_: str, tooltip: str, size: float = 12) -> Box:
    """``inner`` in a frame with a bold title above it."""
    head = size + 8

    def draw(x: float, y: float) -> Elements:
        return [
            frame(x, y, inner.w + 2 * PAD + 4, inner.h + head + PAD + 4, fill, tooltip, id_),
            text(title, x + PAD + 2, y + size + 3, size, font_weight="bold"),
            *inner.draw(x + PAD + 2, y + head),
        ]

    return Box(inner.w + 2 * PAD + 4, inner.h + head + PAD + 4, draw)




EMPTY = Box(0, 0, lambda x, y: [])
"""Nothing: a part of the picture that is not there."""
