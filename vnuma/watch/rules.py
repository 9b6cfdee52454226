"""The loop's named rules and their thresholds: what one sample says about a VM or a host cell.

Pure: no I/O. Each rule gives, per subject and per sample, true or false with
its evidence (:class:`Signal`); :mod:`.hysteresis` decides when that becomes an
event. The rules:

* ``noisy`` (a VM): today's rule (:func:`vnuma.watch.bandwidth.assess`: more than
  its share of an L3 domain's measured traffic) on a domain that is *loaded*:
  its total is at least ``noisy_load`` × the highest total seen on that domain
  (the peak, over the kept history: :mod:`.peaks`), so an idle host flags nobody;
* ``remote`` (a VM): its remote share (remote / total bytes) is above
  ``remote_share`` (per tenant);
* ``capped`` (a VM placed with ``--mem-bw``): on a domain where it has a cap, its
  traffic is at least ``capped`` (per tenant) × its cap (a percentage) × the
  domain's peak — the peak stands for the domain's bandwidth, which resctrl
  does not report;
* ``cell-drift`` (a host cell): the inventory holds more free than the host
  reports by more than ``cell_drift_kib`` (summed over page sizes).

:data:`RANGES` is the one statement of each threshold's allowed range; the
configuration reader checks the file against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from vnuma.placement.model import Placement
from vnuma.watch.budget import Budget
from vnuma.watch.figures import RoundFigures

RULES = ("noisy", "remote", "capped", "cell-drift")
"""Every rule's name, in the order events list them."""

Peaks = Mapping[tuple[str, int], int]
"""The highest total bytes/s seen on each (host, L3 domain)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds a tenant may have its own of (``[watch.tenant.NAME]`` in the configuration file)."""

    remote_share: float = 0.3
    capped: float = 0.95


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every rule's threshold and the persistence: an event opens when its rule is true in ≥ ``k`` of the
    last ``n`` samples and is cleared after ``m`` quiet samples in a row; ``history_s``: how long raw samples
    are kept (then one-minute means, for ``minutes_days``)."""

    k: int = 3
    n: int = 5
    m: int = 3
    noisy_load: float = 0.5
    cell_drift_kib: int = 4 * 1024 * 1024
    history_s: int = 3600
    minutes_days: int = 7
    limits: Limits = Limits()
    tenants: Mapping[str, Limits] = field(default_factory=lambda: MappingProxyType({}))
    budget: Budget = field(default_factory=Budget)

    def of(self, tenant: str | None) -> Limits:
        """The limits of ``tenant``: its own where the file gives them, else the fleet's."""
        return self.tenants.get(tenant or "", self.limits)


RANGES: dict[str, tuple[float, float]] = {
    "k": (1, 100),
    "n": (1, 100),
    "m": (1, 100),
    "noisy_load": (0.01, 1.0),
    "remote_share": (0.0, 0.99),
    "capped": (0.01, 1.0),
    "cell_drift_kib": (4, 2**50),
    "history_s": (60, 86400),
    "minutes_days": (1, 366),
    "moves_per_host_hour": (0, 1000),
    "moves_per_hour": (0, 100_000),
    "cooldown_s": (60, 7 * 86400),
    "no_return_s": (0, 30 * 86400),
}
"""Each threshold's allowed range, inclusive (``cell_drift_kib`` and ``history_s`` are written as a size and a
time in the file, ``cooldown_s`` and ``no_return_s`` as times: ``cooldown``, ``no_return``); the last four
are the acting budget
(:class:`vnuma.watch.budget.Budget`)."""


def inconsistency(t: Thresholds) -> str | None:
    """Why ``t``'s persistence cannot work (None: it can): K of N needs K ≤ N, and a cleared event must not
    reopen on the very samples that cleared it, so M ≥ N − K + 1."""
    if t.k > t.n:
        return f"k ({t.k}) must not exceed n ({t.n})"
    if t.m < t.n - t.k + 1:
        return f"m ({t.m}) must be at least n - k + 1 ({t.n - t.k + 1}), or a cleared event reopens at once"
    return None


@dataclass(frozen=True, slots=True)
class Signal:
    """One rule on one subject in one sample: true or not (the sample itself, stored, is the evidence)."""

    rule: str
    host: str
    vm: str | None
    cell: int | None
    true: bool

    @property
    def key(self) -> tuple[str, str, str, int]:
        """The subject's identity: rule, host, VM ('' for a cell), cell (-1 for a VM)."""
        return (self.rule, self.host, self.vm or "", -1 if self.cell is None else self.cell)


def peaks_with(peaks: Peaks, rounds: tuple[RoundFigures, ...]) -> dict[tuple[str, int], int]:
    """``peaks`` raised by the domain totals of ``rounds``."""
    out = dict(peaks)
    for r in rounds:
        for d in r.domains:
            out[(d.host, d.domain)] = max(out.get((d.host, d.domain), 0), d.total_bps)
    return out


def signals(
    fig: RoundFigures, placements: Mapping[str, Placement], t: Thresholds, peaks: Peaks,
) -> list[Signal]:
    """Every rule's verdict on every VM with figures and every cell of the round (``peaks`` already holding
    this round's totals)."""
    out: list[Signal] = []
    totals = {d.domain: d.total_bps for d in fig.domains}
    loaded = {d for d, total in totals.items() if total and total >= t.noisy_load * peaks.get((fig.host, d), 0)}
    for v in fig.vms:
        limits = t.of(v.rate.tenant)
        out.append(Signal("noisy", fig.host, v.vm, None, not loaded.isdisjoint(v.rate.noisy)))
        share = v.remote_share
        out.append(Signal("remote", fig.host, v.vm, None, share is not None and share > limits.remote_share))
        caps = placements[v.vm].mem_bw
        if caps:
            on = {d.domain: d.total_bps for d in v.rate.domains}
            peak = {d: peaks.get((fig.host, d), 0) for d, _ in caps}
            at_cap = any(peak[d] and on.get(d, 0) >= limits.capped * cap / 100 * peak[d] for d, cap in caps)
            out.append(Signal("capped", fig.host, v.vm, None, at_cap))
    for c in fig.cells:
        out.append(Signal("cell-drift", fig.host, None, c.cell, c.drift_kib > t.cell_drift_kib))
    return out
