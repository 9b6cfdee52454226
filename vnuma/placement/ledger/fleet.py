"""The ledger of a fleet: hosts, what their VMs hold, and what each tenant holds.

Pure: no I/O; mutable through :meth:`Fleet.add` (admitted, see :mod:`.admit`),
:meth:`Fleet.record` (trusted: placements the inventory already holds) and
:meth:`Fleet.remove`; never mutates its arguments. Hosts are kept in name
order, so the order they are given in never matters.

What a placement holds is booked by :mod:`.booking`; per tenant, the fleet also counts the vCPUs and
GPUs of its VMs (its quotas' usage), on top of what it holds on hosts outside this ledger
(``usage_elsewhere``: a claim builds a one-host ledger), and per replica group its VMs on every host
(:attr:`Fleet.groups`, what affinity asks), on top of its VMs on hosts outside this ledger
(``members_elsewhere``: counted as members only, their claims are not the ledger's), and the GPUs of hosts
outside it (``gpus_elsewhere``: what a request is checked against, :func:`~vnuma.placement.request.validate_request`).

Reserved CPUs (``Host.reserved_cpus``) are never placeable; memory-only
cells are not guest cells in this version (see :mod:`.cell`). A host's
per-cell objects are built when a claim is first recorded there
(:mod:`.host`). Alongside the per-host objects the ledger keeps numpy
arrays of per-cell upper bounds of free capacity (:mod:`.arrays`) so the
engine can pre-filter a thousand hosts in a few vectorized operations.
``epoch`` and ``gpu_epoch`` count changes that may let a refused request
in (a removal or isolation change; a GPU claim or release).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from vnuma.errors import ConflictError, GroupModeError, InvalidInputError, NotFoundError
from vnuma.placement.groups import MODE_HINT, GroupIndex
from vnuma.placement.ledger.admit import admit
from vnuma.placement.ledger.arrays import FleetArrays
from vnuma.placement.ledger.booking import Plan, block, book, plan_of
from vnuma.placement.ledger.candidates import Candidates
from vnuma.placement.ledger.cell import CellState
from vnuma.placement.ledger.claim import REPLACE_HINT, gpu_count
from vnuma.placement.ledger.host import SHAPES, HostState
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.placement.result import Rejection
from vnuma.topology import Host

TenantsArg = Iterable[Tenant] | Mapping[str, Isolation] | None
NO_USE = Usage()


def _tenants(arg: TenantsArg) -> dict[str, Tenant]:
    """Tenants by name from Tenant objects, or from an isolation mapping (no quotas)."""
    if arg is None:
        return {}
    if isinstance(arg, Mapping):
        return {name: Tenant(name, isolation) for name, isolation in arg.items()}
    return {t.name: t for t in arg}


class Fleet:
    """Hosts, their current claims and the tenants' usage: the engine's and the claim's ledger."""

    def __init__(
        self,
        hosts: Iterable[Host],
        placements: Iterable[Placement] = (),
        tenants: TenantsArg = None,
        *,
        usage_elsewhere: Mapping[str, Usage] | None = None,
        members_elsewhere: Iterable[Placement] = (),
        gpus_elsewhere: int = 0,
        vms_elsewhere: frozenset[str] = frozenset(),
    ) -> None:
        ordered = sorted(hosts, key=lambda h: h.name)
        self.states: tuple[HostState, ...] = tuple(
            HostState(h, i, SHAPES.shape(h)) for i, h in enumerate(ordered)
        )
        self.by_name = {s.name: s for s in self.states}
        if len(self.by_name) != len(self.states):
            raise ConflictError("duplicate host names in the fleet")
        self.groups = GroupIndex()
        """Every VM of each replica group, on any host (:mod:`vnuma.placement.groups`)."""
        for hs in self.states:
            hs.group_index = self.groups
        for p in members_elsewhere:
            self.groups.add(p)
        self.tenants = _tenants(tenants)
        self.isolation: dict[str, Isolation] = {name: t.isolation for name, t in self.tenants.items()}
        # Per tenant [vCPUs, GPUs], counted as placements come and go (used() gives the Usage).
        self._usage: dict[str, list[int]] = {t: [u.vcpus, u.gpus] for t, u in (usage_elsewhere or {}).items()}
        self._placed: dict[str, Placement] = {}
        self.arrays = FleetArrays(self.states)
        self.gpus_total = gpus_elsewhere + sum(s.gpus_total for s in self.states)
        """The fleet's GPUs, those of hosts outside this ledger (``gpus_elsewhere``) included."""
        self.vms_elsewhere = vms_elsewhere
        """The VMs of hosts outside this ledger (:meth:`has_vm`)."""
        self.epoch = 0
        """Bumped whenever capacity may grow (a removal, an isolation change): invalidates refusal memories."""
        self.gpu_epoch = 0
        """Bumped whenever a GPU is claimed or freed."""
        self._candidates: Candidates | None = None
        # Recorded in bulk: each touched cell's arrays are written once at the end, not per placement.
        touched: dict[tuple[int, int], tuple[HostState, CellState]] = {}
        for p in placements:
            self._record(p, touched)
        blocked = [hs for hs in self.states if hs.blocked]
        for hs in blocked:
            hs.build()
            touched.update(((hs.index, cell.id), (hs, cell)) for cell in block(hs).values())
        for hs, cell in touched.values():
            self.arrays.sync_cell(hs, cell)
        for hs in {**{hs.index: hs for hs, _cell in touched.values()}, **{hs.index: hs for hs in blocked}}.values():
            self.arrays.sync_host(hs)
        self._candidates = Candidates(self.states, self.by_name, self.arrays)

    # --- queries ----------------------------------------------------------------------------

    @property
    def candidates(self) -> Candidates:
        """The hosts the engine's fast path looks at (:mod:`.candidates`)."""
        assert self._candidates is not None, "read while the fleet was being made"
        return self._candidates

    def host_names(self) -> tuple[str, ...]:
        """Host names in the fleet's (name) order."""
        return tuple(s.name for s in self.states)

    def host(self, name: str) -> Host:
        """The host called ``name`` (NotFoundError if absent)."""
        return self.state(name).host

    def state(self, name: str) -> HostState:
        """The claim state of host ``name``.

        Raises:
            NotFoundError: no such host in the fleet.
        """
        try:
            return self.by_name[name]
        except KeyError:
            raise NotFoundError(f"unknown host {name!r}", hint="vnuma host list") from None

    def tenant(self, name: str | None) -> Tenant:
        """Tenant ``name`` with its isolation and quotas (unknown: core isolation, no quotas)."""
        found = self.tenants.get(name) if name is not None else None
        return found if found is not None else Tenant(name or "", self.isolation.get(name or "", Isolation.CORE))

    def used(self, tenant: str | None) -> Usage:
        """What the tenant's VMs hold (its quotas' usage)."""
        counts = self._usage.get(tenant) if tenant is not None else None
        return Usage(counts[0], counts[1]) if counts else NO_USE

    def placements(self) -> tuple[Placement, ...]:
        """Every placement the fleet holds, in VM name order."""
        return tuple(self._placed[v] for v in sorted(self._placed))

    def placement(self, vm: str) -> Placement | None:
        """The placement of ``vm``, None if the fleet does not hold it."""
        return self._placed.get(vm)

    def has_vm(self, vm: str) -> bool:
        """Is ``vm`` placed, here or on a host outside this ledger (``vms_elsewhere``)?"""
        return vm in self._placed or vm in self.vms_elsewhere

    def free_pcpus(self, host: str) -> frozenset[int]:
        """pCPUs of ``host`` that nothing holds and that are not in the shared pool."""
        return frozenset(t for c in self.state(host).cells for core in c.cores for t in core.free)

    def free_pages(self, host: str, cell: int, size_kib: int) -> int:
        """Free pages of ``size_kib`` on one CPU cell of ``host`` (0 for other cells)."""
        state = self.state(host).cell_by_id.get(cell)
        return state.pages_free.get(size_kib, 0) if state else 0

    def free_gpus(self, host: str) -> tuple[str, ...]:
        """Addresses of the unclaimed GPUs of ``host``, sorted."""
        hs = self.state(host)
        return tuple(sorted([a for c in hs.cells for a in c.gpus_free] + hs.loose_gpus_free))

    def held_pcpus(self, p: Placement) -> frozenset[int]:
        """Every pCPU ``p`` keeps from other VMs on its host (see :meth:`HostState.held_pcpus`)."""
        return self.state(p.host).held_pcpus(p)

    def admit(self, p: Placement, isolation: Isolation | None = None, *, returning: bool = False) -> Rejection | None:
        """None when ``p`` may be claimed now; else why not (see :mod:`.admit`). ``isolation``, when
        given, is the tenant's for this question (a request carries its tenant's); ``returning``: ``p`` is
        what the VM held before a journaled run (an undo).

        Raises:
            NotFoundError: the placement's host is not in the fleet.
        """
        tenant = self.tenant(p.tenant)
        if isolation is not None and isolation is not tenant.isolation:
            tenant = replace(tenant, isolation=isolation)
        quotas = tenant.max_vcpus is not None or tenant.max_gpus is not None
        used = self.used(p.tenant) if quotas else NO_USE
        return admit(p, self.state(p.host), tenant, self.isolation, used, returning=returning)

    # --- changes ----------------------------------------------------------------------------

    def add(self, placement: Placement, isolation: Isolation | None = None) -> None:
        """Admit a placement and record its claims; ``isolation`` (when given) is its tenant's.

        Raises:
            NotFoundError: the placement's host is not in the fleet.
            InvalidInputError: a malformed placement (admission's ``shape``).
            ConflictError: the VM is already held, or admission refuses it.
            GroupModeError: it asks affinity of an anti-affine group or the reverse (``group-mode``).
        """
        if placement.vm in self._placed:
            raise ConflictError(f"VM {placement.vm!r} is already placed")
        if placement.tenant is None:
            raise InvalidInputError(f"VM {placement.vm!r}: a placement without a tenant (a probe) is never claimed")
        if isolation is not None:
            self.set_isolation(placement.tenant, isolation)
        refusal = self.admit(placement)
        if refusal is not None:
            if refusal.check == "group-mode":
                raise GroupModeError(refusal.reason, hint=refusal.hint or MODE_HINT)
            error = InvalidInputError if refusal.check == "shape" else ConflictError
            raise error(f"VM {placement.vm!r}: {refusal.reason}", hint=refusal.hint or REPLACE_HINT)
        self.record(placement)

    def set_isolation(self, tenant: str, isolation: Isolation) -> None:
        """Record a tenant's isolation; who may join its partly used cores changes with it."""
        current = self.isolation.get(tenant)
        if current is isolation:
            return
        known = self.tenants.get(tenant)
        self.tenants[tenant] = replace(known, isolation=isolation) if known else Tenant(tenant, isolation)
        self.isolation[tenant] = isolation
        if current is not None or tenant in self._usage:
            self._rebucket(tenant, current is Isolation.CELL)

    def record(self, placement: Placement) -> None:
        """Record a placement's claims without admission: for what the inventory already holds.

        Resources it names that the host no longer has (a CPU reserved since)
        are skipped; nothing is checked.

        Raises:
            NotFoundError: the placement's host is not in the fleet.
            ConflictError: the fleet already holds a VM of that name.
        """
        self._record(placement, None)

    def _record(self, placement: Placement, touched: dict[tuple[int, int], tuple[HostState, CellState]] | None) -> None:
        if placement.vm in self._placed:
            raise ConflictError(f"VM {placement.vm!r} is already placed")
        hs = self.state(placement.host)
        hs.build()
        if self._candidates is not None:
            self._candidates.claimed(hs)
        self._apply(hs, placement, plan_of(hs, placement), +1, touched)
        self._placed[placement.vm] = placement
        if placement.group is not None:
            hs.groups.setdefault(placement.group, []).append(placement)
            self.groups.add(placement)
        if placement.llc or placement.mem_bw:
            hs.resctrl_use.apply(placement, +1)

    def remove(self, vm_name: str) -> Placement:
        """Release a VM's claims and return its placement.

        Raises:
            NotFoundError: the fleet holds no VM of that name.
        """
        placement = self._placed.pop(vm_name, None)
        if placement is None:
            raise NotFoundError(f"unknown VM {vm_name!r}")
        hs = self.by_name[placement.host]
        self._apply(hs, placement, plan_of(hs, placement), -1)
        if placement.llc or placement.mem_bw:
            hs.resctrl_use.apply(placement, -1)
        if placement.group is not None:
            members = hs.groups[placement.group]
            members.remove(placement)
            if not members:
                del hs.groups[placement.group]
            self.groups.discard(placement)
        self.epoch += 1
        return placement

    def _rebucket(self, tenant: str, was_cell: bool) -> None:
        self.epoch += 1
        now_cell = self.isolation.get(tenant) is Isolation.CELL
        for hs in self.states:
            if not hs.built:
                continue  # unclaimed: no core has owners
            for cell in hs.cells:
                if was_cell != now_cell and tenant in cell.tenants:
                    cell.locked += 1 if now_cell else -1
                cores = [core for core in cell.cores if tenant in core.owners]
                for core in cores:
                    cell.detach(core)
                    cell.attach(core, self.isolation)
                if cores:
                    self.arrays.sync_cell(hs, cell)

    def _apply(
        self,
        hs: HostState,
        p: Placement,
        plan: Plan,
        sign: int,
        deferred: dict[tuple[int, int], tuple[HostState, CellState]] | None = None,
    ) -> None:
        """Book a plan; the arrays follow now, or for ``deferred`` cells when the caller syncs them."""
        touched, gpu_moves = book(hs, p, plan, sign, self.isolation)
        self.gpu_epoch += gpu_moves
        if p.tenant is not None:
            counts = self._usage.setdefault(p.tenant, [0, 0])
            counts[0] += sign * p.vcpus
            counts[1] += sign * gpu_count(p)
        if deferred is not None:
            deferred.update(((hs.index, cell.id), (hs, cell)) for cell in touched.values())
            return
        for cell in touched.values():
            self.arrays.sync_cell(hs, cell)
        self.arrays.sync_host(hs)
