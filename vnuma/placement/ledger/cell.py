"""Per-core and per-cell claim state of one host, kept as running aggregates.

Pure: no I/O. This is the engine's bookkeeping below :class:`Fleet`: every
placeable CPU (reserved CPUs excluded) belongs to one *core* (its SMT sibling
group restricted to placeable CPUs). A thread is free, held by a VM
(a dedicated pin, an isolated emulator pCPU, or a sibling kept empty by the
``isolate`` thread policy) or in the shared pool (floated over by ``shared``
VMs, reference counted).

A core with claims has *owners* (tenants). Who may still use its free or
shared threads is its *bucket*: the owner tenant itself under core or cell
isolation, :data:`NONE_BUCKET` when every owner has isolation ``none`` (any
``none`` tenant may join), :data:`BLOCKED` otherwise. A fully free core has
no bucket. Cells keep, per bucket, the free/shared thread counts of their
partly used cores, so a tenant's exact capacity is O(1) per cell.

A request may have no tenant yet (``None``: a capacity probe, room for a
newcomer): it gets the :data:`NEWCOMER` bucket, which no core ever has, so
it sees whole free cores only, and it may use every cell no cell-isolated
tenant holds.

Memory-only cells (no CPUs) are not tracked: a guest NUMA cell must have
vCPUs in libvirt terms, so this version never uses them as guest cells.
"""

from __future__ import annotations

from collections.abc import Mapping

from vnuma.placement.model import CpuPolicy, Isolation, ThreadPolicy
from vnuma.topology import PAGE_4K, Cell, Host

NONE_BUCKET = "\x00none"
BLOCKED = "\x00blocked"
NEWCOMER = "\x00newcomer"
"""The bucket of a request without a tenant: never a core's bucket (see :func:`bucket_of`)."""


class CoreState:
    """One SMT sibling group of placeable CPUs and its claims."""

    __slots__ = ("bucket", "cpus", "free", "index", "owners", "shared")

    def __init__(self, index: int, cpus: tuple[int, ...]) -> None:
        self.index = index
        self.cpus = cpus
        self.free: set[int] = set(cpus)
        self.shared: dict[int, int] = {}
        self.owners: dict[str, int] = {}
        self.bucket: str | None = None

    @property
    def whole_free(self) -> bool:
        """True when no thread of the core is claimed."""
        return not self.owners


