"""The engine's in-memory view of hosts and their claims, updated incrementally.

Pure: no I/O; mutable (``add``/``remove``), never mutates its arguments.
Hosts are kept in name order, so the order they are given in never matters.

What a placement holds, as the fleet accounts it:

* ``dedicated`` VMs hold their pinned pCPUs and an isolated emulator pCPU;
  with the ``isolate`` thread policy also every placeable sibling of those
  (kept empty, so counted as used); see :func:`held_pcpus`.
* ``shared`` VMs add their float set to the cell's shared pool (reference
  counted): pool pCPUs stay usable by other ``shared`` VMs of tenants allowed
  on those cores, never by dedicated VMs.
* pages of ``page_size_kib`` per cell, and the listed devices.

Reserved CPUs (``Host.reserved_cpus``) are never placeable; memory-only
cells are not guest cells in this version (see :mod:`vnuma.placement.ledger.cell`).

A host's per-cell objects are built on first use (:mod:`.host`): a
host nothing is placed on and the engine never looks at in detail costs its
shape's share only. Alongside the per-host objects the fleet keeps numpy arrays of per-cell
upper bounds of free capacity (:mod:`.arrays`) so the engine can
pre-filter a thousand hosts in a few vectorized operations, and the
engine's cache of refused request shapes (valid while ``epoch`` holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vnuma.errors import ConflictError, NotFoundError
from vnuma.placement.ledger.arrays import FleetArrays
from vnuma.placement.ledger.cell import CellState, CoreState
from vnuma.placement.ledger.host import HostState, ShapeCache
from vnuma.placement.model import Isolation, Placement, Rejection, ThreadPolicy
from vnuma.topology import Host


class _Plan:
    """The per-cell effect of one placement, checked before anything changes."""

    __slots__ = ("cores", "gpus", "loose_gpus", "pages")

    def __init__(self) -> None:
        self.cores: dict[CoreState, tuple[CellState, list[int], list[int]]] = {}
        self.pages: list[tuple[CellState, int, int]] = []
        self.gpus: list[tuple[CellState, str]] = []
        self.loose_gpus: list[str] = []


class Fleet:
    """Hosts and their current claims, as the placement engine sees them."""

    def __init__(
        self,
        hosts: Iterable[Host],
        placements: Iterable[Placement] = (),
        isolation: Mapping[str, Isolation] | None = None,
    ) -> None:
        ordered = sorted(hosts, key=lambda h: h.name)
        shapes = ShapeCache()
        self.states: tuple[HostState, ...] = tuple(
            HostState(h, i, shapes.shape(h)) for i, h in enumerate(ordered)
        )
        self.by_name = {s.name: s for s in self.states}
        if len(self.by_name) != len(self.states):
            raise ConflictError("duplicate host names in the fleet")
        self.isolation: dict[str, Isolation] = dict(isolation or {})
        self._placed: dict[str, Placement] = {}
        self.arrays = FleetArrays(self.states)
        self.gpus_total = sum(s.gpus_total for s in self.states)
        self.epoch = 0
        """Bumped whenever capacity may grow (a removal, an isolation change): invalidates caches."""
        self.gpu_epoch = 0
        """Bumped whenever a GPU is claimed or freed."""
        self.reject_cache: dict[object, list[tuple[int, int, int, Rejection]]] = {}
        self.reject_cache_epoch = 0
        for p in placements:
            self.add(p, self.isolation.get(p.tenant, Isolation.CORE))

    # --- queries ----------------------------------------------------------------------------

    def host_names(self) -> tuple[str, ...]:
        """Host names in the fleet's (name) order."""
        return tuple(s.name for s in self.states)

    def host(self, name: str) -> Host:
        """The host called ``name``.

        Raises:
            NotFoundError: no such host in the fleet.
        """
        return self.state(name).host

    def state(self, name: str) -> HostState:
        """The claim state of host ``name``; NotFoundError if absent."""
        try:
            return self.by_name[name]
        except KeyError:
            raise NotFoundError(f"unknown host {name!r}", hint="vnuma host list") from None

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

    # --- changes ----------------------------------------------------------------------------

    def add(self, placement: Placement, isolation: Isolation = Isolation.CORE) -> None:
        """Record a placement's claims; ``isolation`` is its tenant's.

        Raises:
            NotFoundError: the placement's host is not in the fleet.
            ConflictError: the VM is already held, or a pCPU, page or device it
                names is already taken or does not exist.
        """
        if placement.vm in self._placed:
            raise ConflictError(f"VM {placement.vm!r} is already placed")
        hs = self.state(placement.host)
        if self.isolation.get(placement.tenant, isolation) is not isolation:
            self.isolation[placement.tenant] = isolation
            self._rebucket(placement.tenant)
        self.isolation[placement.tenant] = isolation
        plan = self._plan(hs, placement)
        self._apply(hs, placement, plan, +1)
        self._placed[placement.vm] = placement

    def remove(self, vm_name: str) -> Placement:
        """Release a VM's claims and return its placement.

        Raises:
            NotFoundError: the fleet holds no VM of that name.
        """
        placement = self._placed.pop(vm_name, None)
        if placement is None:
            raise NotFoundError(f"unknown VM {vm_name!r}")
        hs = self.by_name[placement.host]
        self._apply(hs, placement, self._plan(hs, placement, check=False), -1)
        self.epoch += 1
        return placement

    def _rebucket(self, tenant: str) -> None:
        # A tenant's isolation changed: who may join its partly used cores changes too.
        self.epoch += 1
        for hs in self.states:
            if not hs.built:
                continue  # unclaimed: no core has owners
            for cell in hs.cells:
                cores = [core for core in cell.cores if tenant in core.owners]
                for core in cores:
                    cell.detach(core)
                    cell.attach(core, self.isolation)
                if cores:
                    self.arrays.sync_cell(hs, cell)

    def _held(self, hs: HostState, p: Placement) -> set[int]:
        held = set(p.dedicated_pcpus)
        if p.thread_policy is ThreadPolicy.ISOLATE:
            for cpu in list(held):
                cell = hs.cpu_cell.get(cpu)
                if cell is not None:
                    held.update(cell.core_of[cpu].cpus)
        return held

    def _plan(self, hs: HostState, p: Placement, *, check: bool = True) -> _Plan:
        plan = _Plan()
        where = f"VM {p.vm!r} on host {hs.name!r}"
        held = self._held(hs, p)
        for cpu in sorted(held | p.shared_pcpus):
            cell = hs.cpu_cell.get(cpu)
            if cell is None:
                if cpu in hs.host.reserved_cpus:
                    continue  # reserved after the VM was placed: nothing to account
                raise ConflictError(f"{where}: pCPU {cpu} is not a CPU of the host")
            core = cell.core_of[cpu]
            entry = plan.cores.get(core)
            if entry is None:
                entry = plan.cores[core] = (cell, [], [])
            if cpu in held:
                if check and cpu not in core.free:
                    raise ConflictError(f"{where}: pCPU {cpu} is already taken")
                entry[1].append(cpu)
            else:
                if check and cpu not in core.free and cpu not in core.shared:
                    raise ConflictError(f"{where}: pCPU {cpu} is held by another VM, cannot share it")
                entry[2].append(cpu)
        if len({ca.host_cell for ca in p.cells}) != len(p.cells):
            raise ConflictError(f"{where}: two guest cells on one host cell")
        for ca in p.cells:
            cell = hs.cell_by_id.get(ca.host_cell)
            if cell is None:
                raise ConflictError(f"{where}: host cell {ca.host_cell} is not a CPU cell of the host")
            if check and cell.pages_free.get(ca.page_size_kib, 0) < ca.pages:
                raise ConflictError(
                    f"{where}: cell {ca.host_cell} has {cell.pages_free.get(ca.page_size_kib, 0)} free "
                    f"{ca.page_size_kib} KiB pages, the VM claims {ca.pages}"
                )
            plan.pages.append((cell, ca.page_size_kib, ca.pages))
        self._plan_devices(hs, p, plan, where, check)
        return plan

    def _plan_devices(self, hs: HostState, p: Placement, plan: _Plan, where: str, check: bool) -> None:
        for dev in p.devices:
            if dev.kind != "gpu":
                continue
            if dev.address not in hs.gpu_home:
                raise ConflictError(f"{where}: GPU {dev.address} is not a GPU of the host")
            home = hs.gpu_home[dev.address]
            cell = hs.cell_by_id.get(home) if home is not None else None
            if cell is not None and dev.address in cell.gpus:
                if check and dev.address not in cell.gpus_free:
                    raise ConflictError(f"{where}: GPU {dev.address} is already taken")
                plan.gpus.append((cell, dev.address))
            else:
                if check and dev.address not in hs.loose_gpus_free:
                    raise ConflictError(f"{where}: GPU {dev.address} is already taken")
                plan.loose_gpus.append(dev.address)

    def _apply(self, hs: HostState, p: Placement, plan: _Plan, sign: int) -> None:
        touched: dict[int, CellState] = {}
        for core, (cell, held, shared) in plan.cores.items():
            touched[cell.id] = cell
            cell.detach(core)
            _change_core(core, held, shared, p.tenant, sign)
            cell.attach(core, self.isolation)
        for cell, size, count in plan.pages:
            cell.pages_free[size] = cell.pages_free.get(size, 0) - sign * count
            touched[cell.id] = cell
            left = cell.tenants.get(p.tenant, 0) + sign
            if left:
                cell.tenants[p.tenant] = left
            else:
                cell.tenants.pop(p.tenant, None)
        self._apply_gpus(hs, plan, sign, touched)
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
    left = core.owners.get(tenant, 0) + sign * (len(held) + len(shared))
    if left:
        core.owners[tenant] = left
    else:
        core.owners.pop(tenant, None)
