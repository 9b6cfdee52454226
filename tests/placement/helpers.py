"""Test helpers for the placement engine: request builders, an independent
invariant checker, and a brute-force fit search for tiny hosts.

The checker and the brute force work from hosts and placements only (never
from the fleet's internal bookkeeping), so they test the engine rather than
restate it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    Isolation,
    MemoryMode,
    Placement,
    ThreadPolicy,
    VmRequest,
)
from vnuma.topology import PAGE_4K, Host

GIB = 1024 * 1024


def request(
    name: str = "vm", tenant: str = "t1", vcpus: int | None = 2, memory_gib: int | None = 1, **kw: object
) -> VmRequest:
    """A VM request with small defaults; keyword arguments override fields."""
    memory = memory_gib * GIB if memory_gib is not None else None
    return replace(VmRequest(name, tenant, vcpus, memory), **kw)  # type: ignore[arg-type]


def siblings_of(host: Host) -> dict[int, frozenset[int]]:
    """CPU id -> its placeable sibling group (itself included)."""
    placeable = host.cpu_ids - host.reserved_cpus
    return {
        c.id: (c.siblings | {c.id}) & placeable for cell in host.cells for c in cell.cpus if c.id in placeable
    }


def mixed_parts(p: Placement, c: CellAssignment) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A guest cell's (pins, float set) read from its pCPU list: all pins (dedicated), all float (shared),
    or under ``mixed`` one pin per dedicated vCPU of the cell first, then the float set."""
    if p.cpu_policy is CpuPolicy.DEDICATED:
        return c.pcpus, ()
    k = sum(1 for v in c.vcpus if v in p.dedicated_vcpus) if p.cpu_policy is CpuPolicy.MIXED else 0
    return c.pcpus[:k], c.pcpus[k:]


def floats_of(p: Placement) -> set[int]:
    """pCPUs a placement floats over (held by no one, shared with same-bucket floaters)."""
    return {x for c in p.cells for x in mixed_parts(p, c)[1]}


def held_by(p: Placement, host: Host) -> set[int]:
    """pCPUs a placement keeps from every other VM (pins, isolated emulator, isolate siblings)."""
    sib = siblings_of(host)
    pins = {x for c in p.cells for x in mixed_parts(p, c)[0]}
    held = pins | (set(p.emulator_pcpus) - {x for c in p.cells for x in c.pcpus})
    if p.thread_policy is ThreadPolicy.ISOLATE:
        held |= {s for x in list(held) for s in sib.get(x, {x})}
    return held


def cell_of(host: Host) -> dict[int, int]:
    """CPU id -> its cell id."""
    return {c.id: cell.id for cell in host.cells for c in cell.cpus}


@dataclass
class Usage:
    """What placements hold on one host, computed independently of the fleet."""

    held: dict[int, str]  # pCPU -> VM
    shared: dict[int, set[str]]  # pCPU -> tenants floating over it
    owners: dict[int, set[str]]  # pCPU -> tenants claiming it (held or shared)
    pages: dict[tuple[int, int], int]  # (cell, size) -> pages claimed
    gpus: dict[str, str]  # address -> VM
    cell_tenants: dict[int, set[str]]


def usage(host: Host, placements: Iterable[Placement]) -> Usage:
    """Sum the claims of ``placements`` on ``host``; asserts no pCPU, page pool or GPU is overdrawn."""
    u = Usage({}, {}, {}, {}, {}, {})
    for p in placements:
        if p.host != host.name:
            continue
        for cpu in held_by(p, host):
            assert cpu not in u.held, f"pCPU {cpu} held by {u.held[cpu]} and {p.vm}"
            u.held[cpu] = p.vm
            u.owners.setdefault(cpu, set()).add(p.tenant)
        for cpu in floats_of(p):
            u.shared.setdefault(cpu, set()).add(p.tenant)
            u.owners.setdefault(cpu, set()).add(p.tenant)
        for (cell, size), n in _pages_taken(p).items():
            u.pages[(cell, size)] = u.pages.get((cell, size), 0) + n
        for c in p.cells:
            u.cell_tenants.setdefault(c.host_cell, set()).add(p.tenant)
        for d in p.devices:
            assert d.address not in u.gpus, f"GPU {d.address} given to {u.gpus[d.address]} and {p.vm}"
            u.gpus[d.address] = p.vm
    assert not set(u.held) & set(u.shared), "a shared pCPU is also held exclusively"
    return u


