"""Hypothesis strategies: tiny hosts and random VM requests."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from tests.builders import make_host
from vnuma.placement.model import (
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    IoThreadPolicy,
    Isolation,
    MemoryMode,
    ThreadPolicy,
    VmRequest,
)
from vnuma.topology import KIB_PER_GIB, PAGE_1G, PAGE_2M, PAGE_4K, Host

EVEN = {"cell_vcpus": None, "cell_memory_kib": None, "cell_gpus": None}
"""``replace(request, **EVEN)``: a request split evenly (for sizing a VM from its GPUs)."""
TENANTS = (("t1", Isolation.CORE), ("t2", Isolation.CORE), ("t3", Isolation.NONE), ("t4", Isolation.CELL))
ISOLATION = dict(TENANTS)


@st.composite
def tiny_hosts(draw: st.DrawFn, name: str = "h") -> Host:
    """A host of 1-3 cells of 1-4 cores (SMT 1 or 2), small page pools, maybe GPUs and reserved CPUs."""
    cells = draw(st.integers(1, 3))
    cores = draw(st.integers(1, 4))
    smt = draw(st.sampled_from((1, 2)))
    total = cells * cores * smt
    reserved = (
        draw(st.frozensets(st.integers(0, total - 1), max_size=2)) if draw(st.booleans()) else frozenset()
    )
    return make_host(
        name,
        cells=cells,
        cores_per_cell=cores,
        smt=smt,
        cells_per_socket=draw(st.sampled_from((1, cells))),
        memory_gib=4,
        hugepages_2m_gib=draw(st.integers(0, 1)),
        hugepages_1g_gib=draw(st.integers(0, 2)),
        gpus_per_cell=draw(st.integers(0, 2)),
        reserved_cpus=reserved,
    )


@st.composite
def host_lists(draw: st.DrawFn, max_hosts: int = 2) -> list[Host]:
    """1..max_hosts tiny hosts with distinct names."""
    count = draw(st.integers(1, max_hosts))
    return [draw(tiny_hosts(f"h{i}")) for i in range(count)]


@st.composite
def memory_modes(draw: st.DrawFn, nodes: int | None) -> tuple[MemoryMode, ...]:
    """Mostly strict; else one mode for all guest cells, or (with N explicit cells) one per cell
    (``restrictive`` is all or none)."""
    if draw(st.integers(0, 2)) == 0:
        return (MemoryMode.STRICT,)
    if nodes is not None and nodes > 1 and draw(st.booleans()):
        mixable = [MemoryMode.STRICT, MemoryMode.PREFERRED, MemoryMode.INTERLEAVE]
        return tuple(draw(st.sampled_from(mixable)) for _ in range(nodes))
    return (draw(st.sampled_from(list(MemoryMode))),)


@st.composite
def vm_requests(
    draw: st.DrawFn, name: str = "vm", max_gpus: int = 2, socket: bool = False, shared: bool = True
) -> VmRequest:
    """A well-formed request that tiny hosts can sometimes take."""
    tenant, isolation = draw(st.sampled_from(TENANTS))
    nodes = draw(st.sampled_from((None, 1, 2)))
    n = nodes or 1
    cpu = draw(st.sampled_from((CpuPolicy.DEDICATED,) * 3 + ((CpuPolicy.SHARED,) if shared else ())))
    thread = ThreadPolicy.PREFER
    emulator = EmulatorThreads.SHARE
    if cpu is CpuPolicy.DEDICATED:
        thread = draw(st.sampled_from(tuple(ThreadPolicy)))
        emulator = draw(st.sampled_from((EmulatorThreads.SHARE,) * 3 + (EmulatorThreads.ISOLATE,)))
    per_cell = draw(st.sampled_from((2, 4))) if thread is ThreadPolicy.REQUIRE else draw(st.integers(1, 4))
    page = draw(st.sampled_from((None, PAGE_4K, PAGE_2M, PAGE_1G)))
    per_cell_kib = (
        KIB_PER_GIB * draw(st.integers(1, 2))
        if page == PAGE_1G
        else draw(st.sampled_from((KIB_PER_GIB // 2, KIB_PER_GIB)))
    )
    affinities = (GpuAffinity.REQUIRED, GpuAffinity.PREFERRED) + ((GpuAffinity.SOCKET,) if socket else ())
    gpus = draw(st.integers(0, max_gpus))
    policies = [IoThreadPolicy.EMULATOR] + ([IoThreadPolicy.DEVICE_LOCAL] if gpus else [])
    own: dict[str, object] = {}
    if nodes == 2 and emulator is EmulatorThreads.SHARE and draw(st.integers(0, 3)) == 0:
        # Guest cells of their own sizes (each GPU on a chosen cell).
        step = 2 if thread is ThreadPolicy.REQUIRE else 1
        cell_vcpus = tuple(step * draw(st.integers(1, 4 // step)) for _ in range(2))
        unit = KIB_PER_GIB if page == PAGE_1G else KIB_PER_GIB // 2
        cell_memory = tuple(unit * draw(st.integers(1, 2)) for _ in range(2))
        first = draw(st.integers(0, gpus))
        own = {
            "vcpus": sum(cell_vcpus), "memory_kib": sum(cell_memory), "cell_vcpus": cell_vcpus,
            "cell_memory_kib": cell_memory, "cell_gpus": (first, gpus - first) if gpus else None,
        }
    base = VmRequest(
        memory_modes=draw(memory_modes(nodes)),
        iothreads=draw(st.integers(0, 2)),
        iothread_policy=draw(st.sampled_from(policies)),
        name=name,
        tenant=tenant,
        vcpus=per_cell * n,
        memory_kib=per_cell_kib * n,
        gpus=gpus,
        numa_nodes=nodes,
        cpu_policy=cpu,
        thread_policy=thread,
        page_size_kib=page,
        gpu_affinity=draw(st.sampled_from(affinities)),
        emulator_threads=emulator,
        isolation=isolation,
    )
    return replace(base, **own)  # type: ignore[arg-type]
