"""What one placement changes on one host of the ledger: its plan, booked (recorded) or released.

Pure: no I/O; changes only the :class:`~vnuma.placement.ledger.host.HostState` it is given, for
:class:`~vnuma.placement.ledger.fleet.Fleet`, the one writer (which keeps the tenants' usage, the epochs and
the numpy arrays in step).

What a placement holds, as the ledger books it:

* ``dedicated`` VMs hold their pinned pCPUs and an isolated emulator pCPU;
  with the ``isolate`` thread policy also every placeable sibling of those
  (kept empty, so counted as used); see :meth:`HostState.held_pcpus`.
* ``shared`` VMs add their float set to the cell's shared pool (reference
  counted): pool pCPUs stay usable by other ``shared`` VMs of tenants allowed
  on those cores, never by dedicated VMs.
* pages of ``page_size_kib`` per cell, and the listed devices (any kind).
"""

from __future__ import annotations

from collections.abc import Mapping

from vnuma.placement.ledger.cell import CellState, CoreState
from vnuma.placement.ledger.claim import page_needs
from vnuma.placement.ledger.host import HostState, blocked_holder
from vnuma.placement.model import Isolation, Placement


class Plan:
    """The per-cell effect of one placement on one host."""

    __slots__ = ("cells", "cold", "cores", "gpus", "loose_gpus", "pages")

    def __init__(self) -> None:
        self.cores: dict[CoreState, tuple[CellState, list[int], list[int]]] = {}
        self.pages: list[tuple[CellState, int, int]] = []
        self.cold: list[tuple[tuple[int, int], int]] = []
        self.gpus: list[tuple[CellState, str]] = []
        self.loose_gpus: list[str] = []
        self.cells: list[CellState] = []


def plan_of(hs: HostState, p: Placement) -> Plan:
    """What ``p`` changes on ``hs``; the cells it changes become the host's own first."""
    plan = Plan()
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
        cell = hs.gpu_cell(dev.address)
        if cell is not None:
            plan.gpus.append((cell, dev.address))
        else:
            plan.loose_gpus.append(dev.address)
    return plan


def book(
    hs: HostState, p: Placement, plan: Plan, sign: int, isolation: Mapping[str, Isolation]
) -> tuple[dict[int, CellState], int]:
    """Record (``sign`` +1) or release (-1) ``plan``, the effect of ``p`` on ``hs`` (:func:`plan_of`), under the
    tenants' ``isolation``: the cells whose free capacity changed (the fleet's arrays follow them), and how
    many times a GPU was claimed or freed (the fleet's ``gpu_epoch`` counts them)."""
    touched: dict[int, CellState] = {}
    for core, (cell, held, shared) in plan.cores.items():
        touched[cell.id] = cell
        copied = cell.copied
        if copied is not None and core.index not in copied:
            core = cell.own(core)
        cell.detach(core)
        _change_core(core, held, shared, p.tenant or "", sign)
        cell.attach(core, isolation)
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
    locking = isolation.get(tenant) is Isolation.CELL
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
            _let_go(hs, dev.address)
    gpu_moves = _book_gpus(hs, plan, sign, touched)
    if p.partitions:
        gpu_moves += _book_partitions(hs, p, sign, touched)
    return touched, gpu_moves


def block(hs: HostState) -> dict[int, CellState]:
    """Keep the host's blocked (tainted or cleaning) devices from new claims: out of the free GPUs, and in
    ``devices_taken`` under :func:`~.host.blocked_holder` where no VM holds them (the NIC, VF and partition
    choices skip taken devices). The fleet calls this once its placements are recorded; returns the cells
    whose free GPUs changed."""
    touched: dict[int, CellState] = {}
    for address, state in hs.blocked.items():
        hs.devices_taken.setdefault(address, blocked_holder(state))
        if address not in hs.gpu_home:
            continue
        cell = hs.gpu_cell(address)
        if cell is not None:
            cell = hs.own_cell(cell)
            free = cell.gpus_free
            touched[cell.id] = cell
        else:
            free = hs.loose_gpus_free
        if address in free:
            free.remove(address)
            hs.gpus_free -= 1
    return touched


def _let_go(hs: HostState, address: str) -> None:
    """A VM releases ``address``: free, or still held from new claims when it is blocked."""
    state = hs.blocked.get(address)
    if state is None:
        del hs.devices_taken[address]
    else:
        hs.devices_taken[address] = blocked_holder(state)


def _book_gpus(hs: HostState, plan: Plan, sign: int, touched: dict[int, CellState]) -> int:
    """Take (or give back) the plan's GPUs from the free ones; a blocked GPU never comes back free, and one
    already out of them (blocked) is not taken twice. Returns 1 when a GPU moved, else 0."""
    count = 0
    blocked = hs.blocked
    for cell, address in plan.gpus:
        count += _move_gpu(cell.gpus_free, address, sign, blocked)
        touched[cell.id] = cell
    for address in plan.loose_gpus:
        count += _move_gpu(hs.loose_gpus_free, address, sign, blocked)
    hs.gpus_free -= sign * count
    return 1 if count else 0


def _move_gpu(free: list[str], address: str, sign: int, blocked: Mapping[str, object]) -> int:
    if sign > 0:
        if address not in free:
            return 0
        free.remove(address)
        return 1
    if address in blocked or address in free:
        return 0
    free.append(address)
    free.sort()
    return 1


def _book_partitions(hs: HostState, p: Placement, sign: int, touched: dict[int, CellState]) -> int:
    """Record or release ``p``'s partitions; a GPU leaves its cell's free GPUs while it holds any, so no
    whole-GPU request takes it (:mod:`vnuma.placement.partitions`). Returns how many GPUs did so or came back."""
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
            _let_go(hs, a.vf)
    moves = 0
    for gpu in sorted({a.gpu for a in p.partitions}):
        cell = hs.gpu_cell(gpu)
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
        moves += 1
        if cell is not None:
            touched[cell.id] = cell
    return moves


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
