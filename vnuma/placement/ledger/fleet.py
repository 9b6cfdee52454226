"""The ledger of a fleet: hosts, what their VMs hold, and what each tenant holds.

Pure: no I/O; mutable through :meth:`Fleet.add` (admitted, see :mod:`.admit`),
:meth:`Fleet.record` (trusted: placements the inventory already holds) and
:meth:`Fleet.remove`; never mutates its arguments. Hosts are kept in name
order, so the order they are given in never matters.

What a placement holds, as the ledger accounts it:

* ``dedicated`` VMs hold their pinned pCPUs and an isolated emulator pCPU;
  with the ``isolate`` thread policy also every placeable sibling of those
  (kept empty, so counted as used); see :meth:`HostState.held_pcpus`.
* ``shared`` VMs add their float set to the cell's shared pool (reference
  counted): pool pCPUs stay usable by other ``shared`` VMs of tenants allowed
  on those cores, never by dedicated VMs.
* pages of ``page_size_kib`` per cell, and the listed devices (any kind).
* per tenant, the vCPUs and GPUs of its VMs (its quotas' usage), on top of
  what it holds on hosts outside this ledger (``usage_elsewhere``: a claim
  builds a one-host ledger).
* per replica group, its VMs on every host (:attr:`Fleet.groups`, what
  affinity asks), on top of its VMs on hosts outside this ledger
  (``members_elsewhere``: counted as members only, their claims are not the
  ledger's).

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
from vnuma.placement.ledger.cell import CellState, CoreState
from vnuma.placement.ledger.claim import REPLACE_HINT, gpu_count, page_needs
from vnuma.placement.ledger.host import HostState, ShapeCache
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.quota import Usage
from vnuma.placement.result import Rejection
from vnuma.topology import Host

TenantsArg = Iterable[Tenant] | Mapping[str, Isolation] | None
NO_USE = Usage()


class _Plan:
    """The per-cell effect of one placement on one host."""

    __slots__ = ("cells", "cold", "cores", "gpus", "loose_gpus", "pages")

    def __init__(self) -> None:
        self.cores: dict[CoreState, tuple[CellState, list[int], list[int]]] = {}
        self.pages: list[tuple[CellState, int, int]] = []
        self.cold: list[tuple[tuple[int, int], int]] = []
        self.gpus: list[tuple[CellState, str]] = []
        self.loose_gpus: list[str] = []
        self.cells: list[CellState] = []


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
    ) -> None:
        ordered = sorted(hosts, key=lambda h: h.name)
        shapes = ShapeCache()
        self.states: tuple[HostState, ...] = tuple(
            HostState(h, i, shapes.shape(h)) for i, h in enumerate(ordered)
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
        self.gpus_total = sum(s.gpus_total for s in self.states)
        self.epoch = 0
        """Bumped whenever capacity may grow (a removal, an isolation change): invalidates refusal memories."""
        self.gpu_epoch = 0
        """Bumped whenever a GPU is claimed or freed."""
        # Recorded in bulk: each touched cell's arrays are written once at the end, not per placement.
        touched: dict[tuple[int, int], tuple[HostState, CellState]] = {}
        for p in placements:
            self._record(p, touched)
        for hs, cell in touched.values():
            self.arrays.sync_cell(hs, cell)
        for hs in {hs.index: hs for hs, _cell in touched.values()}.values():
            self.arrays.sync_host(hs)

    # --- queries ----------------------------------------------------------------------------

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
        self._apply(hs, placement, self._plan(hs, placement), +1, touched)
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
        self._apply(hs, placement, self._plan(hs, placement), -1)
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

    def _plan(self, hs: HostState, p: Placement) -> _Plan:
        """What ``p`` changes on ``hs``; the cells it changes become the host's own first."""
        plan = _Plan()
        held = hs.held_pcpus(p)
        index = hs.shape.cpu_index
        # Each pCPU's cell, by position (reserved or gone since the VM was placed: nothing to account).
        where = [(cpu, i) for cpu in held | p.shared_pcpus if (i := index.get(cpu)) is not None]
        cells = {hs.cells[i].id for _cpu, i in where} | {ca.host_cell for ca in p.cells}
        homes = [hs.gpu_home[d.address] for d in p.devices if d.kind == "gpu" and d.address in hs.gpu_home]
        for cell_id in cells.union(h for h in homes if h is not None):
            cell = hs.cell_by_id.get(cell_id)
            if cell is not None:
                hs.own_cell(cell)
        for cpu, i in where:
            cell = hs.cells[i]
            core = cell.cores[cell.core_at[cpu]]
            entry = plan.cores.get(core)
            if entry is None:
                entry = plan.cores[core] = (cell, [], [])
            entry[1 if cpu in held else 2].append(cpu)
        by_id = hs.cell_by_id
        needs = page_needs(p)
        plan.pages = [(by_id[cell], size, n) for (cell, size), n in needs.items() if cell in by_id]
        plan.cold = [(key, n) for key, n in needs.items() if key[0] not in by_id and key in hs.cold_free]
        plan.cells = [by_id[c] for c in cells if c in by_id]
        for dev in p.devices:
            if dev.kind != "gpu" or dev.address not in hs.gpu_home:
                continue
            home = hs.gpu_home[dev.address]
            cell = by_id.get(home) if home is not None else None
            if cell is not None and dev.address in cell.gpus:
                plan.gpus.append((cell, dev.address))
            else:
                plan.loose_gpus.append(dev.address)
        return plan

    def _apply(
        self,
        hs: HostState,
        p: Placement,
        plan: _Plan,
        sign: int,
        deferred: dict[tuple[int, int], tuple[HostState, CellState]] | None = None,
    ) -> None:
        """Apply a plan; the arrays follow now, or for ``deferred`` cells when the caller syncs them."""
        touched: dict[int, CellState] = {}
        for core, (cell, held, shared) in plan.cores.items():
            touched[cell.id] = cell
            copied = cell.copied
            if copied is not None and core.index not in copied:
                core = cell.own(core)
            cell.detach(core)
            _change_core(core, held, shared, p.tenant or "", sign)
            cell.attach(core, self.isolation)
            if sign > 0:
                hs.holders.update(dict.fromkeys(held, p.vm))
            else:
                for cpu in held:
                    hs.holders.pop(cpu, None)
            for cpu in shared:
                floating = hs.floaters.setdefault(cpu, set())
                if sign > 0:
                    floating.add(p.vm)
                else:
                    floating.discard(p.vm)
                    if not floating:
                        del hs.floaters[cpu]
        for cell, size, count in plan.pages:
            cell.pages_free[size] = cell.pages_free.get(size, 0) - sign * count
            touched[cell.id] = cell
        for key, count in plan.cold:
            hs.cold_free[key] = hs.cold_free.get(key, 0) - sign * count
        tenant = p.tenant or ""
        locking = self.isolation.get(tenant) is Isolation.CELL
        for cell in plan.cells:
            left = cell.tenants.get(tenant, 0) + sign
            if left:
                cell.tenants[tenant] = left
            else:
                del cell.tenants[tenant]
            if locking and left == (1 if sign > 0 else 0):  # the tenant came to or left the cell
                cell.locked += sign
        for dev in p.devices:
            if sign > 0:
                hs.devices_taken[dev.address] = p.vm
            elif hs.devices_taken.get(dev.address) == p.vm:
                del hs.devices_taken[dev.address]
        self._apply_gpus(hs, plan, sign, touched)
        if p.partitions:
            self._apply_partitions(hs, p, sign, touched)
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

    def _apply_gpus(self, hs: HostState, plan: _Plan, sign: int, touched: dict[int, CellState]) -> None:
        for cell, address in plan.gpus:
            if sign > 0:
                cell.gpus_free.remove(address)
            else:
                cell.gpus_free.append(address)
                cell.gpus_free.sort()
            touched[cell.id] = cell
        for address in plan.loose_gpus:
            if sign > 0:
                hs.loose_gpus_free.remove(address)
            else:
                hs.loose_gpus_free.append(address)
                hs.loose_gpus_free.sort()
        count = len(plan.gpus) + len(plan.loose_gpus)
        if count:
            hs.gpus_free -= sign * count
            self.gpu_epoch += 1


    def _apply_partitions(self, hs: HostState, p: Placement, sign: int, touched: dict[int, CellState]) -> None:
        """Record or release ``p``'s partitions; a GPU leaves its cell's free GPUs while it holds any, so no
        whole-GPU request takes it (:mod:`vnuma.placement.partitions`)."""
        for a in p.partitions:
            if sign > 0:
                hs.partitions.setdefault(a.gpu, []).append((p.vm, a))
                if a.vf is not None:
                    hs.devices_taken[a.vf] = p.vm
                continue
            held = hs.partitions.get(a.gpu, [])
            if (p.vm, a) in held:
                held.remove((p.vm, a))
            if not held:
                hs.partitions.pop(a.gpu, None)
            if a.vf is not None and hs.devices_taken.get(a.vf) == p.vm:
                del hs.devices_taken[a.vf]
        for gpu in sorted({a.gpu for a in p.partitions}):
            home = hs.gpu_home.get(gpu)
            cell = hs.cell_by_id.get(home) if home is not None else None
            if cell is not None:
                cell = hs.own_cell(cell)
            free = cell.gpus_free if cell is not None else hs.loose_gpus_free
            partitioned = bool(hs.partitions.get(gpu))
            if partitioned and gpu in free:
                free.remove(gpu)
                hs.gpus_free -= 1
            elif not partitioned and gpu not in free and gpu not in hs.devices_taken:
                free.append(gpu)
                free.sort()
                hs.gpus_free += 1
            else:
                continue
            self.gpu_epoch += 1
            if cell is not None:
                touched[cell.id] = cell


def _count(counts: dict[str, int], key: str, delta: int) -> None:
    left = counts.get(key, 0) + delta
    if left:
        counts[key] = left
    else:
        counts.pop(key, None)


def _change_core(core: CoreState, held: list[int], shared: list[int], tenant: str, sign: int) -> None:
    if sign > 0:
        core.free.difference_update(held)
        for cpu in shared:
            core.free.discard(cpu)
            core.shared[cpu] = core.shared.get(cpu, 0) + 1
    else:
        core.free.update(held)
        for cpu in shared:
            refs = core.shared[cpu] - 1
            if refs:
                core.shared[cpu] = refs
            else:
                del core.shared[cpu]
                core.free.add(cpu)
    _count(core.owners, tenant, sign * (len(held) + len(shared)))