def _pages_taken(p: Placement) -> dict[tuple[int, int], int]:
    """Pages per (host cell, size) the placement's guest cells take (:func:`_deal`)."""
    taken: dict[tuple[int, int], int] = {}
    for c in sorted(p.cells, key=lambda c: c.guest_cell):
        for cell, n in _deal(p.host_cells, c.host_cell, c.pages, c.memory_mode, _dealt(p, c)).items():
            taken[(cell, c.page_size_kib)] = taken.get((cell, c.page_size_kib), 0) + n
    for c in p.cold:  # the cold tier's pages, all on its memory-only cell
        taken[(c.host_cell, c.page_size_kib)] = taken.get((c.host_cell, c.page_size_kib), 0) + c.pages
    return taken


def _dealt(p: Placement, c: CellAssignment) -> int:
    """Interleaved pages dealt by the guest cells before ``c``."""
    return sum(d.pages for d in p.cells if d.guest_cell < c.guest_cell and d.memory_mode is MemoryMode.INTERLEAVE)


def _deal(cells: Sequence[int], own: int, pages: int, mode: MemoryMode, dealt: int) -> dict[int, int]:
    """Where one guest cell's pages go: its own host cell, or (interleaved) dealt out over the VM's host
    cells in turn, the turn carried over from earlier interleaved cells: page j of the deal, counted
    across interleaved cells, goes to ``spread[j % k]``, so each cell's share is a range count."""
    if mode is not MemoryMode.INTERLEAVE:
        return {own: pages}
    spread = sorted(set(cells))
    k = len(spread)
    return {cell: len(range(dealt + (i - dealt) % k, dealt + pages, k)) for i, cell in enumerate(spread)}


def _pool(host: Host, cell: int, size: int) -> int:
    c = host.cell(cell)
    if not c.pages:
        return c.memory_kib // PAGE_4K if size == PAGE_4K else 0
    return c.pages_of(size)


def check_placement_shape(p: Placement, host: Host) -> None:
    """A placement is complete and self-consistent on its host."""
    where = cell_of(host)
    sib = siblings_of(host)
    assert [c.guest_cell for c in p.cells] == list(range(len(p.cells)))
    assert len({c.host_cell for c in p.cells}) == len(p.cells)
    assert [v for c in p.cells for v in c.vcpus] == list(range(p.vcpus))
    # Guest cells split evenly unless the request gave each its own size (then equal or not).
    assert all(len(c.vcpus) % p.threads_per_core == 0 for c in p.cells)
    for c in p.cells:
        assert c.memory_kib % c.page_size_kib == 0
        assert all(where.get(x) == c.host_cell for x in c.pcpus), "pCPU outside its guest cell's host cell"
        assert not set(c.pcpus) & host.reserved_cpus
        if p.cpu_policy is CpuPolicy.DEDICATED:
            assert len(c.pcpus) == len(c.vcpus) == len(set(c.pcpus))
        else:
            assert len(c.pcpus) >= len(c.vcpus)
        pins, floats = mixed_parts(p, c)
        if p.cpu_policy is CpuPolicy.MIXED:
            assert len(set(pins)) == len(pins) and not set(pins) & set(floats), "a pin repeated or floated over"
            assert len(floats) >= len(c.vcpus) - len(pins), "a float set smaller than its floating vCPUs"
            if p.thread_policy is ThreadPolicy.ISOLATE:
                assert not {sib[x] for x in pins} & {sib[x] for x in floats}, "isolate: a pin's core floated over"
        if p.threads_per_core == 2:
            pairs = [c.pcpus[i : i + 2] for i in range(0, len(c.pcpus), 2)]
            assert all(b in sib[a] and a != b for a, b in pairs), "threads=2 but vCPU pairs are not siblings"
    if p.thread_policy is ThreadPolicy.ISOLATE and p.cpu_policy is not CpuPolicy.SHARED:
        pins = [x for c in p.cells for x in mixed_parts(p, c)[0]]
        assert len({sib[x] for x in pins}) == len(pins), "isolate put two vCPUs on one core"
    if p.thread_policy is ThreadPolicy.REQUIRE:
        assert p.threads_per_core == 2
    extra = set(p.emulator_pcpus) - {x for c in p.cells for x in c.pcpus}
    if extra:
        assert len(extra) == 1 and where[extra.pop()] == p.cells[0].host_cell
    memory_only = {c.id for c in host.cells if c.memory_only}
    for c in p.cold:  # one cold cell after the CPU cells, no vCPUs, on a memory-only host cell
        assert len(p.cold) == 1 and c.guest_cell == len(p.cells) and not c.vcpus and not c.pcpus
        assert c.host_cell in memory_only and c.memory_kib % c.page_size_kib == 0
    gpus = {d.address: d for d in p.devices}
    home = {d.address: d.numa_node for d in host.devices}
    for d in gpus.values():
        assert home[d.address] == d.host_cell


