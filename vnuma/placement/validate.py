"""Request validation: malformed requests are errors, not rejections.

Pure: no I/O. A request that no host could ever take *because of its own
numbers* (0 vCPUs, memory that does not split into whole pages per guest
cell, more GPUs than the whole fleet has, ...) raises here, before any host
is looked at; anything that depends on a host's free state is a rejection.
"""

from __future__ import annotations

from vnuma.errors import InvalidInputError
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import CpuPolicy, EmulatorThreads, ThreadPolicy, VmRequest
from vnuma.topology import PAGE_4K, format_size_kib


def _fail(request: VmRequest, problem: str, hint: str | None = None) -> InvalidInputError:
    name = request.name or request.tenant
    return InvalidInputError(f"VM {name!r}: {problem}", hint=hint)


def _check_numbers(request: VmRequest) -> None:
    if request.gpus < 0:
        raise _fail(request, f"GPU count {request.gpus} is negative")
    if (request.vcpus is None or request.memory_kib is None) and request.gpus == 0:
        raise _fail(
            request,
            "vCPUs and memory are required unless GPUs are asked for",
            hint="give --vcpus N --memory SIZE, or --gpus N to size the VM from its GPUs",
        )
    if request.vcpus is not None and request.vcpus < 1:
        raise _fail(request, f"needs at least 1 vCPU, got {request.vcpus}")
    if request.memory_kib is not None and request.memory_kib < 1:
        raise _fail(request, f"needs some memory, got {request.memory_kib} KiB")
    if request.numa_nodes is not None and request.numa_nodes < 1:
        raise _fail(request, f"NUMA node count must be 1 or more (or auto), got {request.numa_nodes}")
    # Any size a host may offer (4K/2M/1G on x86, 64K/512M/16G elsewhere): hosts without it reject.
    size = request.page_size_kib
    if size is not None and (size < PAGE_4K or size & (size - 1)):
        raise _fail(request, f"page size {size} KiB is not a power of two of at least 4 KiB")


def _check_split(request: VmRequest) -> None:
    nodes = request.numa_nodes or 1
    if request.vcpus is not None and request.numa_nodes and request.vcpus % nodes:
        raise _fail(request, f"{request.vcpus} vCPUs cannot be split evenly over {nodes} NUMA nodes")
    if request.memory_kib is not None:
        page = request.page_size_kib or PAGE_4K
        if request.memory_kib % nodes or (request.memory_kib // nodes) % page:
            where = "per guest cell " if nodes > 1 else ""
            raise _fail(
                request,
                f"memory {format_size_kib(request.memory_kib)} is not a whole number of "
                f"{format_size_kib(page)} pages {where}over {nodes} NUMA node(s)",
            )
    thread = request.thread_policy
    if request.vcpus is not None and request.numa_nodes and thread is ThreadPolicy.REQUIRE:
        per_cell = request.vcpus // nodes
        if per_cell % 2:
            raise _fail(
                request,
                f"thread policy require packs vCPUs on sibling pairs: {per_cell} vCPUs per guest cell is odd",
            )


def validate_request(request: VmRequest, fleet: Fleet) -> None:
    """Check a request against itself and the fleet's size.

    Raises:
        InvalidInputError: no vCPUs or memory (without GPUs to size from),
            a count below 1, memory that is not a whole number of pages per
            guest cell, vCPUs that do not split over the NUMA nodes, a
            thread or emulator policy that needs ``dedicated`` CPUs, more
            GPUs than the whole fleet has.
        NotFoundError: ``request.host`` is not in the fleet.
    """
    _check_numbers(request)
    _check_split(request)
    if request.cpu_policy is CpuPolicy.SHARED:
        if request.thread_policy is not ThreadPolicy.PREFER:
            raise _fail(request, f"thread policy {request.thread_policy} needs cpu policy dedicated")
        if request.emulator_threads is EmulatorThreads.ISOLATE:
            raise _fail(request, "isolated emulator threads need cpu policy dedicated")
    if request.gpus > fleet.gpus_total:
        raise _fail(request, f"asks for {request.gpus} GPUs, the whole fleet has {fleet.gpus_total}")
    if request.host is not None:
        fleet.state(request.host)
