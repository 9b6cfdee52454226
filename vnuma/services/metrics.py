"""The fleet's figures for ``/metrics``: read at scrape time, in one inventory transaction.

Everything here is derived from the inventory, so every serving process (replicas, workers, a restarted
service) reports the same values:

* per VM: its state, and from its last stored bandwidth sample (:mod:`vnuma.inventory.samples`, the one
  ``stats --bandwidth`` and the watch loop keep) its local and remote memory traffic (remote = total -
  local, summed over its L3 domains), remote share and LLC occupancy; a sample taken on another host than
  the VM's (it moved since) is left out until the next one;
* per host and CPU cell: what its VMs' claims leave, as ``stats`` counts it
  (:func:`vnuma.report.usage.cell_use` on the engine's ledger): free pCPUs, free pages per size, free GPUs;
  per GPU the partitions of each vGPU type or MIG profile it could still take
  (:func:`vnuma.placement.partitionchoice.gpu_use`, as ``host show``); the resctrl classes of service left
  (:func:`vnuma.placement.resctrl.classes`); whether it is cordoned;
* per passable device (GPU, NIC, VF): its state, free, claimed, tainted or cleaning, as ``vnuma device list``
  says it (:func:`vnuma.services.devices.device_rows`);
* per fleet: claims and placement refusals by the check that refused the closest host (the audit log, read
  after the last id already counted: :class:`AuditTally`), journaled moves by objective.

Hosts, cells and placements come from a ledger kept between scrapes (:class:`Kept`), the rest from one
transaction after it: a change between the two shows at the next scrape.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from vnuma.inventory import tallies
from vnuma.inventory.access import open_access
from vnuma.inventory.executor import Executor
from vnuma.inventory.history import Event, open_events
from vnuma.inventory.placer import open_placer
from vnuma.inventory.samples import Sample, read_samples
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.partitionchoice import gpu_use
from vnuma.placement.partitions import gpu_offers
from vnuma.placement.resctrl import classes
from vnuma.report.usage import cell_use
from vnuma.services import Settings
from vnuma.services.devices import device_rows, holders
from vnuma.services.warm import WarmFleet
from vnuma.topology import DeviceKind, Host

SETTLE_S = 600.0
"""Audit rows younger than this are counted afresh at every scrape, not folded into the kept totals: a row
whose transaction commits late (or a writer whose clock is behind) is still counted once it shows."""


@dataclass(frozen=True, slots=True)
class VmFigures:
    """One VM: where it is, its state, and its last sample's figures (None: no sample on its host)."""

    vm: str
    tenant: str
    host: str
    state: str
    local_bps: int | None = None
    remote_bps: int | None = None
    llc_bytes: int | None = None
    sampled_at: float | None = None
    """The sample's end, seconds since the epoch."""

    @property
    def remote_ratio(self) -> float | None:
        """Remote share of its memory traffic (None: no sample, or no traffic)."""
        if self.local_bps is None or self.remote_bps is None or self.local_bps + self.remote_bps <= 0:
            return None
        return self.remote_bps / (self.local_bps + self.remote_bps)


@dataclass(frozen=True, slots=True)
class CellFigures:
    """One CPU cell: pCPUs and GPUs in all and free, and per page size (KiB) the pages in all and free."""

    host: str
    cell: int
    pcpus: int
    pcpus_free: int
    gpus: int
    gpus_free: int
    pages: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class HostFigures:
    """One host: cordoned, its resctrl classes of service VMs may make and have left (None: it reports no
    class count), and per GPU (address, its cell) the partitions of each type or profile it could take."""

    host: str
    cordoned: bool
    classes: int | None
    classes_left: int | None
    partitions: tuple[tuple[str, int | None, str, int], ...]


@dataclass(frozen=True, slots=True)
class FleetFigures:
    """Everything ``/metrics`` reports of the inventory."""

    hosts: tuple[HostFigures, ...]
    cells: tuple[CellFigures, ...]
    vms: tuple[VmFigures, ...]
    claims: int
    refusals: dict[str, int]
    moves: dict[str, int]
    events: tuple[Event, ...] = ()
    """The watch's open events (:mod:`vnuma.inventory.history`)."""
    devices: tuple[tuple[str, str, str, str], ...] = ()
    """Every passable device: (host, address, kind, state) as ``vnuma device list`` says them
    (:func:`vnuma.services.devices.device_rows`): kind gpu|nic|vf, state free|claimed|tainted|cleaning."""


