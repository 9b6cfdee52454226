"""Memory bandwidth and LLC occupancy per VM and per L3 domain, from two samples of libvirt's monitors.

Pure: no I/O. MBM counters (``memory.bandwidth.monitor.*.node.*.bytes.local|total``) are
cumulative: a VM's rate on a domain is the difference of its counters, summed over its
monitors, divided by the time between the samples. A domain whose counters went down (the
domain restarted, its monitor was re-created) gives no rate. CMT figures
(``cpu.cache.monitor.*.bank.*.bytes``) are an occupancy: the second sample's is shown.
The ids are L3 domain ids (MBM counts per L3 domain; the MBA node ids are the same ids).

Noisy: on each domain, the tenants measured there split it equally, and each tenant's share
is split equally among its VMs there; a VM with a bandwidth cap on the domain (``--mem-bw``)
is entitled to its cap instead. A VM is *noisy* on a domain that at least two VMs use when its
part of the domain's traffic exceeds its share: one tenant's VMs cannot crowd out another's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vnuma.placement.model import Placement
from vnuma.sources.mbm import parse_cache_occupancy, parse_memory_bandwidth

TOP = 3
"""How many of a domain's heaviest VMs it lists."""


@dataclass(frozen=True, slots=True)
class DomainRate:
    """A VM's memory traffic on one L3 domain, bytes per second: to the local controller, and in all."""

    domain: int
    local_bps: int
    total_bps: int


@dataclass(frozen=True, slots=True)
class VmRate:
    """One VM between two samples: its traffic per domain, its LLC occupancy per cache id (bytes, at
    the second sample), and the domains where it is noisy."""

    vm: str
    host: str
    tenant: str
    domains: tuple[DomainRate, ...]
    llc: tuple[tuple[int, int], ...]
    noisy: tuple[int, ...] = ()

    @property
    def local_bps(self) -> int:
        return sum(d.local_bps for d in self.domains)

    @property
    def total_bps(self) -> int:
        return sum(d.total_bps for d in self.domains)


@dataclass(frozen=True, slots=True)
class DomainTotal:
    """One L3 domain of a host: the traffic of the VMs measured there, their LLC occupancy, how many, and
    the heaviest (VM, bytes/s), at most :data:`TOP`."""

    host: str
    domain: int
    total_bps: int
    llc_bytes: int
    vms: int
    top: tuple[tuple[str, int], ...]


def counters(stats: Mapping[str, object]) -> dict[int, tuple[int, int]]:
    """(local, total) bytes per L3 domain, summed over the domain's MBM monitors (cumulative counters)."""
    sums: dict[int, tuple[int, int]] = {}
    for monitor in parse_memory_bandwidth(stats):
        for n in monitor.nodes:
            local, total = sums.get(n.node, (0, 0))
            sums[n.node] = (local + n.local_bytes, total + n.total_bytes)
    return sums


def rate(
    placement: Placement, before: Mapping[str, object], after: Mapping[str, object], interval_s: float
) -> VmRate | None:
    """The VM's rates between two samples of its stats; None when neither sample has a monitor."""
    return rate_of(placement, counters(before), counters(after), after, interval_s)


def rate_of(
    placement: Placement, first: Mapping[int, tuple[int, int]], second: Mapping[int, tuple[int, int]],
    after: Mapping[str, object], interval_s: float,
) -> VmRate | None:
    """:func:`rate` from the two samples' :func:`counters` (read once by a caller that needs them too) and
    the second sample's stats (its cache occupancy)."""
    if interval_s <= 0:
        raise ValueError("the interval between samples must be positive")
    occupancy: dict[int, int] = {}
    for monitor in parse_cache_occupancy(after):
        for bank, size in monitor.banks:
            occupancy[bank] = occupancy.get(bank, 0) + size
    if not second and not occupancy:
        return None
    domains = []
    for node in sorted(second.keys() & first.keys()):
        (l0, t0), (l1, t1) = first[node], second[node]
        if l1 >= l0 and t1 >= t0:
            domains.append(DomainRate(node, round((l1 - l0) / interval_s), round((t1 - t0) / interval_s)))
    llc = tuple(sorted(occupancy.items()))
    return VmRate(placement.vm, placement.host, placement.tenant or "", tuple(domains), llc)


def _shares(rates: list[VmRate], caps: Mapping[tuple[str, int], int], domain: int) -> dict[str, float]:
    """Each VM's entitled part of one domain (see the module docstring)."""
    users = [r for r in rates if any(d.domain == domain and d.total_bps for d in r.domains)]
    per_tenant: dict[str, int] = {}
    for r in users:
        per_tenant[r.tenant] = per_tenant.get(r.tenant, 0) + 1
    tenants = per_tenant.keys()
    return {
        r.vm: caps[(r.vm, domain)] / 100 if (r.vm, domain) in caps else 1 / len(tenants) / per_tenant[r.tenant]
        for r in users
    }


def assess(rates: Iterable[VmRate], placements: Mapping[str, Placement]) -> tuple[list[VmRate], list[DomainTotal]]:
    """The VMs with their noisy domains set, and every (host, domain) measured, by host then id."""
    by_host: dict[str, list[VmRate]] = defaultdict(list)
    for r in rates:
        by_host[r.host].append(r)
    noisy: dict[str, list[int]] = defaultdict(list)
    totals: list[DomainTotal] = []
    for host, host_rates in sorted(by_host.items()):
        caps = {(r.vm, d): cap for r in host_rates for d, cap in placements[r.vm].mem_bw}
        ids = sorted({d.domain for r in host_rates for d in r.domains} | {c for r in host_rates for c, _ in r.llc})
        for domain in ids:
            on = [(r.vm, d.total_bps) for r in host_rates for d in r.domains if d.domain == domain]
            total = sum(bps for _, bps in on)
            shares = _shares(host_rates, caps, domain)
            if len(shares) >= 2 and total:
                noisy_here = [vm for vm, bps in on if vm in shares and bps / total > shares[vm] + 1e-9]
                for vm in noisy_here:
                    noisy[vm].append(domain)
            llc = sum(size for r in host_rates for c, size in r.llc if c == domain)
            top = tuple(sorted(on, key=lambda x: (-x[1], x[0]))[:TOP])
            totals.append(DomainTotal(host, domain, total, llc, len(on), top))
    out = [
        VmRate(r.vm, r.host, r.tenant, r.domains, r.llc, tuple(noisy.get(r.vm, ())))
        for host in sorted(by_host) for r in sorted(by_host[host], key=lambda r: r.vm)
    ]
    return out, totals
