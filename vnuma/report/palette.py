"""Colours of the pictures: one hue per tenant, one shade of it per VM, all distinct.

Pure: no I/O. The colour of a VM depends only on the sorted tenant and VM
names of the picture, so the same inventory draws the same picture, and a
test can recompute the colour it should find in a rendered PNG.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterable

FREE = "#f4f4f4"
"""A pCPU, page share or device nothing holds."""
RESERVED = "#5a5a5a"
"""A pCPU kept for the host itself (never placeable)."""
SHARED_POOL = "#b9c7d6"
"""A pCPU of the pool ``shared`` VMs float over."""
OUTLINE = "#303030"
BACKGROUND = "#ffffff"
ROOT_FILL = "#fbfbf7"
SOCKET_FILL = "#eef0e6"
CELL_FILL = "#fff6d9"
MEMORY_ONLY_FILL = "#e3ecf7"
CORE_FILL = "#e6e6e6"
STRANDED = "#e8590c"
"""A free GPU on a cell with no free pCPU or no free page: no request can use it there."""
FREE_GPU = "#2f9e44"
"""A GPU nothing holds, on a cell with room left."""
USED = "#4263eb"
"""The filled part of a use bar in the fleet picture."""
TAINTED = "#c92a2a"
"""A tainted device no VM holds (it takes no new claim)."""
CLEANING = "#f08c00"
"""A cleaning device (it takes no claim until cleaned)."""

_GOLDEN = 0.381966  # successive tenants' hues as far apart as possible
_SHADES = (0.42, 0.30, 0.54, 0.36, 0.48)  # lightness of a tenant's 1st, 2nd... VM


def _hex(h: float, lightness: float, saturation: float) -> str:
    r, g, b = colorsys.hls_to_rgb(h % 1.0, lightness, saturation)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def vm_colours(vms: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """A distinct colour per VM of ``(vm, tenant)`` pairs: a tenant's VMs share its hue.

    Colours never repeat and never equal the fixed colours above: when a
    shade is taken (many tenants), the hue turns by one degree until it is free.
    """
    taken = {FREE, RESERVED, SHARED_POOL, OUTLINE, BACKGROUND, ROOT_FILL, SOCKET_FILL, CELL_FILL,
             MEMORY_ONLY_FILL, CORE_FILL, STRANDED, FREE_GPU, USED, TAINTED, CLEANING}
    by_tenant: dict[str, list[str]] = {}
    for vm, tenant in vms:
        by_tenant.setdefault(tenant or "", []).append(vm)
    out: dict[str, str] = {}
    for t, tenant in enumerate(sorted(by_tenant)):
        hue = (t * _GOLDEN + 0.58) % 1.0
        for i, vm in enumerate(sorted(set(by_tenant[tenant]))):
            lightness = _SHADES[i % len(_SHADES)]
            saturation = 0.75 if (i // len(_SHADES)) % 2 == 0 else 0.5
            turn = (i // (2 * len(_SHADES))) * 7 / 360
            colour = _hex(hue + turn, lightness, saturation)
            while colour in taken:
                turn += 1 / 360
                colour = _hex(hue + turn, lightness, saturation)
            taken.add(colour)
            out[vm] = colour
    return out
