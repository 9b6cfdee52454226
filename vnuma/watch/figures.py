"""One round's figures for one host: per VM, per L3 domain, per host cell.

Pure: no I/O. A :class:`Reading` is what one host said at one time (its
running domains' ``VIR_DOMAIN_STATS_MEMORY | CPU_TOTAL | BALLOON`` stats and its cells'
free pages); :func:`figures` compares it with the host's previous reading:

* rates are counter differences over the real time between the two readings
  (``at``, seconds), never over the nominal interval;
* a VM without memory-bandwidth or cache monitors (no resctrl monitoring) still has
  its CPU use, with no traffic (and is listed in ``unmonitored``);
* a counter that went down (MBM bytes or ``cpu.time``: the domain restarted, its
  monitor was re-created) gives that VM no figures this round, never a negative
  rate; a VM in one reading only gives none either;
* a reading not later than the previous one is refused (:class:`ClockError`):
  time went backwards, or the same reading was given twice;
* remote bytes are total − local (the traffic that left the VM's L3 domain's
  own memory controller), the remote share their part of the total;
* CPU use is ``cpu.time`` (ns) difference / elapsed: cores kept busy;
* memory is a gauge of the current reading, not a rate: ``balloon.rss`` (KiB the VM's process holds resident
  on the host) and ``balloon.current`` (KiB, the balloon's current size), each None when not reported;
* noisy domains and per-domain totals are :func:`vnuma.watch.bandwidth.assess`'s
  (today's rule, the one copy);
* a cell's drift is what the inventory holds as free minus what the host
  reports free, per page size (4 KiB: the cell's free memory), clamped at zero
  (a host with more free than the inventory thinks — VMs defined, not running —
  is no drift), summed in KiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vnuma.errors import InvalidInputError
from vnuma.placement.model import Placement
from vnuma.watch.bandwidth import DomainTotal, VmRate, assess, counters, rate_of

Stats = Mapping[str, Mapping[str, object]]
FreePages = Mapping[int, Mapping[int, int]]


def remote(local_bps: int, total_bps: int) -> tuple[int, float | None]:
    """Remote bytes/s (total − local: the traffic that left the L3 domain's own memory controller, never below
    zero) and their share of the total (None at no traffic)."""
    far = max(total_bps - local_bps, 0)
    return far, (far / total_bps if total_bps else None)


class ClockError(InvalidInputError):
    """A reading not later than the one before it on the same host (the clock went backwards)."""


@dataclass(frozen=True, slots=True, eq=False)
class Reading:
    """One host at one time: its domains' stats by name, and free pages per cell and page size (KiB)
    (None: not read)."""

    host: str
    at: float
    domains: Stats
    free: FreePages | None = None
    parsed: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict, repr=False)
    """Each domain's MBM counters once read (:func:`counters`): a reading is the current one of a round and the
    previous one of the next, and is parsed once."""

    def counters_of(self, name: str) -> dict[int, tuple[int, int]]:
        """:func:`counters` of domain ``name``'s stats, read once."""
        found = self.parsed.get(name)
        if found is None:
            found = self.parsed[name] = counters(self.domains[name])
        return found


@dataclass(frozen=True, slots=True)
class VmFigures:
    """One VM over one round: its rates (with its noisy domains), CPU use (cores), resident memory on the host
    and the balloon's size (KiB, the current reading's ``balloon.rss`` and ``balloon.current``); None: not
    reported."""

    rate: VmRate
    cpu: float | None
    rss_kib: int | None = None
    balloon_kib: int | None = None

    @property
    def vm(self) -> str:
        return self.rate.vm

    @property
    def remote_bps(self) -> int:
        return remote(self.rate.local_bps, self.rate.total_bps)[0]

    @property
    def remote_share(self) -> float | None:
        return remote(self.rate.local_bps, self.rate.total_bps)[1]

    @property
    def llc_bytes(self) -> int:
        return sum(size for _, size in self.rate.llc)


