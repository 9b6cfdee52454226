"""Which GPUs and NICs a VM takes on a cell set: asked by the fit (to accept a set) and by the builder.

Pure: no I/O; reads the host state. GPUs come from the guest cells' host
cells as :func:`vnuma.placement.gpus.split_gpus` says (where free GPUs are
most at risk of stranding; lowest addresses first); ``preferred``/``socket``
affinity tops up from the nearest other cells. With ``cell_gpus`` each
guest cell takes its own count from its host cell. Without NICs asked, a
cell's GPUs stranded for RDMA (no free NIC of their own near them) are taken
first; with NICs asked (:mod:`vnuma.placement.nics`), a cell's GPUs that
have a free NIC within the level are taken first, then the NICs are picked
for the GPUs taken. A device is attached to the guest cell on its host cell, else to the closest
guest cell.
"""

from __future__ import annotations

from collections.abc import Sequence

from vnuma.placement.gpus import split_gpus, threads_taken
from vnuma.placement.iommu import whole_groups
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import DeviceAssignment, GpuAffinity, VmRequest
from vnuma.placement.nicchoice import near_free, pick_nics, rdma_spare_first
from vnuma.placement.nics import matched_first
from vnuma.topology import DeviceKind

FAR = 1 << 20  # distance used for a device with no NUMA node


def pick_devices(
    hs: HostState, cells: tuple[int, ...], req: VmRequest, vs: Sequence[int]
) -> tuple[DeviceAssignment, ...]:
    """The VM's GPUs, then its NICs, on ``cells`` (guest order) with ``vs`` vCPUs per guest cell.

    Raises:
        NicShortage: the NICs asked for are not within the level of the GPUs taken.
    """
    if req.cell_gpus is None:
        gpus = pick_gpus(hs, cells, req, threads_taken(req, hs, vs))
    else:
        devices = []
        for g, (cid, k) in enumerate(zip(cells, req.cell_gpus, strict=True)):
            free, _near = _nic_first(hs, req, hs.cell_by_id[cid].gpus_free)
            assert len(free) >= k, "the fit matched each guest cell to a host cell with its GPUs"
            taken = whole_groups(hs.shape.iommu_mates, free, k)
            devices += [DeviceAssignment(a, DeviceKind.GPU, g, cid) for a in taken]
        gpus = tuple(sorted(devices, key=lambda d: d.address))
    if not req.wants_nics:
        return gpus
    nics = pick_nics(hs, gpus, req, lambda home: _attach(hs, home, cells))
    return tuple(sorted((*gpus, *nics), key=lambda d: d.address))


def _nic_first(hs: HostState, req: VmRequest, addresses: list[str]) -> tuple[list[str], int]:
    """``addresses`` (free GPUs) in the order the VM takes them, and how many of them have a free NIC within
    the asked level. With NICs asked, those first; for a NIC per GPU, those a maximum matching gives a NIC of
    their own before those it leaves sharing one. Without NICs: those stranded for RDMA first
    (:func:`~vnuma.placement.nicchoice.rdma_spare_first`)."""
    if not req.wants_nics:
        return rdma_spare_first(hs, addresses), 0
    options = {a: near_free(hs, a, req.nic_affinity, req.nic_function) for a in sorted(addresses)}
    near = [a for a in sorted(addresses) if options[a]]
    count = len(near)
    if req.nics_per_gpu:
        near = matched_first(near, options)
    return near + [a for a in sorted(addresses) if not options[a]], count


def _attach(hs: HostState, home: int | None, cells: tuple[int, ...]) -> int:
    """The guest cell a device on host cell ``home`` attaches to: its own, else the nearest."""
    if home is not None and home in cells:
        return cells.index(home)
    return min(range(len(cells)), key=lambda i: (_distance(hs, home, cells[i]), i))


def _distance(hs: HostState, home: int | None, cell: int) -> int:
    if home is None:
        return FAR
    try:
        d = hs.host.cell(home).distance_to(cell)
    except KeyError:
        return FAR
    return d if d is not None else (10 if home == cell else FAR // 2)


def gpu_split(hs: HostState, cells: tuple[int, ...], req: VmRequest, taken: list[int]) -> list[int]:
    """How many free GPUs the builder takes from each of ``cells`` (guest order) for a VM taking ``taken``
    threads per cell: the split the gpu-first stranding test judges (:func:`vnuma.placement.gpus.strands_gpus`)."""
    if req.cell_gpus is not None:
        return list(req.cell_gpus)
    return _split(hs, cells, req, taken)[0]


def _split(
    hs: HostState, cells: tuple[int, ...], req: VmRequest, taken: list[int]
) -> tuple[list[int], Sequence[list[str]]]:
    """GPUs to take per cell and each cell's free GPUs in the order they are taken."""
    free = [hs.cell_by_id[c].gpus_free for c in cells]
    if req.wants_nics:  # GPUs from where they have NICs, so the guest order alone never decides the cell
        order, near = zip(*(_nic_first(hs, req, f) for f in free), strict=True)
        return split_gpus(hs, cells, req.gpus, taken, near if sum(near) >= req.gpus else None), order
    # the order matters only where the VM takes some of a cell's free GPUs, not none or all
    take = split_gpus(hs, cells, req.gpus, taken)
    return take, [rdma_spare_first(hs, f) if 0 < k < len(f) else f for f, k in zip(free, take, strict=True)]


def pick_gpus(
    hs: HostState, cells: tuple[int, ...], req: VmRequest, taken: list[int]
) -> tuple[DeviceAssignment, ...]:
    """Free GPUs for a VM on ``cells`` (guest order) that takes ``taken`` threads per cell."""
    want, affinity = req.gpus, req.gpu_affinity
    take, order = _split(hs, cells, req, taken)
    picked = [
        a for c, k, free in zip(cells, take, order, strict=True)
        for a in whole_groups(hs.shape.iommu_mates, free, k)
    ]
    if len(picked) < want and affinity is not GpuAffinity.REQUIRED:
        if affinity is GpuAffinity.SOCKET:
            near = {s for c in cells for s in hs.socket_cells(hs.socket_of.get(c), c)} - set(cells)
            spare = [a for c in sorted(near) for a in hs.cell_by_id[c].gpus_free]
        else:
            spare = [a for c in hs.cells if c.id not in cells for a in c.gpus_free] + hs.loose_gpus_free
        spare.sort(key=lambda a: (min(_distance(hs, hs.gpu_home[a], c) for c in cells), a))
        picked += spare[: want - len(picked)]
    assert len(picked) == want, "fit promised enough GPUs"
    return tuple(
        DeviceAssignment(a, DeviceKind.GPU, _attach(hs, hs.gpu_home[a], cells), hs.gpu_home[a]) for a in sorted(picked)
    )
