"""Turn a host fit into a complete :class:`Placement` (pCPUs, memory, devices).

Pure: no I/O; reads the host state, changes nothing (the fleet records the
claims when the caller adds the placement).

* Guest cells 0..N-1 map 1:1 onto the fit's host cells; vCPUs are numbered
  0..vcpus-1 across guest cells in order; each cell's vCPUs and memory are
  :meth:`VmRequest.cell_sizes` (an even split unless given per cell).
* ``threads_per_core`` is 2 when every guest cell's vCPUs sit on sibling
  pairs (``prefer`` with whole free cores, or ``require``), else 1.
* Emulator threads: ``isolate`` gets one extra pCPU on guest cell 0,
  ``share`` floats over the VM's pCPUs.
* GPUs come from the guest cells' host cells as :func:`split_gpus` says
  (where free GPUs are most at risk of stranding; lowest addresses first);
  ``preferred``/``socket`` affinity tops up from the nearest other cells.
  A GPU is attached to the guest cell on its host cell, else to the
  closest guest cell. With ``cell_gpus`` each guest cell takes its own
  count from its host cell (the fit matched the cells so that they have them).
* Each guest cell gets the memory mode the request gives it.
"""

from __future__ import annotations

from vnuma.placement.cpus import pick_dedicated, pick_shared
from vnuma.placement.fit import HostFit
from vnuma.placement.gpus import split_gpus, threads_taken
from vnuma.placement.ledger.cell import tenant_bucket
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    DeviceAssignment,
    EmulatorThreads,
    GpuAffinity,
    Placement,
    VmRequest,
)
from vnuma.topology import DeviceKind

FAR = 1 << 20  # distance used for a device with no NUMA node


def build_placement(fit: HostFit, req: VmRequest) -> Placement:
    """The placement of ``req`` on the fit's host and cells."""
    hs = fit.state
    n = len(fit.cells)
    vs, ms = req.cell_sizes(n)
    bucket = tenant_bucket(req.tenant, req.isolation)
    isolate_emulator = req.emulator_threads is EmulatorThreads.ISOLATE
    shared = req.cpu_policy is CpuPolicy.SHARED
    cells: list[CellAssignment] = []
    emulator: tuple[int, ...] = ()
    paired = not shared
    first = 0
    for g, cid in enumerate(fit.cells):
        cell, v = hs.cell_by_id[cid], vs[g]
        if shared:
            pcpus = pick_shared(cell, bucket, v)
        else:
            pick = pick_dedicated(cell, bucket, req.thread_policy, v, isolate_emulator and g == 0)
            pcpus, paired = pick.pins, paired and pick.paired
            if pick.emulator is not None:
                emulator = (pick.emulator,)
        vcpus = tuple(range(first, first + v))
        first += v
        cells.append(CellAssignment(g, cid, vcpus, pcpus, ms[g], fit.page_size_kib, req.memory_mode(g)))
    if not isolate_emulator:
        emulator = tuple(sorted({p for c in cells for p in c.pcpus}))
    return Placement(
        vm=req.name,
        tenant=req.tenant,
        host=hs.name,
        cells=tuple(cells),
        emulator_pcpus=emulator,
        devices=_devices(hs, fit.cells, req, vs) if req.gpus else (),
        cpu_policy=req.cpu_policy,
        thread_policy=req.thread_policy,
        threads_per_core=2 if paired and all(v % 2 == 0 for v in vs) else 1,
        numa_nodes=req.numa_nodes,
        group=req.group,
        anti_affinity=req.anti_affinity,
        iothreads=req.iothreads,
        iothread_policy=req.iothread_policy,
    )


def _devices(
    hs: HostState, cells: tuple[int, ...], req: VmRequest, vs: tuple[int, ...]
) -> tuple[DeviceAssignment, ...]:
    """The VM's GPUs: each guest cell's own count from its host cell (``cell_gpus``), else :func:`pick_gpus`."""
    if req.cell_gpus is None:
        return pick_gpus(hs, cells, req, threads_taken(req, hs, vs))
    devices = []
    for g, (cid, k) in enumerate(zip(cells, req.cell_gpus, strict=True)):
        free = hs.cell_by_id[cid].gpus_free
        assert len(free) >= k, "the fit matched each guest cell to a host cell with its GPUs"
        devices += [DeviceAssignment(a, DeviceKind.GPU, g, cid) for a in free[:k]]
    return tuple(sorted(devices, key=lambda d: d.address))


def _distance(hs: HostState, home: int | None, cell: int) -> int:
    if home is None:
        return FAR
    try:
        d = hs.host.cell(home).distance_to(cell)
    except KeyError:
        return FAR
    return d if d is not None else (10 if home == cell else FAR // 2)


def pick_gpus(
    hs: HostState, cells: tuple[int, ...], req: VmRequest, taken: list[int]
) -> tuple[DeviceAssignment, ...]:
    """Free GPUs for a VM on ``cells`` (guest order) that takes ``taken`` threads per cell."""
    want, affinity = req.gpus, req.gpu_affinity
    take = split_gpus(hs, cells, want, taken)
    picked = [a for c, k in zip(cells, take, strict=True) for a in hs.cell_by_id[c].gpus_free[:k]]
    if len(picked) < want and affinity is not GpuAffinity.REQUIRED:
        if affinity is GpuAffinity.SOCKET:
            near = {s for c in cells for s in hs.socket_cells(hs.socket_of.get(c), c)} - set(cells)
            spare = [a for c in sorted(near) for a in hs.cell_by_id[c].gpus_free]
        else:
            spare = [a for c in hs.cells if c.id not in cells for a in c.gpus_free] + hs.loose_gpus_free
        spare.sort(key=lambda a: (min(_distance(hs, hs.gpu_home[a], c) for c in cells), a))
        picked += spare[: want - len(picked)]
    assert len(picked) == want, "fit promised enough GPUs"
    guest = {cid: g for g, cid in enumerate(cells)}
    devices = []
    for address in sorted(picked):
        home = hs.gpu_home[address]
        if home is not None and home in guest:
            g = guest[home]
        else:
            g = min(range(len(cells)), key=lambda i: (_distance(hs, home, cells[i]), i))
        devices.append(DeviceAssignment(address, DeviceKind.GPU, g, home))
    return tuple(devices)