def check_fleet(
    hosts: Sequence[Host], placements: Sequence[Placement], isolation: Mapping[str, Isolation]
) -> None:
    """Every invariant of a set of placements: shapes, no double claims, pools, isolation."""
    for host in hosts:
        mine = [p for p in placements if p.host == host.name]
        for p in mine:
            check_placement_shape(p, host)
        u = usage(host, mine)
        for (cell, size), pages in u.pages.items():
            assert pages <= _pool(host, cell, size), f"cell {cell} pool of {size} KiB overdrawn"
        assert not (set(u.held) | set(u.shared)) & host.reserved_cpus
        sib = siblings_of(host)
        for group in set(sib.values()):
            tenants = set().union(*(u.owners.get(x, set()) for x in group))
            if len(tenants) > 1:
                assert all(isolation.get(t, Isolation.CORE) is Isolation.NONE for t in tenants), (
                    f"core {sorted(group)} shared by {sorted(tenants)}"
                )
        for cell, tenants in u.cell_tenants.items():
            locked = [t for t in tenants if isolation.get(t) is Isolation.CELL]
            assert not locked or len(tenants) == 1, (
                f"cell {cell} of a cell-isolated tenant shared by {tenants}"
            )


# --- brute force -----------------------------------------------------------------------------------


def _allowed(
    cpu: int,
    tenant: str,
    iso: Isolation,
    u: Usage,
    sib: dict[int, frozenset[int]],
    isolation: Mapping[str, Isolation],
) -> bool:
    others = set().union(*(u.owners.get(x, set()) for x in sib[cpu])) - {tenant}
    if not others:
        return True
    return iso is Isolation.NONE and all(isolation.get(t, Isolation.CORE) is Isolation.NONE for t in others)


def _cell_can_take(
    host: Host, cell: int, req: VmRequest, v: int, extra: bool, u: Usage, isolation: Mapping[str, Isolation]
) -> bool:
    sib = siblings_of(host)
    cpus = [c.id for c in host.cell(cell).cpus if c.id in sib]
    usable = [
        x for x in cpus if _allowed(x, req.tenant, req.isolation, u, sib, isolation) and x not in u.held
    ]
    if req.cpu_policy is CpuPolicy.SHARED:
        return len(usable) >= v
    free = [x for x in usable if x not in u.shared]
    want = v + int(extra)
    if req.thread_policy is ThreadPolicy.ISOLATE:
        whole = {sib[x] for x in free if sib[x] <= set(free)}
        return len(whole) >= want
    if req.thread_policy is ThreadPolicy.REQUIRE:
        for combo in itertools.combinations(free, v):
            cores = Counter(sib[x] for x in combo)
            if all(n % 2 == 0 for n in cores.values()) and len(free) >= want:
                return True
        return False
    return len(free) >= want