class CellState:
    """Claim aggregates of one CPU cell."""

    __slots__ = (
        "col",
        "copied",
        "core_at",
        "cores",
        "free_core_pairs",
        "free_core_threads",
        "free_cores",
        "free_kib",
        "gpus",
        "gpus_free",
        "id",
        "locked",
        "pages_free",
        "pages_total",
        "partial_free",
        "partial_pairs",
        "shared_threads",
        "tenants",
        "threads_free",
        "threads_total",
        "width",
    )

    def __init__(self, cell: Cell, placeable: frozenset[int], gpus: tuple[str, ...], base_kib: int = PAGE_4K) -> None:
        self.id = cell.id
        self.col = 0  # position among the host's CPU cells (a column of the fleet arrays)
        self.cores: list[CoreState] = []
        self.core_at: dict[int, int] = {}
        """pCPU -> its core's index in ``cores`` (never changes: copies share it)."""
        seen: set[int] = set()
        mine = placeable & cell.cpu_ids
        for cpu in cell.cpus:
            if cpu.id in seen or cpu.id not in mine:
                continue
            group = tuple(sorted((cpu.siblings | {cpu.id}) & mine))
            seen.update(group)
            core = CoreState(len(self.cores), group)
            self.cores.append(core)
            for t in group:
                self.core_at[t] = core.index
        self.threads_total = sum(len(c.cpus) for c in self.cores)
        self.width = max((len(c.cpus) for c in self.cores), default=1)
        """The widest core's thread count (2 on SMT hosts, 1 without SMT)."""
        self.free_cores: set[int] = {c.index for c in self.cores}
        self.free_core_threads = self.threads_total
        self.free_core_pairs = sum(len(c.cpus) // 2 for c in self.cores)
        self.partial_free: dict[str, int] = {}
        self.partial_pairs: dict[str, int] = {}
        self.shared_threads: dict[str, int] = {}
        pools = {p.size_kib: p.count for p in cell.pages} or {base_kib: cell.memory_kib // base_kib}
        self.pages_total: dict[int, int] = dict(pools)
        self.pages_free: dict[int, int] = dict(pools)
        self.gpus: tuple[str, ...] = gpus
        self.gpus_free: list[str] = list(gpus)
        self.tenants: dict[str, int] = {}
        self.locked = 0  # how many of those tenants have cell isolation (kept by the fleet)
        self.copied: set[int] | None = None  # None: every core is this cell's own (see own())
        self.threads_free = self.threads_total  # kept up to date by FleetArrays.sync_cell
        self.free_kib = sum(size * n for size, n in self.pages_free.items())

    def fresh_copy(self) -> CellState:
        """An independent copy of this cell as it is with no claims (call on an unclaimed cell only)."""
        new = CellState.__new__(CellState)
        new.id = self.id
        new.col = self.col
        # Copy on write: the new cell shares this cell's (unclaimed) cores until it changes one (own()).
        new.cores = list(self.cores)
        new.core_at = self.core_at
        new.copied = set()
        new.threads_total = self.threads_total
        new.width = self.width
        new.free_cores = set(self.free_cores)
        new.free_core_threads = self.free_core_threads
        new.free_core_pairs = self.free_core_pairs
        new.partial_free = {}
        new.partial_pairs = {}
        new.shared_threads = {}
        new.pages_total = self.pages_total  # never changed
        new.pages_free = dict(self.pages_total)
        new.gpus = self.gpus
        new.gpus_free = list(self.gpus)
        new.tenants = {}
        new.locked = 0
        new.threads_free = self.threads_total
        new.free_kib = self.free_kib
        return new

    def own(self, core: CoreState) -> CoreState:
        """This cell's own copy of ``core``, made the first time the cell changes it (see fresh_copy)."""
        copied = self.copied
        if copied is None or core.index in copied:
            return core
        mine = self.cores[core.index] = CoreState(core.index, core.cpus)
        copied.add(core.index)
        return mine

    def core(self, cpu: int) -> CoreState:
        """The core of placeable pCPU ``cpu``."""
        return self.cores[self.core_at[cpu]]

    # --- aggregates -------------------------------------------------------------------------

    def detach(self, core: CoreState) -> None:
        """Remove a core's contribution from the aggregates (before changing it)."""
        self._account(core, -1)

    def attach(self, core: CoreState, isolation: Mapping[str, Isolation]) -> None:
        """Recompute a core's bucket and add its contribution back."""
        core.bucket = bucket_of(core.owners, isolation)
        self._account(core, 1)

    def _account(self, core: CoreState, sign: int) -> None:
        if core.bucket is None:
            if sign > 0:
                self.free_cores.add(core.index)
            else:
                self.free_cores.discard(core.index)
            self.free_core_threads += sign * len(core.cpus)
            self.free_core_pairs += sign * (len(core.cpus) // 2)
            return
        b = core.bucket
        free = len(core.free)
        if free:
            self.partial_free[b] = self.partial_free.get(b, 0) + sign * free
            if free >= 2:
                self.partial_pairs[b] = self.partial_pairs.get(b, 0) + sign * (free // 2)
        if core.shared:
            self.shared_threads[b] = self.shared_threads.get(b, 0) + sign * len(core.shared)

    # --- capacity ---------------------------------------------------------------------------

    def usable_by(self, tenant: str | None, isolation: Isolation, isolations: Mapping[str, Isolation]) -> bool:
        """Cell isolation: may ``tenant`` (None: a newcomer) put a VM on this cell at all?"""
        if not self.tenants or (isolation is not Isolation.CELL and not self.locked):
            return True
        return self.cell_isolation_clash(tenant, isolation, isolations) is None

    def cell_isolation_clash(
        self, tenant: str | None, isolation: Isolation, isolations: Mapping[str, Isolation]
    ) -> str | None:
        """The first (by name) other tenant on this cell that cell isolation, its or ``tenant``'s, keeps apart."""
        found: str | None = None
        for other in self.tenants:
            clash = other != tenant and (isolation is Isolation.CELL or isolations.get(other) is Isolation.CELL)
            if clash and (found is None or other < found):
                found = other
        return found

    def capacity(self, bucket: str, cpu_policy: CpuPolicy, thread_policy: ThreadPolicy) -> int:
        """vCPUs of one VM this cell can still take for a tenant of ``bucket`` (exact).

        A ``mixed`` VM's guest cell counts every one of its vCPUs in its thread policy's dedicated unit
        (a free thread, a whole core under ``isolate``), as if all were pinned: its dedicated vCPUs are
        pinned as a dedicated VM's and its floating vCPUs then still find a float set of at least their
        count beside the pins (the pool a shared VM floats over, less the pins), whatever split of the
        cell's vCPUs is dedicated. Exact for the dedicated part, safe (never short) for the float part,
        and one number per cell, so every path (filters, pre-filter rows: :func:`~vnuma.placement.rules.cap_row`)
        compares it as it does for the other policies.
        """
        if cpu_policy is CpuPolicy.SHARED:
            return (
                self.free_core_threads + self.partial_free.get(bucket, 0) + self.shared_threads.get(bucket, 0)
            )
        if thread_policy is ThreadPolicy.ISOLATE:
            return len(self.free_cores)
        if thread_policy is ThreadPolicy.REQUIRE:
            return 2 * (self.free_core_pairs + self.partial_pairs.get(bucket, 0))
        return self.free_core_threads + self.partial_free.get(bucket, 0)

    def free_threads(self, bucket: str) -> int:
        """Free threads a tenant of ``bucket`` may pin to (whole free cores plus its own partial ones)."""
        return self.free_core_threads + self.partial_free.get(bucket, 0)

    def upper_bounds(self) -> tuple[int, int, int, int]:
        """Tenant-independent upper bounds of :meth:`capacity` (prefer, isolate, require, shared)."""
        best_free = best_pairs = best_shared = 0
        for b, free in self.partial_free.items():
            if b == BLOCKED:
                continue
            best_free = max(best_free, free)
            best_shared = max(best_shared, free + self.shared_threads.get(b, 0))
        for b, pairs in self.partial_pairs.items():
            if b != BLOCKED:
                best_pairs = max(best_pairs, pairs)
        for b, shared in self.shared_threads.items():
            if b != BLOCKED:
                best_shared = max(best_shared, shared + self.partial_free.get(b, 0))
        return (
            self.free_core_threads + best_free,
            len(self.free_cores),
            2 * (self.free_core_pairs + best_pairs),
            self.free_core_threads + best_shared,
        )


def bucket_of(owners: Mapping[str, int], isolation: Mapping[str, Isolation]) -> str | None:
    """Who may still use a core with these owners (None: nobody owns it, it is whole and free)."""
    if not owners:
        return None
    if len(owners) == 1:
        (tenant,) = owners
        return NONE_BUCKET if isolation.get(tenant) is Isolation.NONE else tenant
    if all(isolation.get(t) is Isolation.NONE for t in owners):
        return NONE_BUCKET
    return BLOCKED


def tenant_bucket(tenant: str | None, isolation: Isolation) -> str:
    """The bucket of partly used cores a tenant may join (a newcomer, ``None``, joins none)."""
    if tenant is None:
        return NEWCOMER
    return NONE_BUCKET if isolation is Isolation.NONE else tenant


def cell_states(host: Host) -> tuple[CellState, ...]:
    """Fresh (unclaimed) states of a host's CPU cells, in cell id order."""
    placeable = host.cpu_ids - host.reserved_cpus
    gpus_by_cell: dict[int, list[str]] = {}
    for dev in host.devices:
        if dev.kind == "gpu" and dev.numa_node is not None:
            gpus_by_cell.setdefault(dev.numa_node, []).append(dev.address)
    states: list[CellState] = []
    for cell in sorted(host.cells, key=lambda c: c.id):
        if cell.memory_only:
            continue
        state = CellState(cell, placeable, tuple(sorted(gpus_by_cell.get(cell.id, ()))), host.base_page_kib)
        if state.cores:
            state.col = len(states)
            states.append(state)
    return tuple(states)