class AuditTally:
    """Claims and placement refusals counted from the audit log, kept between scrapes (thread-safe).

    The first reading counts the whole log; later ones read only rows above the last id folded in. Rows
    logged less than :data:`SETTLE_S` ago are counted at each reading but not folded, so a transaction that
    commits after rows with higher ids were read is not missed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._after = 0
        self._claims = 0
        self._refusals: Counter[str] = Counter()

    def read(self, x: Executor, now: datetime) -> tuple[int, dict[str, int]]:
        """(claims, refusals by check) as the log holds them now."""
        before = (now - timedelta(seconds=SETTLE_S)).astimezone(UTC).isoformat(timespec="microseconds")
        with self._lock:
            rows = tallies.audit_rows(x, self._after)
            settled = tallies.settled_id(x, self._after, before)
            claims, refusals = 0, Counter[str]()
            for row in rows:
                kept = row.id <= settled
                if row.refused and row.check:
                    (self._refusals if kept else refusals)[row.check] += 1
                elif not row.refused:
                    if kept:
                        self._claims += 1
                    else:
                        claims += 1
            self._after = settled
            return self._claims + claims, dict(self._refusals + refusals)


def _vm(p_vm: str, tenant: str, host: str, state: str, sample: Sample | None) -> VmFigures:
    if sample is None or sample.host != host:
        return VmFigures(p_vm, tenant, host, state)
    local = sum(d[1] for d in sample.domains)
    total = sum(d[2] for d in sample.domains)
    at = datetime.fromisoformat(sample.taken_at)
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return VmFigures(p_vm, tenant, host, state, local, max(total - local, 0), sum(b for _, b in sample.llc),
                     at.timestamp())


def _host(fleet: Fleet, host: Host) -> tuple[HostFigures, list[CellFigures]]:
    hs = fleet.state(host.name)
    cells = [
        CellFigures(host.name, c.cell, c.pcpus_total, c.pcpus_free, c.gpus_total, c.gpus_free,
                    tuple((p.size_kib, p.total, p.free) for p in c.pools))
        for c in cell_use(fleet, host.name, largest=False)
    ]
    partitions: list[tuple[str, int | None, str, int]] = []
    if gpu_offers(host):
        node = {d.address: d.numa_node for d in host.devices if d.kind is DeviceKind.GPU}
        for gpu, use in gpu_use(hs).items():
            partitions += [(gpu, node.get(gpu), name, free) for name, free in sorted(use.free.items())]
    left = classes(host, hs.resctrl_use)
    figures = HostFigures(host.name, host.cordoned, None if left is None else left.total,
                          None if left is None else left.left, tuple(partitions))
    return figures, cells


class Kept:
    """What one process keeps between scrapes: the fleet's ledger, refreshed by host generation as a serving
    process's placements refresh theirs (:class:`~vnuma.services.warm.WarmFleet`: only hosts that changed are
    read again), and the audit tally."""

    def __init__(self) -> None:
        self.warm = WarmFleet()
        self.tally = AuditTally()


def read_figures(settings: Settings, kept: Kept, now: datetime | None = None) -> FleetFigures:
    """The fleet's figures: hosts, cells and placements from ``kept``'s ledger brought up to date, then VM
    states, samples and counts in one transaction.

    Raises:
        InventoryError: the inventory cannot be read.
    """
    now = now or datetime.now(UTC)
    hosts: list[HostFigures] = []
    cells: list[CellFigures] = []
    with open_placer(settings.db_url) as placer, kept.warm.viewing(placer, attempt=0) as (fleet, _tenants):
        for name in fleet.host_names():
            h, c = _host(fleet, fleet.host(name))
            hosts.append(h)
            cells += c
        placements = fleet.placements()
        devices = tuple((r["host"], r["address"], r["kind"], r["state"]) for r in device_rows(
            [fleet.host(name) for name in fleet.host_names()], holders(placements)))
    with open_access(settings.db_url) as access, access.begin(False) as x:
        states = tallies.vm_states(x)
        samples = read_samples(x)
        claims, refusals = kept.tally.read(x, now)
        moves = tallies.moves_by_objective(x)
        events = tuple(open_events(x))
    vms = tuple(_vm(p.vm, p.tenant or "", p.host, states.get(p.vm, ""), samples.get(p.vm))
                for p in placements if p.vm in states)
    return FleetFigures(tuple(hosts), tuple(cells), vms, claims, refusals, moves, events, devices)