def brute_force_fits(
    hosts: Sequence[Host], placements: Sequence[Placement], req: VmRequest, isolation: Mapping[str, Isolation]
) -> bool:
    """Is there any host, cell set and page size on which ``req`` fits? (required/preferred GPUs only)"""
    assert req.vcpus is not None and req.memory_kib is not None
    assert req.gpu_affinity is not GpuAffinity.SOCKET
    for host in hosts:
        if req.host is not None and host.name != req.host:
            continue
        u = usage(host, placements)
        cells = [c.id for c in host.cells if c.cpus and set(siblings_of(host)) & c.cpu_ids]
        counts = [req.numa_nodes] if req.numa_nodes else range(1, len(cells) + 1)
        for n in counts:
            if n > len(cells):
                continue
            if req.cell_vcpus is not None and req.cell_memory_kib is not None:
                vs, ms = list(req.cell_vcpus), list(req.cell_memory_kib)
            elif req.vcpus % n or req.memory_kib % n:
                continue
            else:
                vs, ms = [req.vcpus // n] * n, [req.memory_kib // n] * n
            if req.thread_policy is ThreadPolicy.REQUIRE and any(v % 2 for v in vs):
                continue
            sizes = (
                [req.page_size_kib]
                if req.page_size_kib
                else sorted({p.size_kib for c in host.cells for p in c.pages if p.size_kib > PAGE_4K})
            )
            for size in sizes:
                if any(m % size for m in ms):
                    continue
                for combo in itertools.permutations(cells, n):
                    if _set_fits(host, combo, req, vs, ms, size, u, isolation):
                        return True
    return False


def _set_fits(
    host: Host,
    cells: tuple[int, ...],
    req: VmRequest,
    vs: list[int],
    ms: list[int],
    size: int,
    u: Usage,
    isolation: Mapping[str, Isolation],
) -> bool:
    """Guest cell g (``vs[g]`` vCPUs, ``ms[g]`` KiB) on host cell ``cells[g]``."""
    pages: dict[int, int] = {}
    dealt = 0
    for g, cell in enumerate(cells):
        mode = req.memory_modes[g] if len(req.memory_modes) > 1 else req.memory_modes[0]
        for target, n in _deal(cells, cell, ms[g] // size, mode, dealt).items():
            pages[target] = pages.get(target, 0) + n
        dealt += ms[g] // size if mode is MemoryMode.INTERLEAVE else 0
    for cell in cells:
        tenants = u.cell_tenants.get(cell, set()) - {req.tenant}
        if req.isolation is Isolation.CELL and tenants:
            return False
        if any(isolation.get(t) is Isolation.CELL for t in tenants):
            return False
        if _pool(host, cell, size) - u.pages.get((cell, size), 0) < pages.get(cell, 0):
            return False
    emulator = req.emulator_threads is EmulatorThreads.ISOLATE
    for i, cell in enumerate(cells):
        if not _cell_can_take(host, cell, req, vs[i], emulator and i == 0, u, isolation):
            return False
    free_gpus = [d for d in host.devices if d.kind == "gpu" and d.address not in u.gpus]
    on_cells = [d for d in free_gpus if d.numa_node in cells]
    if req.cell_gpus is not None:  # each guest cell's GPUs on its own host cell
        return all(
            sum(1 for d in free_gpus if d.numa_node == cell) >= k for cell, k in zip(cells, req.cell_gpus, strict=True)
        )
    if req.gpu_affinity is GpuAffinity.REQUIRED:
        return len(on_cells) >= req.gpus
    return len(free_gpus) >= req.gpus


def admissible(
    host: Host, placements: Sequence[Placement], p: Placement, isolation: Mapping[str, Isolation]
) -> bool:
    """Could ``p`` be claimed beside ``placements`` on ``host``? Worked out from hosts and placements only.

    The independent oracle for admission: every pCPU held once, floating sets
    clear of held pCPUs, pins in their guest cell's host cell, whole pages
    within each pool, no reserved CPU, cores and cells shared only as the
    tenants' isolation allows, devices the host has, each given once; nothing
    on a cordoned host.
    """
    if host.cordoned:
        return False
    mine = [q for q in placements if q.host == host.name] + [p]
    try:
        u = usage(host, mine)
    except AssertionError:
        return False
    where = cell_of(host)
    for c in p.cells:
        if not c.vcpus or not c.pcpus or any(where.get(x) != c.host_cell for x in c.pcpus):
            return False
        if c.page_size_kib <= 0 or c.memory_kib < c.page_size_kib or c.memory_kib % c.page_size_kib:
            return False
    pins = [x for c in p.cells for x in c.pcpus]
    if p.cpu_policy is CpuPolicy.DEDICATED and (
        len(pins) != len(set(pins)) or any(len(c.vcpus) != len(c.pcpus) for c in p.cells)
    ):
        return False
    if (set(pins) | set(p.emulator_pcpus)) & host.reserved_cpus or not set(p.emulator_pcpus) <= host.cpu_ids:
        return False
    if not {d.address for d in p.devices} <= {d.address for d in host.devices}:
        return False
    if any(pages > _pool(host, cell, size) for (cell, size), pages in u.pages.items()):
        return False
    sib = siblings_of(host)
    for group in set(sib.values()):
        tenants = set().union(*(u.owners.get(x, set()) for x in group))
        if len(tenants) > 1 and not all(isolation.get(t, Isolation.CORE) is Isolation.NONE for t in tenants):
            return False
    for tenants in u.cell_tenants.values():
        if len(tenants) > 1 and any(isolation.get(t) is Isolation.CELL for t in tenants):
            return False
    return True
