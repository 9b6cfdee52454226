"""Turn a host fit into a complete :class:`Placement` (pCPUs, memory, devices).

Pure: no I/O; reads the host state, changes nothing (the fleet records the
claims when the caller adds the placement).

* Guest cells 0..N-1 map 1:1 onto the fit's host cells; vCPUs are numbered
  0..vcpus-1 across guest cells in order; each cell's vCPUs and memory are
  :meth:`VmRequest.cell_sizes` (an even split unless given per cell).
* ``threads_per_core`` is 2 when every guest cell's vCPUs sit on sibling
  pairs (``prefer`` with whole free cores, or ``require``), else 1.
* Emulator threads: ``isolate`` gets one extra pCPU on guest cell 0,
  ``share`` floats over the VM's pCPUs (a ``mixed`` VM's: its float sets
  only, so its dedicated pCPUs run their vCPU alone).
* ``mixed``: each guest cell's dedicated vCPUs are pinned first (as a
  dedicated VM's, under its thread policy), then its other vCPUs get a
  float set around those pins; ``threads_per_core`` is 1.
* GPUs and NICs: :func:`vnuma.placement.devices.pick_devices`, the same
  choice the fit accepted the cell set by, each with the other endpoints of
  its IOMMU group (:func:`vnuma.placement.iommu.with_companions`).
* Each guest cell gets the memory mode the request gives it.
* A cold tier (``cold_memory_kib``): one more guest cell, N, with no vCPUs,
  on the memory-only cell :func:`vnuma.placement.cold.choose` picks for the
  chosen CPU cells (the ``cold-memory`` host filter made sure one has room).
"""

from __future__ import annotations

from vnuma.placement.cold import choose as choose_cold
from vnuma.placement.cpus import pick_dedicated, pick_shared, pinned_by
from vnuma.placement.devices import pick_devices
from vnuma.placement.fit import HostFit
from vnuma.placement.iommu import with_companions
from vnuma.placement.ledger.cell import tenant_bucket
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    EmulatorThreads,
    NicFunction,
    Placement,
    VmRequest,
)
from vnuma.placement.partitionchoice import pick_partitions
from vnuma.placement.resctrl import slices, wants


def build_placement(fit: HostFit, req: VmRequest) -> Placement:
    """The placement of ``req`` on the fit's host and cells."""
    hs = fit.state
    n = len(fit.cells)
    vs, ms = req.cell_sizes(n)
    bucket = tenant_bucket(req.tenant, req.isolation)
    isolate_emulator = req.emulator_threads is EmulatorThreads.ISOLATE
    shared = req.cpu_policy is CpuPolicy.SHARED
    mixed = req.cpu_policy is CpuPolicy.MIXED
    cells: list[CellAssignment] = []
    emulator: tuple[int, ...] = ()
    paired = not shared and not mixed  # a mixed VM's floating vCPUs are never sibling pairs
    first = 0
    floats: set[int] = set()  # a mixed VM's float sets: where its emulator threads float
    for g, cid in enumerate(fit.cells):
        cell, v = hs.cell_by_id[cid], vs[g]
        vcpus = tuple(range(first, first + v))
        first += v
        if shared:
            pcpus = pick_shared(cell, bucket, v)
        else:
            pinned = sum(1 for x in vcpus if x in req.dedicated_vcpus) if mixed else v
            pick = pick_dedicated(cell, bucket, req.thread_policy, pinned, isolate_emulator and g == 0)
            pcpus, paired = pick.pins, paired and pick.paired
            if pick.emulator is not None:
                emulator = (pick.emulator,)
            if mixed and pinned < v:
                float_set = pick_shared(cell, bucket, v - pinned, pinned_by(cell, pick, req.thread_policy))
                pcpus += float_set
                floats.update(float_set)
        cells.append(CellAssignment(g, cid, vcpus, pcpus, ms[g], fit.page_size_kib, req.memory_mode(g)))
    if not isolate_emulator:
        emulator = tuple(sorted(floats or {p for c in cells for p in c.pcpus}))
    llc, mem_bw = slices(hs.host, req, (p for c in cells for p in c.pcpus)) if wants(req) else ((), ())
    cold: tuple[CellAssignment, ...] = ()
    if req.cold_memory_kib:
        found = choose_cold(hs.shape.cold, hs.cold_free, req, tuple(fit.cells))
        assert found is not None, "the cold-memory host filter passed on this very state"
        where, size = found
        cold = (CellAssignment(n, where.id, (), (), req.cold_memory_kib, size),)
    return Placement(
        vm=req.name,
        tenant=req.tenant,
        host=hs.name,
        cells=tuple(cells),
        emulator_pcpus=emulator,
        devices=with_companions(hs.shape.device_at, pick_devices(hs, fit.cells, req, vs)) if req.gpus else (),
        cpu_policy=req.cpu_policy,
        thread_policy=req.thread_policy,
        threads_per_core=2 if paired and all(v % 2 == 0 for v in vs) else 1,
        numa_nodes=req.numa_nodes,
        group=req.group,
        anti_affinity=req.anti_affinity,
        affinity=req.affinity,
        iothreads=req.iothreads,
        iothread_policy=req.iothread_policy,
        llc=llc,
        mem_bw=mem_bw,
        cold=cold,
        cold_tier=req.cold_tier,
        nic_affinity=req.nic_affinity if req.wants_nics else None,
        nics_per_gpu=req.nics_per_gpu,
        nic_function=req.nic_function if req.wants_nics else NicFunction.PF,
        partitions=pick_partitions(hs, tuple(fit.cells), req) if req.partition is not None else (),
        dedicated_vcpus=req.dedicated_vcpus if mixed else frozenset(),
        request=req,
    )
