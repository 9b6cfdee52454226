"""``vnuma stats --bandwidth``: measure each VM's memory bandwidth and LLC occupancy, keep the last sample.

Reads every selected host's running VMs' resctrl monitors through libvirt twice, ``interval_s``
apart (one ``domainListGetStats`` per host and reading; the rate's divisor is the time that
really passed between a host's two readings), or from two saved ``virsh domstats --memory
--cpu-total`` outputs (``recorded``: the VMs they name, ``interval_s`` apart). Figures:
:mod:`vnuma.watch.bandwidth`. Each measured VM's sample replaces its previous one in the
inventory (one transaction), for ``vnuma rebalance --objective bandwidth``. A host whose
libvirt cannot be read, and VMs without monitors, are warnings; so are, for saved readings, VMs in one
reading only, and readings holding none of the VMs asked about (nothing measured).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vnuma.errors import HypervisorError, InvalidInputError
from vnuma.inventory.access import open_access
from vnuma.inventory.reading import open_reader
from vnuma.inventory.samples import Sample, read_samples, record_samples
from vnuma.placement.model import Placement
from vnuma.placement.rebalance.base import VmLoad
from vnuma.services import Settings
from vnuma.services.hypervisors import open_hypervisor
from vnuma.services.stats import select
from vnuma.sources.domstats import parse_domstats
from vnuma.topology import Host
from vnuma.watch.bandwidth import DomainTotal, VmRate, assess, rate

Stats = dict[str, dict[str, object]]

MAX_INTERVAL_S = 3600.0


@dataclass(frozen=True, slots=True)
class BandwidthReport:
    """What one measurement found: when it ended, over how long, the VMs and the L3 domains, warnings."""

    taken_at: str
    interval_s: float
    vms: tuple[VmRate, ...]
    domains: tuple[DomainTotal, ...]
    warnings: tuple[str, ...]


_INTERVAL = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m)?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_interval(text: str) -> float:
    """``"2s"``, ``"500ms"``, ``"1m"`` or plain seconds, as seconds (InvalidInputError: not a time from 1ms to
    1h)."""
    found = _INTERVAL.match(text.strip().lower())
    seconds = float(found["n"]) * _UNIT[found["unit"]] if found else 0.0
    if not 0.001 <= seconds <= MAX_INTERVAL_S:
        raise InvalidInputError(f"bad --interval {text!r}: give a time from 1ms to 1h", hint="e.g. --interval 2s")
    return seconds


def _read_recorded(paths: tuple[Path, Path]) -> tuple[Stats, Stats]:
    texts = []
    for path in paths:
        try:
            texts.append(parse_domstats(path.read_text(encoding="utf-8"), str(path)))
        except (OSError, UnicodeDecodeError) as err:
            raise InvalidInputError(f"cannot read {path}: {err}") from err
    return texts[0], texts[1]


def _sample_live(
    settings: Settings, hosts: Mapping[str, Host], names: Mapping[str, list[str]], interval_s: float,
    sleep: Callable[[float], None], warnings: list[str],
) -> dict[str, tuple[Stats, Stats, float]]:
    """Per host: its VMs' stats at two readings and the seconds between them."""
    clock = time.monotonic
    first: dict[str, tuple[float, Stats]] = {}
    with open_reader(settings.db_url) as keeper:
        conns = {}
        try:
            for name in sorted(names):
                try:
                    conns[name] = hv = open_hypervisor(keeper, name, hosts[name].uri or "")
                    first[name] = (clock(), hv.monitor_stats(names[name]))
                except HypervisorError as err:
                    warnings.append(f"host {name}: no bandwidth figures: {err}")
            if first:
                sleep(interval_s)
            out = {}
            for name, (t0, before) in first.items():
                try:
                    t1, after = clock(), conns[name].monitor_stats(names[name])
                except HypervisorError as err:
                    warnings.append(f"host {name}: no bandwidth figures: {err}")
                    continue
                out[name] = (before, after, max(t1 - t0, 1e-3))
            return out
        finally:
            for hv in conns.values():
                hv.close()


