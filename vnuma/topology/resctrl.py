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


@dataclass(frozen=True, slots=True)
class ResctrlPolicy:
    """What the operator set for a host (``vnuma host reserve --llc-ways N --mem-bw-limit PCT``): the L3
    ways the default group (the host's own processes) keeps on every cache id, None while never set (no
    cache allocation is placed then: vnuma cannot know what the host needs), and how far the VMs'
    memory-bandwidth caps on one domain may add up (percent of the domain, 100: no oversubscription)."""

    llc_default_ways: int | None = None
    mem_bw_limit: int = 100


NO_POLICY = ResctrlPolicy()


def format_policy(policy: ResctrlPolicy) -> str:
    """The ``hosts.resctrl_policy`` column's text: ``""`` for the default, else ``llc_ways=N,mem_bw_limit=P``
    (the parts that differ from it)."""
    parts = []
    if policy.llc_default_ways is not None:
        parts.append(f"llc_ways={policy.llc_default_ways}")
    if policy.mem_bw_limit != NO_POLICY.mem_bw_limit:
        parts.append(f"mem_bw_limit={policy.mem_bw_limit}")
    return ",".join(parts)


def parse_policy(text: str) -> ResctrlPolicy:
    """:func:`format_policy`'s text read back.

    Raises:
        ValueError: text it does not write.
    """
    values: dict[str, int] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in ("llc_ways", "mem_bw_limit") or not value.isdecimal() or len(value) > 6:
            raise ValueError(f"bad resctrl policy {text!r}")
        values[key] = int(value)
    return ResctrlPolicy(values.get("llc_ways"), values.get("mem_bw_limit", NO_POLICY.mem_bw_limit))


def default_schemata(resctrl: Resctrl, ways: int) -> list[str]:
    """The lines an operator writes to ``/sys/fs/resctrl/schemata`` to shrink the default group (the host's
    own processes) to the lowest ``ways`` ways of every L3 cache, leaving the others to VMs' allocations
    (``L3:0=3;1=3``, or ``L3CODE``/``L3DATA`` lines on a CDP host)."""
    banks = sorted(l3_banks(resctrl).values(), key=lambda b: b.id)
    if not banks:
        return []
    mask = format((1 << ways) - 1, "x")
    cdp = any(c.type is not CacheType.BOTH for b in banks for c in b.controls)
    names = ("L3CODE", "L3DATA") if cdp else ("L3",)
    return [f"{name}:" + ";".join(f"{b.id}={mask}" for b in banks) for name in names]


def l3_banks(resctrl: Resctrl) -> dict[int, CacheBank]:
    """The level-3 banks that take allocations, by cache id."""
    return {b.id: b for b in resctrl.caches if b.level == 3 and b.controls}


def l3_ids(resctrl: Resctrl, cpus: frozenset[int] | set[int]) -> tuple[int, ...]:
    """The ids of the level-3 banks (allocatable or not) holding any of ``cpus``, ascending."""
    return tuple(sorted({b.id for b in resctrl.caches if b.level == 3 and not b.cpus.isdisjoint(cpus)}))


def bandwidth_nodes(resctrl: Resctrl) -> dict[int, BandwidthNode]:
    """The memory-bandwidth domains that take caps, by id (an L3 cache id)."""
    return {n.id: n for n in resctrl.memory_bandwidth if n.granularity is not None}


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
