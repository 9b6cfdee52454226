"""The planner's vocabulary: the state it starts from, moves, plans, and per-VM helpers.

Pure: no I/O. These names are the planner's public interface (also
re-exported by :mod:`vnuma.placement.rebalance`); the apply step builds on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vnuma.placement.model import EmulatorThreads, GpuAffinity, Isolation, Placement, VmRequest
from vnuma.placement.objectives import Objective
from vnuma.placement.partitionmodel import PartitionAsk
from vnuma.topology import DeviceKind, Host
from vnuma.topology.pcie import Level


@dataclass(frozen=True, slots=True)
class VmLoad:
    """A VM's memory bandwidth as last measured (``vnuma stats --bandwidth``): bytes per second in all,
    and per L3 domain of ``host`` it was measured on (``(domain id, bytes/s)``), and when (ISO time, UTC)."""

    host: str
    total_bps: int
    domains: tuple[tuple[int, int], ...]
    taken_at: str


@dataclass(frozen=True, slots=True)
class FleetState:
    """Hosts, their placements and tenants' isolation: what the planner starts from; ``loads``: the
    measured bandwidth of the VMs that have a sample (the ``bandwidth`` objective's input), by VM."""

    hosts: tuple[Host, ...]
    placements: tuple[Placement, ...]
    isolation: Mapping[str, Isolation]
    loads: Mapping[str, VmLoad] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Move:
    """One VM re-placed: from where, to where (``placement``), why, and the memory to migrate."""

    vm: str
    from_host: str
    from_cells: tuple[int, ...]
    to_host: str
    to_cells: tuple[int, ...]
    reason: str
    cost_kib: int
    placement: Placement


@dataclass(frozen=True, slots=True)
class Plan:
    """Ordered moves, the objective before and after them, and whether no plan does better (``optimal``);
    ``left``: (VM, why) for each VM a drain leaves where it is. ``solver``: ``search`` (the bounded
    search written here) or ``cp-sat`` (OR-Tools), whose ``gap`` is 0.0 when it proved its answer
    optimal for its model, else the relative distance to its best bound (None: no bound)."""

    objective: Objective
    before: int
    after: int
    optimal: bool
    moves: tuple[Move, ...]
    left: tuple[tuple[str, str], ...] = ()
    solver: str = "search"
    gap: float | None = None

    def __post_init__(self) -> None:
        # One truth per plan (vnuma.documents.verdict words it): a gap is the plan's own (None when the replay
        # did not carry the solver's answer out), a proven answer is optimal, and only a plan at its objective's
        # lowest value is optimal without being proven.
        assert self.gap is None or self.solver == "cp-sat", "only CP-SAT plans carry a gap"
        assert not (self.gap == 0.0 and not self.optimal), "a plan CP-SAT proved optimal is optimal"
        assert not (self.optimal and self.gap is not None and self.gap > 0 and self.after != 0)


def request_of(p: Placement, isolation: Isolation, affinity: GpuAffinity = GpuAffinity.REQUIRED) -> VmRequest:
    """The request that re-places a VM with its size, guest shape, policies, page size and memory modes:
    the cell count stays what the VM asked for (left to the engine only for a VM placed with ``auto``
    whose cells share one memory mode; cells with different modes keep their count), and guest cells
    of different sizes keep each its own size and GPU count; a cache slice keeps its ways, a bandwidth cap
    its value, a cold tier its size and tier, NICs their ask (level, per GPU or count, function), GPU
    partitions their kind, type or profile and count."""
    pins = {x for c in p.cells for x in c.pcpus}
    modes = p.memory_modes
    uniform = len(set(modes)) == 1
    cells = sorted(p.cells, key=lambda c: c.guest_cell)
    sizes = [(len(c.vcpus), c.memory_kib) for c in cells]
    own = len(set(sizes)) > 1  # guest cells of their own sizes: kept cell by cell, GPUs too
    gpus = sum(1 for d in p.devices if d.kind is DeviceKind.GPU)
    nics = sum(1 for d in p.devices if d.kind is DeviceKind.NIC and d.peer_of is None)
    per_cell_gpus = tuple(
        sum(1 for d in p.devices if d.kind is DeviceKind.GPU and d.guest_cell == c.guest_cell) for c in cells
    )
    return VmRequest(
        name=p.vm,
        tenant=p.tenant,
        vcpus=p.vcpus,
        memory_kib=p.memory_kib,
        gpus=gpus,
        numa_nodes=p.numa_nodes if uniform and not own else len(modes),
        cell_vcpus=tuple(v for v, _ in sizes) if own else None,
        cell_memory_kib=tuple(m for _, m in sizes) if own else None,
        cell_gpus=per_cell_gpus if own and gpus else None,
        memory_modes=modes[:1] if uniform else modes,
        iothreads=p.iothreads,
        iothread_policy=p.iothread_policy,
        group=p.group,
        anti_affinity=p.anti_affinity,
        affinity=p.affinity,
        cpu_policy=p.cpu_policy,
        thread_policy=p.thread_policy,
        page_size_kib=p.cells[0].page_size_kib,
        gpu_affinity=affinity,
        emulator_threads=EmulatorThreads.ISOLATE if set(p.emulator_pcpus) - pins else EmulatorThreads.SHARE,
        isolation=isolation,
        llc_ways=max((w for _i, w in p.llc), default=None),
        mem_bw=max((c for _i, c in p.mem_bw), default=None),
        cold_memory_kib=p.cold_kib,
        cold_tier=p.cold_tier,
        nics=0 if p.nics_per_gpu or p.nic_affinity is None else nics,
        nics_per_gpu=p.nics_per_gpu and p.nic_affinity is not None,
        nic_affinity=p.nic_affinity or Level.PXB,
        nic_function=p.nic_function,
        partition=_partitions_of(p),
        dedicated_vcpus=p.dedicated_vcpus,
    )


def _partitions_of(p: Placement) -> PartitionAsk | None:
    """The ask a VM's GPU partitions answer (one kind and one type or profile per VM), None without any."""
    if not p.partitions:
        return None
    first = p.partitions[0]
    return PartitionAsk(first.kind, first.name, len(p.partitions))


def refit_affinities(p: Placement) -> tuple[GpuAffinity, ...]:
    """The GPU affinities a re-fit of ``p`` tries in turn: its GPUs on its own cells, then (a VM with GPUs)
    anywhere on the host."""
    has_gpus = any(d.kind is DeviceKind.GPU for d in p.devices)
    return (GpuAffinity.REQUIRED, GpuAffinity.PREFERRED) if has_gpus else (GpuAffinity.REQUIRED,)


def is_movable(p: Placement) -> bool:
    """The moves re-place GPUs, NICs whose ask the placement records (``nic_affinity``) and the IOMMU-group
    companions that follow them; a VM holding any other device (or NICs placed before vnuma recorded how
    they were asked) is left where it is."""
    placed = {d.address for d in p.devices if d.kind is DeviceKind.GPU
              or (d.kind is DeviceKind.NIC and p.nic_affinity is not None and d.peer_of is None)}
    return bool(p.cells) and all(d.address in placed or d.peer_of in placed for d in p.devices)


def move_cost_kib(old: Placement, new: Placement) -> int:
    """Memory to migrate: all of it (its cold tier too) to another host, else what sits on cells the VM
    leaves."""
    if old.host != new.host:
        return old.memory_kib + old.cold_kib
    kept = set(new.host_cells) | {c.host_cell for c in new.cold}
    return sum(c.memory_kib for c in (*old.cells, *old.cold) if c.host_cell not in kept)


def make_move(old: Placement, new: Placement, reason: str) -> Move:
    """The move that takes ``old`` to ``new``, with its migration cost."""
    return Move(old.vm, old.host, old.host_cells, new.host, new.host_cells, reason, move_cost_kib(old, new), new)
