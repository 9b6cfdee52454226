"""A VM's cache slice and bandwidth cap as libvirt's ``<cachetune>`` and ``<memorytune>`` (resctrl).

Pure: no I/O. One allocation group per VM: both elements name all of its
vCPUs (libvirt refuses a cachetune and a memorytune whose vCPU sets partly
overlap), one ``<cache>`` per L3 domain of the placement's ``llc`` (its
ways times the bank's granule, in KiB; a code and a data entry on a CDP
bank, which takes no ``both``), one ``<node>`` per domain of its
``mem_bw``; a monitor over the same vCPUs in each where the host lists that
kind of monitoring (it shares the group's monitoring ID).
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.placement.model import Placement
from vnuma.topology import Host, format_cpuset
from vnuma.topology.resctrl import CacheType, l3_banks


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """``<cache id level type size unit='KiB'>``."""

    id: str
    type: str
    size_kib: str


@dataclass(frozen=True, slots=True)
class Tune:
    """The ``<cachetune>`` and ``<memorytune>`` of one VM (empty tuples: none)."""

    vcpus: str
    caches: tuple[CacheEntry, ...]
    nodes: tuple[tuple[str, str], ...]
    """(domain id, bandwidth)."""
    cache_monitor: bool = False
    """A ``<monitor level='3'>`` over the same vCPUs in the cachetune (the host lists cache monitoring)."""
    bandwidth_monitor: bool = False
    """A ``<monitor>`` in the memorytune (the host lists memory-bandwidth monitoring)."""


def tune_of(host: Host, placement: Placement) -> Tune:
    """The cache and memory tuning of ``placement`` on ``host``."""
    vcpus = format_cpuset(v for c in placement.cells for v in c.vcpus)
    banks = l3_banks(host.resctrl)
    caches: list[CacheEntry] = []
    for cache_id, ways in placement.llc:
        bank = banks[cache_id]
        size = str(ways * bank.controls[0].granularity_kib)
        types = sorted({c.type for c in bank.controls} - {CacheType.BOTH}) or [CacheType.BOTH]
        caches.extend(CacheEntry(str(cache_id), str(t), size) for t in types)
    nodes = tuple((str(i), str(cap)) for i, cap in placement.mem_bw)
    r = host.resctrl
    return Tune(vcpus, tuple(caches), nodes, bool(caches and r.cache_monitors), bool(nodes and r.bandwidth_monitors))
