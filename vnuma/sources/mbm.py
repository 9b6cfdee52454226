"""Memory-bandwidth monitoring (resctrl MBM) as libvirt reports it in a domain's memory stats.

Pure: no I/O. ``virsh domstats --memory`` / ``virConnectGetAllDomainStats``
with ``VIR_DOMAIN_STATS_MEMORY`` gives, for a domain whose ``<cputune>``
holds ``<memorytune><monitor vcpus=.../></memorytune>`` on a host with
resctrl MBM, flat keys::

    memory.bandwidth.monitor.count=1
    memory.bandwidth.monitor.0.name=vcpus_0-3
    memory.bandwidth.monitor.0.vcpus=0-3
    memory.bandwidth.monitor.0.node.count=2
    memory.bandwidth.monitor.0.node.0.id=0
    memory.bandwidth.monitor.0.node.0.bytes.local=4807114752
    memory.bandwidth.monitor.0.node.0.bytes.total=10208067584

``bytes.local`` counts traffic to the memory controller local to the
node's L3 domain, ``bytes.total`` all of it; their ratio is the share of
the VM's memory traffic that stayed local. Keys that are missing or not
numbers are skipped: a host without MBM reports no monitor at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_PREFIX = "memory.bandwidth.monitor."
_MAX_MONITORS = 4096
_MAX_NODES = 1024


@dataclass(frozen=True, slots=True)
class NodeBandwidth:
    """Bytes one monitor counted on one host node: to its local controller, and in all."""

    node: int
    local_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class Monitor:
    """One MBM monitor of a domain (a vCPU group) and its per-node byte counters."""

    name: str
    vcpus: str
    nodes: tuple[NodeBandwidth, ...]


def _count(stats: Mapping[str, object], key: str, cap: int) -> int:
    value = stats.get(key)
    return min(value, cap) if isinstance(value, int) and value > 0 else 0


def _whole(value: object) -> bool:
    """A count of bytes or an id: an int (not a bool) from 0 up."""
    return type(value) is int and value >= 0  # type: ignore[operator]


def parse_memory_bandwidth(stats: Mapping[str, object]) -> tuple[Monitor, ...]:
    """Every MBM monitor in one domain's stats dict (empty when the host has none)."""
    monitors: list[Monitor] = []
    get = stats.get  # (read for every VM of every host each round of `vnuma watch`: lookups kept few)
    for m in range(_count(stats, _PREFIX + "count", _MAX_MONITORS)):
        base = f"{_PREFIX}{m}."
        nodes: list[NodeBandwidth] = []
        for n in range(_count(stats, base + "node.count", _MAX_NODES)):
            node = f"{base}node.{n}."
            ident, local, total = get(node + "id"), get(node + "bytes.local"), get(node + "bytes.total")
            if _whole(ident) and _whole(local) and _whole(total):
                nodes.append(NodeBandwidth(ident, local, total))  # type: ignore[arg-type]
        name, vcpus = get(base + "name"), get(base + "vcpus")
        monitors.append(Monitor(str(name or f"monitor{m}"), str(vcpus or ""), tuple(nodes)))
    return tuple(monitors)


def local_share(monitors: tuple[Monitor, ...]) -> tuple[int, int, float | None]:
    """(local bytes, total bytes, local / total) over every monitor and node; the share is None at 0 bytes."""
    local = sum(n.local_bytes for m in monitors for n in m.nodes)
    total = sum(n.total_bytes for m in monitors for n in m.nodes)
    return local, total, (min(local, total) / total if total else None)


_CACHE = "cpu.cache.monitor."


@dataclass(frozen=True, slots=True)
class CacheMonitor:
    """One CMT monitor of a domain (a vCPU group): LLC bytes it occupies per cache id, now."""

    name: str
    vcpus: str
    banks: tuple[tuple[int, int], ...]


def parse_cache_occupancy(stats: Mapping[str, object]) -> tuple[CacheMonitor, ...]:
    """Every CMT monitor in one domain's ``VIR_DOMAIN_STATS_CPU_TOTAL`` stats (``cpu.cache.monitor.<n>.bank.<i>
    .id`` and ``.bytes``: an occupancy, not a counter); empty when the host has none."""
    monitors: list[CacheMonitor] = []
    get = stats.get
    for m in range(_count(stats, _CACHE + "count", _MAX_MONITORS)):
        base = f"{_CACHE}{m}."
        banks: list[tuple[int, int]] = []
        for b in range(_count(stats, base + "bank.count", _MAX_NODES)):
            ident, size = get(f"{base}bank.{b}.id"), get(f"{base}bank.{b}.bytes")
            if _whole(ident) and _whole(size):
                banks.append((ident, size))  # type: ignore[arg-type]
        name, vcpus = get(base + "name"), get(base + "vcpus")
        monitors.append(CacheMonitor(str(name or f"monitor{m}"), str(vcpus or ""), tuple(banks)))
    return tuple(monitors)