def measure(
    settings: Settings, vm: str | None = None, host: str | None = None, *, interval_s: float = 2.0,
    recorded: tuple[Path, Path] | None = None, sleep: Callable[[float], None] = time.sleep,
) -> BandwidthReport:
    """Measure the running VMs of every host (or ``host``, or just ``vm``), keep each one's sample.

    Raises:
        NotFoundError: unknown VM or host.
        InvalidInputError: a recorded file that cannot be read or is not ``virsh domstats`` output.
    """
    if not 0 < interval_s <= MAX_INTERVAL_S:
        raise InvalidInputError(f"the interval must be from 1ms to 1h, got {interval_s}s")
    saved = _read_recorded(recorded) if recorded is not None else None
    with open_reader(settings.db_url) as reader:
        view = reader.fleet_view()
    hosts, placements = select(view.snapshot, vm, host)
    chosen = [p for p in placements if vm is None or p.vm == vm]
    by_host = {h.name: h for h in hosts}
    warnings: list[str] = []
    pairs: dict[str, tuple[Placement, Stats, Stats, float]] = {}
    if saved is not None:
        before, after = saved
        for p in chosen:
            if p.vm in before and p.vm in after:
                pairs[p.vm] = (p, before[p.vm], after[p.vm], interval_s)
        warnings += _recorded_warnings(before, after, chosen, pairs, vm, host)
    else:
        running = [p for p in chosen if view.states[p.vm] == "running" and by_host[p.host].uri]
        names: dict[str, list[str]] = {}
        for p in running:
            names.setdefault(p.host, []).append(p.vm)
        sampled = _sample_live(settings, by_host, names, interval_s, sleep, warnings)
        for p in running:
            if p.host in sampled:
                b, a, seconds = sampled[p.host]
                pairs[p.vm] = (p, b.get(p.vm, {}), a.get(p.vm, {}), seconds)
    rates = []
    for p, b, a, seconds in pairs.values():
        r = rate(p, b, a, seconds)
        if r is not None:
            rates.append((r, seconds))
    unmonitored = sorted(set(pairs) - {r.vm for r, _ in rates})
    if unmonitored:
        warnings.append(
            f"no memory-bandwidth or cache monitors for {', '.join(unmonitored[:10])}"
            + (f" and {len(unmonitored) - 10} more" if len(unmonitored) > 10 else "")
            + " (a host without resctrl monitoring, or a VM placed without a cache slice or bandwidth cap)"
        )
    vms, domains = assess([r for r, _ in rates], {p.vm: p for p, *_ in pairs.values()})
    taken_at = datetime.now(UTC).isoformat(timespec="seconds")
    seconds_of = {r.vm: s for r, s in rates}
    samples = [
        Sample(r.vm, r.host, taken_at, round(seconds_of[r.vm] * 1000),
               tuple((d.domain, d.local_bps, d.total_bps) for d in r.domains), r.llc)
        for r in vms
    ]
    if samples:
        with open_access(settings.db_url) as access, access.begin(True) as x:
            record_samples(x, samples)
    return BandwidthReport(taken_at, interval_s, tuple(vms), tuple(domains), tuple(warnings))


def _names(names: list[str]) -> str:
    return ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _recorded_warnings(
    before: Stats, after: Stats, chosen: list[Placement], pairs: Mapping[str, object], vm: str | None,
    host: str | None,
) -> list[str]:
    """What two saved readings leave out: chosen VMs in one reading only, and that nothing was measured when
    none of the chosen VMs is in both (naming the domains they do hold). Domains that are no VM of the
    inventory are left out quietly otherwise: a host's readings hold the domains vnuma does not manage too."""
    out = []
    halves = sorted(p.vm for p in chosen if (p.vm in before) != (p.vm in after))
    if halves:
        out.append(f"in one reading only, left out: {_names(halves)}")
    if not pairs:
        asked = f"VM {vm}" if vm else f"the VMs of host {host}" if host else "the inventory's VMs"
        held = sorted(set(before) | set(after))
        out.append(f"the readings hold none of {asked} in both"
                   + (f" (they name {_names(held)})" if held else "") + ": nothing was measured")
    return out


def measured_loads(settings: Settings) -> dict[str, VmLoad]:
    """Each VM's last sample as the planner reads it (total bytes/s per L3 domain), by VM."""
    with open_access(settings.db_url) as access, access.begin(False) as x:
        samples = read_samples(x)
    return {
        vm: VmLoad(s.host, sum(total for _, _, total in s.domains), tuple((d, total) for d, _, total in s.domains),
                   s.taken_at)
        for vm, s in samples.items()
    }
