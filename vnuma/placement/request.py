"""A request before any host is looked at: validate it, size it, validate the sized request again.

Pure: no I/O. A request that no host could ever take *because of its own
numbers* (0 vCPUs, memory that does not split into whole pages per guest
cell, more GPUs than the whole fleet has, ...) is an error
(:func:`validate_request`); anything that depends on a host is a rejection.

Sizing (``vnuma place TENANT --gpus 2`` without vCPUs and/or memory): the VM
gets its GPUs' proportional share of the cells that hold GPUs on the host
tried. A cell with 32 placeable pCPUs, 256 GiB of pages and 2 GPUs gives 16
vCPUs and 128 GiB per GPU. The share per GPU is the smallest over the
host's GPU cells (so it fits any of them), rounded down to whole cores
(``isolate``: one vCPU per core) and to whole pages of the page size tried:
memory is the share of that size's page pool, as only that pool can back
it. With ``numa_nodes`` N the sized vCPUs and memory are rounded down so
they split evenly (vCPUs a multiple of N, of 2N under ``require``; memory a
multiple of N pages). The sized request is then checked by the same
:func:`request_problem` as any other; a share too small to give every guest
cell a vCPU and a page is the host's ``size`` rejection, naming the cell
that limits it.

A request for GPU partitions without vCPUs and/or memory (``--mig 3g.40gb:2``)
is sized the same way from the part of a GPU its partitions make
(:func:`gpu_share`): two 3g.40gb instances of an 8-slice GPU, one GPU's share.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from vnuma.errors import InvalidInputError
from vnuma.placement.ledger.cell import CellState
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.ledger.host import HostState
from vnuma.placement.mixed import mixed_request_problem
from vnuma.placement.model import (
    MAX_IOTHREADS,
    CpuPolicy,
    EmulatorThreads,
    IoThreadPolicy,
    MemoryMode,
    ThreadPolicy,
    VmRequest,
)
from vnuma.placement.partitionchoice import unoffered
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.topology import PAGE_4K, count_of, format_size_kib

MAX_VCPUS = 4096
"""The most vCPUs a request may ask for (QEMU's and libvirt's ceiling for one x86 guest); larger
numbers would also overflow the engine's 64-bit arrays."""


def _numbers_problem(request: VmRequest) -> str | None:
    if request.gpus < 0:
        return f"GPU count {request.gpus} is negative"
    if request.vcpus is not None and request.vcpus < 1:
        return f"needs at least 1 vCPU, got {request.vcpus}"
    if request.vcpus is not None and request.vcpus > MAX_VCPUS:
        return f"asks for {request.vcpus} vCPUs; a libvirt domain has at most {MAX_VCPUS}"
    if request.memory_kib is not None and request.memory_kib < 1:
        return f"needs some memory, got {request.memory_kib} KiB"
    if request.numa_nodes is not None and request.numa_nodes < 1:
        return f"NUMA node count must be 1 or more (or auto), got {request.numa_nodes}"
    # Any size a host may offer (4K/2M/1G on x86, 64K/512M/16G elsewhere): hosts without it reject.
    size = request.page_size_kib
    if size is not None and (size < PAGE_4K or size & (size - 1)):
        return f"page size {size} KiB is not a power of two of at least 4 KiB"
    return None


def _cells_problem(request: VmRequest) -> str | None:
    """An asymmetric guest: lists of one length (the guest cell count), sums that match, sizes that split."""
    vcpus, memory, gpus = request.cell_vcpus, request.cell_memory_kib, request.cell_gpus
    if vcpus is None or memory is None:
        return "per-cell sizes need both --cell-vcpus and --cell-memory (one entry per guest cell)"
    lists = {"vCPUs": vcpus, "memory sizes": memory, **({"GPU counts": gpus} if gpus is not None else {})}
    counts = {len(v) for v in lists.values()}
    if len(counts) > 1 or request.numa_nodes not in counts:
        said = ", ".join(f"{len(v)} {k}" for k, v in lists.items())
        return f"per-cell lists must give one entry per guest cell (--numa-nodes {request.numa_nodes}): {said}"
    if request.gpus and gpus is None:
        return "an asymmetric guest with GPUs says which cell takes them: --cell-gpus"
    totals = (("vCPUs", sum(vcpus), request.vcpus), ("memory", sum(memory), request.memory_kib))
    for what, total, asked in (*totals, ("GPUs", sum(gpus or ()), request.gpus)):
        if asked is not None and total != asked:
            return f"per-cell {what} add up to {total}, not the {asked} asked for"
    if min(vcpus) < 1 or min(memory) < 1 or min(gpus or (0,)) < 0:
        return "every guest cell needs at least 1 vCPU and some memory (and no negative GPU count)"
    page = request.page_size_kib or PAGE_4K
    odd = next((m for m in memory if m % page), None)
    if odd is not None:
        return f"per-cell memory {format_size_kib(odd)} is not a whole number of {format_size_kib(page)} pages"
    if request.thread_policy is ThreadPolicy.REQUIRE and any(v % 2 for v in vcpus):
        return "thread policy require packs vCPUs on sibling pairs: every per-cell vCPU count must be even"
    if request.emulator_threads is EmulatorThreads.ISOLATE:
        return "isolated emulator threads are not supported with per-cell sizes"
    return None


