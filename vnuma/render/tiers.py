"""The guest's memory tiers: its cold cell's binding and the guest HMAT copied from the host.

Pure: no I/O. A VM with a cold tier (:attr:`Placement.cold`) gets one more guest cell with memory and no
vCPUs (``<cell id memory unit/>`` without ``cpus``), bound by its own ``<memnode>`` to the host memory-only
cell. Where the host publishes HMAT, the guest gets ``<interconnects>`` in its ``<numa>``: for every guest
cell with vCPUs (libvirt refuses a memory-only initiator) and every guest cell, the host's latency and
bandwidth between the host cells they map to (read/access figures as ``access``, write figures as
``write``); pairs the host does not rate are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vnuma.placement.model import CellAssignment
from vnuma.topology import Host


@dataclass(frozen=True, slots=True)
class Interconnect:
    """One ``<latency>`` (ns, ``unit`` empty) or ``<bandwidth>`` (KiB/s) of the guest's ``<interconnects>``."""

    element: str
    initiator: str
    target: str
    type: str
    value: str
    unit: str


_MATRICES = (
    ("latency", "access", "latency_ns", ""),
    ("latency", "write", "write_latency_ns", ""),
    ("bandwidth", "access", "bandwidth_kib_s", "KiB"),
    ("bandwidth", "write", "write_bandwidth_kib_s", "KiB"),
)


def interconnects(host: Host, cells: Sequence[CellAssignment]) -> tuple[Interconnect, ...]:
    """The guest HMAT for ``cells`` (every guest cell, the cold one included) on ``host``; empty without HMAT."""
    if host.hmat.empty:
        return ()
    matrices = host.hmat.matrices()
    out = []
    for element, kind, key, unit in _MATRICES:
        rated = {(i, t): v for i, t, v in matrices[key]}
        for a in cells:
            if not a.vcpus:
                continue
            for b in cells:
                value = rated.get((a.host_cell, b.host_cell))
                if value is not None:
                    out.append(Interconnect(element, str(a.guest_cell), str(b.guest_cell), kind, str(value), unit))
    return tuple(out)
