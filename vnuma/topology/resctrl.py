"""A host's cache and memory-bandwidth allocation and monitoring (Linux resctrl), as libvirt reports it.

Pure: no I/O. ``virsh capabilities`` lists, under ``<host><cache>``, the
last-level cache banks that support allocation (Intel CAT, AMD L3 QoS) with
their ``<control>``, under ``<memory_bandwidth>`` the domains that support
bandwidth caps (MBA), and the monitors (CMT occupancy, MBM bandwidth).

A bank's ``id`` is an **L3 cache id**, not a NUMA cell id: with Sub-NUMA
Clustering several cells share one id, on AMD one socket has several. The
host maps ids to cells by CPUs (:meth:`vnuma.topology.Host.cells_of`); the
two numberings are never mixed. A memory-bandwidth node's ``id`` is the L3
id of its domain too.

Sizes are KiB. ``ways`` is the cache size over the control's granularity
(one bit of the way mask). ``min_kib`` is the smallest allocation (libvirt
prints ``min`` only when it is more than one granule: then it is the
granularity). Memory-bandwidth values are in the host's unit (percent on
Intel, MBps under ``mba_MBps``, 1/8 GB/s on AMD) and kept as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CacheType(StrEnum):
    """What a bank or control holds: unified, or code/data apart (CDP)."""

    BOTH = "both"
    CODE = "code"
    DATA = "data"


@dataclass(frozen=True, slots=True)
class CacheControl:
    """A bank's allocation control: granule and minimum in KiB, and the number of classes (CLOS ids)."""

    granularity_kib: int
    min_kib: int
    type: CacheType
    max_allocs: int


@dataclass(frozen=True, slots=True)
class CacheBank:
    """One cache (``level``, ``id``) shared by ``cpus``; no controls when it can only be monitored."""

    id: int
    level: int
    type: CacheType
    size_kib: int
    cpus: frozenset[int]
    controls: tuple[CacheControl, ...] = ()

    @property
    def ways(self) -> int | None:
        """Bits of the way mask (size over the first control's granule); None without allocation."""
        return self.size_kib // self.controls[0].granularity_kib if self.controls else None


@dataclass(frozen=True, slots=True)
class BandwidthNode:
    """One memory-bandwidth domain (an L3 id) shared by ``cpus``; control values None when it has none."""

    id: int
    cpus: frozenset[int]
    granularity: int | None = None
    min: int | None = None
    max_allocs: int | None = None


@dataclass(frozen=True, slots=True)
class Resctrl:
    """Everything a host reports: banks, bandwidth domains, monitor features and the monitor count (RMIDs)."""

    caches: tuple[CacheBank, ...] = ()
    memory_bandwidth: tuple[BandwidthNode, ...] = ()
    cache_monitors: tuple[str, ...] = ()
    bandwidth_monitors: tuple[str, ...] = ()
    max_monitors: int | None = None

    @property
    def empty(self) -> bool:
        return self == NO_RESCTRL


NO_RESCTRL = Resctrl()


def resctrl_problem(resctrl: Resctrl, cpu_ids: frozenset[int]) -> str | None:
    """The first inconsistency of ``resctrl`` on a host with ``cpu_ids``, or None.

    Two banks of one level and id, two bandwidth domains of one id, a CPU
    the host does not have, a granule of 0 or larger than the cache, a
    minimum below one granule, or no allocation classes.
    """
    seen: set[tuple[int, int]] = set()
    for bank in resctrl.caches:
        where = f"cache bank id {bank.id} level {bank.level}"
        if (bank.level, bank.id) in seen:
            return f"{where} is listed twice"
        seen.add((bank.level, bank.id))
        problem = _cpus_problem(bank.cpus, cpu_ids) or _controls_problem(bank)
        if problem:
            return f"{where}: {problem}"
    ids: set[int] = set()
    for node in resctrl.memory_bandwidth:
        where = f"memory bandwidth node id {node.id}"
        if node.id in ids:
            return f"{where} is listed twice"
        ids.add(node.id)
        problem = _cpus_problem(node.cpus, cpu_ids)
        if problem:
            return f"{where}: {problem}"
        if node.granularity is not None and node.granularity < 1:
            return f"{where}: granularity must be 1 or more, not {node.granularity}"
        if node.max_allocs is not None and node.max_allocs < 1:
            return f"{where}: maxAllocs must be 1 or more, not {node.max_allocs}"
    return None


def _cpus_problem(cpus: frozenset[int], cpu_ids: frozenset[int]) -> str | None:
    if not cpus:
        return "names no CPUs"
    stray = sorted(cpus - cpu_ids)
    if stray:
        shown = ",".join(map(str, stray[:8])) + ("..." if len(stray) > 8 else "")
        return f"names CPU(s) {shown} the host does not have"
    return None


def _controls_problem(bank: CacheBank) -> str | None:
    for control in bank.controls:
        if control.granularity_kib < 1:
            return f"control granularity must be at least 1 KiB, not {control.granularity_kib} KiB"
        if control.granularity_kib > bank.size_kib:
            return f"control granularity {control.granularity_kib} KiB is larger than the cache ({bank.size_kib} KiB)"
        if control.min_kib < control.granularity_kib:
            return f"control min {control.min_kib} KiB is below one granule ({control.granularity_kib} KiB)"
        if control.max_allocs < 1:
            return f"control maxAllocs must be 1 or more, not {control.max_allocs}"
    types = [c.type for c in bank.controls]
    if len(set(types)) != len(types):
        return f"controls of type {', '.join(sorted(set(types)))} are listed twice"
    return None