def _split_problem(request: VmRequest) -> str | None:
    if request.asymmetric or request.cell_memory_kib is not None or request.cell_gpus is not None:
        return _cells_problem(request)
    nodes = request.numa_nodes or 1
    if request.vcpus is not None and request.numa_nodes and request.vcpus % nodes:
        return f"{request.vcpus} vCPUs cannot be split evenly over {nodes} NUMA nodes"
    if request.memory_kib is not None:
        page = request.page_size_kib or PAGE_4K
        if request.memory_kib % nodes or (request.memory_kib // nodes) % page:
            where = "per guest cell " if nodes > 1 else ""
            return (
                f"memory {format_size_kib(request.memory_kib)} is not a whole number of "
                f"{format_size_kib(page)} pages {where}over {nodes} NUMA node(s)"
            )
    if request.vcpus is not None and request.numa_nodes and request.thread_policy is ThreadPolicy.REQUIRE:
        per_cell = request.vcpus // nodes
        if per_cell % 2:
            return f"thread policy require packs vCPUs on sibling pairs: {per_cell} vCPUs per guest cell is odd"
    return None


def _policy_problem(request: VmRequest) -> str | None:
    mixed = mixed_request_problem(request)
    if mixed is not None:
        return mixed
    if request.cpu_policy is CpuPolicy.SHARED:
        if request.thread_policy is not ThreadPolicy.PREFER:
            return f"thread policy {request.thread_policy} needs cpu policy dedicated"
        if request.emulator_threads is EmulatorThreads.ISOLATE:
            return "isolated emulator threads need cpu policy dedicated"
    return None


def _memory_mode_problem(request: VmRequest) -> str | None:
    modes = request.memory_modes
    if not modes:
        return "needs a memory mode"
    if len(modes) > 1 and len(modes) != request.numa_nodes:
        nodes = "auto" if request.numa_nodes is None else request.numa_nodes
        return (
            f"{len(modes)} per-cell memory modes need as many guest cells (--numa-nodes {len(modes)}), "
            f"not {nodes}"
        )
    if MemoryMode.RESTRICTIVE in modes and set(modes) != {MemoryMode.RESTRICTIVE}:
        return "memory mode restrictive applies to every guest cell or to none (libvirt requires it so)"
    return None


def _iothread_problem(request: VmRequest) -> str | None:
    if not 0 <= request.iothreads <= MAX_IOTHREADS:
        return f"iothreads must be 0 to {MAX_IOTHREADS}, not {request.iothreads}"
    if request.iothread_policy is IoThreadPolicy.DEVICE_LOCAL and request.gpus == 0:
        return "iothreads policy device-local needs a passed-through device (--gpus N)"
    return None


def request_problem(request: VmRequest) -> str | None:
    """What is wrong with a request by its own numbers and policies (None: nothing)."""
    return (
        _numbers_problem(request) or _split_problem(request) or _policy_problem(request)
        or _memory_mode_problem(request) or _iothread_problem(request) or _nic_problem(request)
        or _cold_problem(request) or _partition_problem(request)
    )


MAX_PARTITIONS = 64


def _partition_problem(request: VmRequest) -> str | None:
    """Partitions instead of whole GPUs, between 1 and :data:`MAX_PARTITIONS` of one type or profile."""
    ask = request.partition
    if ask is None:
        return None
    if not 1 <= ask.count <= MAX_PARTITIONS:
        return f"a VM takes 1 to {MAX_PARTITIONS} {ask.kind.value} partitions, not {ask.count}"
    if request.gpus or request.cell_gpus is not None:
        return f"a VM takes whole GPUs or GPU partitions: --gpus with --{ask.kind.value} is refused"
    if request.wants_nics:
        return "NICs are placed beside whole GPUs: --nics with --vgpu/--mig is refused"
    return None


def _cold_problem(request: VmRequest) -> str | None:
    """A cold tier is a whole number of 4 KiB pages, not negative, and only for a memory-backed guest."""
    if request.cold_memory_kib < 0 or request.cold_memory_kib % PAGE_4K:
        return f"cold memory must be a whole number of 4 KiB pages, got {request.cold_memory_kib} KiB"
    return None


MAX_NICS = 64


def _nic_problem(request: VmRequest) -> str | None:
    """NICs are placed beside GPUs (their level is to a GPU), one count or one per GPU."""
    if request.nics < 0 or request.nics > MAX_NICS:
        return f"NIC count must be 0 to {MAX_NICS}, got {request.nics}"
    if request.nics_per_gpu and request.nics:
        return "ask for NICs per GPU or for a count, not both"
    if request.wants_nics and request.gpus <= 0:
        return "NICs are placed within a PCIe level of the VM's GPUs: --nics needs --gpus"
    return None


def validate_request(request: VmRequest, fleet: Fleet) -> None:
    """Check a request against itself and the fleet's size.

    Raises:
        InvalidInputError: no vCPUs or memory (without GPUs to size from),
            a count below 1, memory that is not a whole number of pages per
            guest cell, vCPUs that do not split over the NUMA nodes, a
            thread or emulator policy that needs ``dedicated`` CPUs, a ``mixed``
            request without dedicated vCPUs or with all of them or some out of
            range (or ``--dedicated-vcpus`` without ``mixed``), more
            GPUs than the whole fleet has, a vGPU type or MIG profile no GPU of the fleet offers
            (:func:`offered`; one offered but with no room is a rejection), per-cell memory modes that do
            not match the guest cell count, ``restrictive`` on some cells only,
            iothreads out of 0..64, ``device-local`` iothreads without a device,
            affinity or anti-affinity without a group.
        NotFoundError: ``request.host`` is not in the fleet.
    """
    name = request.name or request.tenant
    lists = (request.cell_vcpus, request.cell_memory_kib, request.cell_gpus)
    problem = _cells_problem(request) if lists != (None, None, None) else None
    if problem is not None:  # said first: per-cell lists also stand for the totals
        raise InvalidInputError(f"VM {name!r}: {problem}")
    problem = _numbers_problem(request)  # a negative count is named before it is read as "no GPUs asked"
    if problem is not None:
        raise InvalidInputError(f"VM {name!r}: {problem}")
    if (request.vcpus is None or request.memory_kib is None) and request.gpus <= 0 and request.partition is None:
        raise InvalidInputError(
            f"VM {name!r}: vCPUs and memory are required unless GPUs or GPU partitions are asked for",
            hint="give vCPUs and memory (`vnuma place --vcpus N --memory SIZE`), or GPUs to size the VM from "
            "(`vnuma place --gpus N`)",
        )
    problem = request_problem(request)
    if problem is not None:
        raise InvalidInputError(f"VM {name!r}: {problem}")
    if request.gpus > fleet.gpus_total:
        asked = count_of(request.gpus, "GPU")
        raise InvalidInputError(f"VM {name!r}: asks for {asked}, the whole fleet has {fleet.gpus_total}")
    if request.partition is not None and not offered(fleet, request.partition):
        kind = "MIG profile" if request.partition.kind is PartitionKind.MIG else "vGPU type"
        why, hint = unoffered(fleet.states, request.partition)
        raise InvalidInputError(f"VM {name!r}: no GPU of the fleet offers {kind} {request.partition.name!r}"
                                + (f" ({why})" if why else ""), hint=hint)
    if (request.affinity is not None or request.anti_affinity is not None) and request.group is None:
        raise InvalidInputError(f"VM {name!r}: affinity and anti-affinity need a group")
    if request.host is not None:
        fleet.state(request.host)


def offered(fleet: Fleet, ask: PartitionAsk) -> bool:
    """Does some GPU of ``fleet`` offer ``ask``'s vGPU type or MIG profile at all (free or not)? A MIG profile is
    offered by a GPU whose model's geometry (``vnuma gpu-profile import``) lists it."""
    known = _OFFERS.get(id(fleet))
    if known is None or known[0] is not fleet:  # a fleet's hosts never change: read once per fleet
        names: set[tuple[PartitionKind, str]] = set()
        for shape in {id(hs.shape): hs.shape for hs in fleet.states}.values():
            for offer in shape.gpu_offers.values():
                names.update((PartitionKind.VGPU, t) for t in (*offer.vgpu_vfs, *offer.vgpu_pf))
                if offer.mig is not None:
                    names.update((PartitionKind.MIG, p.name) for p in offer.mig.profiles)
        if len(_OFFERS) > 64:
            _OFFERS.clear()
        known = _OFFERS[id(fleet)] = (fleet, frozenset(names))
    return (ask.kind, ask.name) in known[1]


_OFFERS: dict[int, tuple[Fleet, frozenset[tuple[PartitionKind, str]]]] = {}


def _vcpus_per_gpu(request: VmRequest, hs: HostState, cell: CellState) -> int:
    if request.cpu_policy is CpuPolicy.DEDICATED and request.thread_policy is ThreadPolicy.ISOLATE:
        return len(cell.cores) // len(cell.gpus)
    threads = cell.threads_total // len(cell.gpus)
    return threads // hs.width * hs.width if threads >= hs.width else threads


def gpu_share(request: VmRequest, hs: HostState) -> int | Fraction | str:
    """How many GPUs' worth ``request`` asks on ``hs``: its GPUs, or its partitions' part of the first GPU (by
    address) offering them: a MIG instance its memory slices of the geometry's, a vGPU instance one of the
    instances of its type a GPU offers (on its VFs, else on the GPU itself). A string: no GPU offers them."""
    ask = request.partition
    if ask is None:
        return request.gpus
    for address in sorted(hs.shape.gpu_offers):
        offer = hs.shape.gpu_offers[address]
        if ask.kind is PartitionKind.MIG and offer.mig is not None:
            slices = next((p.memory_slices for p in offer.mig.profiles if p.name == ask.name), 0)
            if slices:
                return Fraction(ask.count * slices, offer.mig.memory_slices)
        if ask.kind is PartitionKind.VGPU:
            per_gpu = len(offer.vgpu_vfs.get(ask.name, ())) or offer.vgpu_pf.get(ask.name, 0)
            if per_gpu:
                return Fraction(ask.count, per_gpu)
    return f"no GPU offers {ask.kind.value} {ask.name} to size the VM from; give vcpus and memory"


def resolve_size(request: VmRequest, hs: HostState, page_size_kib: int) -> VmRequest | str:
    """``request`` with vcpus/memory filled from its GPUs' (or partitions', :func:`gpu_share`) share of ``hs``,
    or why it cannot be sized there."""
    gpu_cells = [c for c in hs.cells if c.gpus]
    if not gpu_cells:
        return "has no GPUs on CPU cells to size the VM from; give vcpus and memory"
    share = gpu_share(request, hs)
    if isinstance(share, str):
        return share
    what = count_of(request.gpus, "GPU") if request.partition is None else (
        f"{request.partition.count} {request.partition.kind.value} instance(s) ({share} GPU)")
    vcpu_cell = min(gpu_cells, key=lambda c: (_vcpus_per_gpu(request, hs, c), c.id))
    page_cell = min(gpu_cells, key=lambda c: (c.pages_total.get(page_size_kib, 0) // len(c.gpus), c.id))
    per_gpu_vcpus = _vcpus_per_gpu(request, hs, vcpu_cell)
    per_gpu_pages = page_cell.pages_total.get(page_size_kib, 0) // len(page_cell.gpus)
    nodes = request.numa_nodes or 1
    vcpus = request.vcpus
    if vcpus is None:
        step = 2 * nodes if request.thread_policy is ThreadPolicy.REQUIRE and request.numa_nodes else nodes
        vcpus = int(share * per_gpu_vcpus) // step * step
    memory = request.memory_kib
    if memory is None:
        memory = int(share * per_gpu_pages) // nodes * nodes * page_size_kib
    if vcpus < 1:
        return (
            f"cell {vcpu_cell.id} gives {per_gpu_vcpus} vCPU(s) per GPU ({vcpu_cell.threads_total} threads for "
            f"{len(vcpu_cell.gpus)} GPUs): too few for {what} over {nodes} guest cell(s); give vcpus"
        )
    if memory < 1:
        return (
            f"cell {page_cell.id} gives {per_gpu_pages} {format_size_kib(page_size_kib)} page(s) per GPU: "
            f"too few for {what} over {nodes} guest cell(s)"
        )
    sized = replace(request, vcpus=vcpus, memory_kib=memory, page_size_kib=page_size_kib)
    problem = request_problem(sized)
    return f"sized as {vcpus} vCPUs and {format_size_kib(memory)}: {problem}" if problem else sized
