"""A serving process's warm ledger: the fleet kept in memory between placements, refreshed by change.

A :class:`WarmFleet` is a :class:`~vnuma.services.placing.View` for
:func:`~vnuma.services.placing.place_vm`. Before each decision it reads the
generations of just the hosts changed since its last read (their change
marks at or above its watermark, :mod:`vnuma.inventory.changes`: the cost
follows what changed, not the fleet) and the count of changes to the tenants
and the kept MIG geometries, then the placements of only the hosts whose
generation moved, and
swaps in its ledger those hosts' VMs whose placement changed, came or went
(all removals first, so a VM that moved between hosts is never held twice;
a VM whose stored placement is the one the ledger holds stays as it is). When a host's own row (topology,
reserved CPUs, cordon), the set of hosts (a new name, or a removal counted), the tenants or the kept MIG
geometries changed, or on the
last attempt of a request whose claims kept losing, it reads the whole
snapshot again. The claim that follows
each decision is the same transaction as the CLI's, with the same admission
check under the lock: a ledger that is behind can cost a retry, never a
double booking. One lock keeps the ledger still while a decision reads it;
the claims run outside it, so placements on different hosts overlap in the
database. A placement being claimed is held in the ledger meanwhile
(:meth:`WarmFleet.hold`), so concurrent decisions do not all pick the same
pCPUs; a lost claim gives its hold back. A committed claim whose host the
ledger knew at the generation just before it is not read back: the claim
reports the host's mark after it, and the ledger, which holds the claim
already, takes that mark (:meth:`WarmFleet.settle`). By induction a host's
kept mark always means "the host as stored at that mark, plus the holds
not settled yet", so a refresh that skips it misses nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from vnuma.errors import VnumaError
from vnuma.inventory.executor import Row
from vnuma.inventory.placer import Placer
from vnuma.inventory.placing import Claimed
from vnuma.inventory.warm import Mark, Watermark
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.result import PlacementResult
from vnuma.services.placing import LAST_ATTEMPT, explained
from vnuma.topology import gc_paused


class WarmFleet:
    """The ledger of one inventory, kept for the placements of one process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # held across a claim's commit and its settle (committing)
        self._fleet: Fleet | None = None
        self._marks: dict[str, Mark] = {}
        self._since = Watermark(0, 0)
        self._rows: dict[str, Row] = {}
        self._tenants: dict[str, Tenant] = {}
        self._on_host: dict[str, list[str]] = {}
        self._pending: dict[str, Placement] = {}
        self.full_reads = 0
        """How many times the whole snapshot was read (for tests and benchmarks)."""
        self.host_reads = 0
        """How many hosts were read again after their generation moved."""
        self.vm_records = 0
        """How many VMs such reads recorded in the ledger (those that came or changed)."""

    @contextmanager
    def viewing(self, placer: Placer, *, attempt: int) -> Iterator[tuple[Fleet, Mapping[str, Tenant]]]:
        with self._lock:
            # The last attempt of a request that kept losing its claim reads everything: a belt to the
            # generations' braces (a lost claim's host moved generation, so a refresh sees what beat it).
            fleet = self._rebuilt(placer) if attempt >= LAST_ATTEMPT else self._refreshed(placer)
            yield fleet, self._tenants

    def decide(
        self, placer: Placer, fleet: Fleet, request: VmRequest, strategy: Strategy, *, explain: bool
    ) -> PlacementResult:
        """The engine's answer on the kept ledger (it holds every host), a refusal explained there."""
        return explained(place(request, fleet, strategy, explain=explain), request, fleet, strategy, explain=explain)

    def hold(self, placement: Placement) -> None:
        """Called inside :meth:`viewing` (the lock is held): the engine admitted it on this very ledger."""
        assert self._fleet is not None
        self._fleet.record(placement)
        self._on_host.setdefault(placement.host, []).append(placement.vm)
        self._pending[placement.vm] = placement

    def committing(self) -> AbstractContextManager[object]:
        """The ledger's lock, held from just before a claim commits until it is settled: no refresh runs between,
        so a refresh never sees this process's own committed claim as another's change (and reads it back)."""
        return self._lock

    def settle(self, placement: Placement, claimed: Claimed | None) -> None:
        with self._lock:
            self._pending.pop(placement.vm, None)
            if self._fleet is None or self._fleet.placement(placement.vm) is not placement:
                return  # rebuilt meanwhile, or a refresh read the committed claim already
            if claimed is None:
                self._fleet.remove(placement.vm)
                self._on_host[placement.host].remove(placement.vm)
                return
            # Known at the mark before this claim, the host plus the claim is the host at the claim's mark:
            # no refresh reads it again. Any other mark (another change came between), or a claim the
            # host's ledger chose again (a refit): the next refresh reads the host.
            host_id, generation = claimed.mark
            if claimed.placement is placement and self._marks.get(placement.host) == (host_id, generation - 1):
                self._marks[placement.host] = claimed.mark

    def _refreshed(self, placer: Placer) -> Fleet:
        if self._fleet is None:
            return self._rebuilt(placer)
        got = placer.changes(self._marks, self._since)
        if (
            got.watermark.removed != self._since.removed
            or got.watermark.catalog != self._since.catalog
            or not got.marks.keys() <= self._marks.keys()
            or any(self._rows.get(name) != row for name, row in got.rows.items())
        ):
            return self._rebuilt(placer)
        fleet = self._fleet
        # Only what changed is swapped: a VM the ledger holds as stored (the very placement decoded from its
        # unchanged document: decoding is cached by text) stays; the others leave, all before any arrives.
        for name, placements in got.placements.items():
            stored = {p.vm: p for p in placements}
            for vm in self._on_host.pop(name, []):
                if stored.get(vm) is not fleet.placement(vm):
                    fleet.remove(vm)
        with gc_paused():
            for name, placements in got.placements.items():
                for p in placements:
                    if fleet.placement(p.vm) is not p:
                        fleet.record(p)
                        self.vm_records += 1
                self._on_host[name] = [p.vm for p in placements]
            self._keep_pending(set(got.placements))
        self.host_reads += len(got.placements)
        self._marks.update(got.marks)
        self._since = got.watermark
        return fleet

    def _rebuilt(self, placer: Placer) -> Fleet:
        with gc_paused():
            self._since, self._marks, self._rows, snap = placer.warm_snapshot()
            self._fleet = Fleet(snap.hosts, snap.placements, snap.tenants.values())
            self._tenants = snap.tenants
            self._on_host = _by_host(snap.placements)
            self._keep_pending(None)
        self.full_reads += 1
        return self._fleet

    def _keep_pending(self, hosts: set[str] | None) -> None:
        """Hold again the placements being claimed on ``hosts`` (None: every host) that the inventory does
        not show yet, where admission still takes them (where it does not, their claim fails too)."""
        assert self._fleet is not None
        for p in list(self._pending.values()):
            if (hosts is not None and p.host not in hosts) or self._fleet.placement(p.vm) is not None:
                continue
            try:
                self._fleet.add(p)
            except VnumaError:
                continue
            self._on_host.setdefault(p.host, []).append(p.vm)


def _by_host(placements: list[Placement]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for p in placements:
        found.setdefault(p.host, []).append(p.vm)
    return found