@dataclass(frozen=True, slots=True)
class CellFigures:
    """One host cell: free KiB as the inventory holds it and as the host reports it, the drift (KiB), and per
    page size (KiB) the pages free in the inventory and on the host."""

    cell: int
    inventory_free_kib: int
    host_free_kib: int
    drift_kib: int
    pages: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class RoundFigures:
    """A host's round: when, over how long (None: its first reading, no rates), the figures, and the VMs
    left out (``resets``: a counter went down; ``unknown``: not placed on this host in the inventory)."""

    host: str
    at: float
    elapsed_s: float | None
    vms: tuple[VmFigures, ...]
    domains: tuple[DomainTotal, ...]
    cells: tuple[CellFigures, ...]
    resets: tuple[str, ...]
    unknown: tuple[str, ...]
    unmonitored: tuple[str, ...]


def _went_down(
    first: Mapping[int, tuple[int, int]], second: Mapping[int, tuple[int, int]], before: Mapping[str, object],
    after: Mapping[str, object],
) -> bool:
    if any(second[d][0] < first[d][0] or second[d][1] < first[d][1] for d in second.keys() & first.keys()):
        return True
    t0, t1 = before.get("cpu.time"), after.get("cpu.time")
    return isinstance(t0, int) and isinstance(t1, int) and t1 < t0


def _cpu(before: Mapping[str, object], after: Mapping[str, object], elapsed_s: float) -> float | None:
    t0, t1 = before.get("cpu.time"), after.get("cpu.time")
    if isinstance(t0, int) and isinstance(t1, int):
        return (t1 - t0) / 1e9 / elapsed_s
    return None


def _kib(stats: Mapping[str, object], key: str) -> int | None:
    value = stats.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _vm(rate: VmRate, cpu: float | None, stats: Mapping[str, object]) -> VmFigures:
    return VmFigures(rate, cpu, _kib(stats, "balloon.rss"), _kib(stats, "balloon.current"))


def cell_figures(inventory: FreePages, host: FreePages) -> tuple[CellFigures, ...]:
    """Every cell of the inventory's view that the host reported, by id (page sizes both know)."""
    out = []
    for cell in sorted(inventory.keys() & host.keys()):
        sizes = sorted(inventory[cell].keys() & host[cell].keys())
        pages = tuple((s, inventory[cell][s], host[cell][s]) for s in sizes)
        out.append(CellFigures(
            cell,
            sum(s * inv for s, inv, _ in pages),
            sum(s * got for s, _, got in pages),
            sum(s * max(inv - got, 0) for s, inv, got in pages),
            pages,
        ))
    return tuple(out)


def figures(
    previous: Reading | None, current: Reading, placements: Mapping[str, Placement], inventory_free: FreePages,
) -> RoundFigures:
    """The round's figures (see the module docstring); ``placements``: the inventory's, by VM name;
    ``inventory_free``: the host's cells' free pages as the inventory holds them.

    Raises:
        ClockError: ``current`` is not later than ``previous``.
    """
    if previous is not None and current.at <= previous.at:
        raise ClockError(
            f"host {current.host}: reading at {current.at:.15g} is not later than the one before ({previous.at:.15g}): "
            "the clock went backwards",
            hint="readings of a host must come in time order; check the host's clock (NTP)")
    mine = {name: p for name, p in placements.items() if p.host == current.host}  # the host's own, or all
    unknown = tuple(sorted(set(current.domains) - set(mine)))
    elapsed = current.at - previous.at if previous is not None else None
    rates: list[VmRate] = []
    cpu: dict[str, float | None] = {}
    resets: list[str] = []
    unmonitored: list[str] = []
    if previous is not None and elapsed is not None:
        for name in sorted(set(current.domains) & set(previous.domains) & set(mine)):
            before, after = previous.domains[name], current.domains[name]
            first, second = previous.counters_of(name), current.counters_of(name)
            if _went_down(first, second, before, after):
                resets.append(name)
                continue
            r = rate_of(mine[name], first, second, after, elapsed)
            used = _cpu(before, after, elapsed)
            if r is None:
                unmonitored.append(name)
                if used is None:
                    continue
                r = VmRate(name, current.host, mine[name].tenant or "", (), ())
            rates.append(r)
            cpu[name] = used
    assessed, domains = assess(rates, mine)
    cells = cell_figures(inventory_free, current.free) if current.free is not None else ()
    return RoundFigures(
        current.host, current.at, elapsed, tuple(_vm(r, cpu[r.vm], current.domains[r.vm]) for r in assessed),
        tuple(domains), cells, tuple(resets), unknown, tuple(unmonitored),
    )
