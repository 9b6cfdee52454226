"""NVLinks between a host's GPUs, as ``nvidia-smi topo -m`` reports them (``NV#``).

Pure: no I/O. The kernel's PCIe facts cannot show NVLink; the operator's
saved ``nvidia-smi topo -m`` text can (``host import --nvidia-smi-topo``,
:mod:`vnuma.sources.nvsmitopo`). The host keeps only the links: one
:class:`NvLink` per linked GPU pair, by host PCI address. Every other level
between two GPUs is the PCIe tree's (:func:`vnuma.topology.pcie.gpu_matrix`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NvLink:
    """``count`` bonded NVLinks between GPUs ``a`` < ``b`` (host PCI addresses)."""

    a: str
    b: str
    count: int


def nvlink_count(links: Iterable[NvLink], a: str, b: str) -> int:
    """The NVLinks between GPUs ``a`` and ``b`` (0: none)."""
    low, high = sorted((a, b))
    return next((link.count for link in links if (link.a, link.b) == (low, high)), 0)


def nvlinks_problem(links: Iterable[NvLink], gpus: frozenset[str]) -> str | None:
    """What is wrong with ``links`` on a host whose GPUs are ``gpus`` (None: nothing)."""
    seen: set[tuple[str, str]] = set()
    for link in links:
        if not link.a < link.b or link.count < 1:
            return f"NVLink {link.a}-{link.b} x{link.count}: GPUs must be in address order and linked at least once"
        for gpu in (link.a, link.b):
            if gpu not in gpus:
                return f"NVLink names {gpu}, which is not one of the host's GPUs"
        if (link.a, link.b) in seen:
            return f"NVLink {link.a}-{link.b} is listed twice"
        seen.add((link.a, link.b))
    return None
