"""A placement request from the options of ``vnuma place``, in the CLI's own units: read once, here.

``vnuma place`` and ``POST /v1/place`` take the same options by the same
names (``--cell-vcpus 12,4`` is ``"cell_vcpus": "12,4"``) and both turn
them into a :class:`VmRequest` with :func:`place_request`, so a request
means the same whichever way it came.
"""

from __future__ import annotations

from vnuma.errors import InvalidInputError
from vnuma.placement.model import (
    Affinity,
    AntiAffinity,
    ColdTier,
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    IoThreadPolicy,
    MemoryMode,
    NicFunction,
    ThreadPolicy,
    VmRequest,
)
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.placement.request import parse_partition
from vnuma.services.names import check_name
from vnuma.topology import parse_cpuset, parse_page_size, parse_size_kib
from vnuma.topology.pcie import Level


def parse_numa_nodes(text: str) -> int | None:
    """``auto`` -> None, else a positive integer.

    Raises:
        InvalidInputError: anything else.
    """
    if text.strip().lower() == "auto":
        return None
    # isdecimal, not isdigit: "²" is a digit that int() refuses.
    if not text.strip().isdecimal() or len(text.strip()) > 6 or int(text) < 1:
        raise InvalidInputError(f"bad --numa-nodes {text!r}: use a positive number or auto")
    return int(text)


def int_list(text: str, option: str) -> tuple[int, ...]:
    """``12,4`` -> (12, 4).

    Raises:
        InvalidInputError: a word that is not a whole number.
    """
    words = [w.strip() for w in text.split(",")]
    if not all(w.isdecimal() and len(w) <= 6 for w in words):
        raise InvalidInputError(
            f"bad {option} {text!r}: use whole numbers, one per guest cell, comma-separated (e.g. 12,4)"
        )
    return tuple(int(w) for w in words)


def parse_memory_modes(text: str) -> tuple[MemoryMode, ...]:
    """``strict,interleave`` -> one mode per guest cell.

    Raises:
        InvalidInputError: a word that is not a memory mode.
    """
    modes = []
    for word in text.split(","):
        try:
            modes.append(MemoryMode(word.strip().lower()))
        except ValueError:
            choices = "|".join(m.value for m in MemoryMode)
            raise InvalidInputError(
                f"bad --cell-memory-mode {text!r}: {word.strip()!r} is not one of {choices}",
                hint="one mode per guest cell, comma-separated, e.g. strict,interleave",
            ) from None
    return tuple(modes)


def check_group_options(group: str | None, affinity: Affinity | None, anti_affinity: AntiAffinity | None) -> None:
    """``--group G`` is a name; ``--affinity`` and ``--anti-affinity`` need it and exclude each other.

    Raises:
        InvalidInputError: which of those is broken.
    """
    if group is not None:
        check_name(group, "group")
    for option, given in (("--anti-affinity", anti_affinity), ("--affinity", affinity)):
        if group is None and given is not None:
            raise InvalidInputError(f"{option} needs --group G")
    if affinity is not None and anti_affinity is not None:
        raise InvalidInputError(
            "--affinity and --anti-affinity exclude each other: a group keeps its VMs together or apart",
        )


def place_request(
    *,
    tenant: str,
    page_size: str,
    vcpus: int | None = None,
    memory: str | None = None,
    gpus: int = 0,
    name: str | None = None,
    numa_nodes: str = "auto",
    cpu_policy: CpuPolicy = CpuPolicy.DEDICATED,
    thread_policy: ThreadPolicy = ThreadPolicy.PREFER,
    gpu_affinity: GpuAffinity = GpuAffinity.REQUIRED,
    nics: int = 0,
    nics_per_gpu: bool = False,
    nic_affinity: Level = Level.PXB,
    nic_function: NicFunction = NicFunction.PF,
    emulator_threads: EmulatorThreads = EmulatorThreads.SHARE,
    memory_mode: MemoryMode = MemoryMode.STRICT,
    cell_memory_mode: str | None = None,
    cell_vcpus: str | None = None,
    cell_memory: str | None = None,
    cell_gpus: str | None = None,
    iothreads: int = 0,
    iothreads_policy: IoThreadPolicy = IoThreadPolicy.EMULATOR,
    host: str | None = None,
    group: str | None = None,
    anti_affinity: AntiAffinity | None = None,
    affinity: Affinity | None = None,
    llc: str | None = None,
    llc_ways: int | None = None,
    mem_bw: int | None = None,
    cold_memory: str | None = None,
    cold_tier: ColdTier = ColdTier.ANY,
    vgpu: str | None = None,
    mig: str | None = None,
    dedicated_vcpus: str | None = None,
) -> VmRequest:
    """The request ``vnuma place`` makes of its options (``page_size``: the option, or the configured default).

    Per-cell sizes give the guest cell count when ``numa_nodes`` is auto; the
    totals, when given, must be their sums (the engine's request check says so).

    Raises:
        InvalidInputError: a bad name, size, list, cell count, ``anti_affinity`` or ``affinity`` without
            ``group``, or both; a bad ``vgpu``/``mig`` (``NAME[:N]``), or both given; a malformed
            ``dedicated_vcpus`` list (whether it suits the CPU policy is the engine's request check).
    """
    if name is not None:
        check_name(name, "VM")  # an empty name is refused, not taken as "generate one"
    check_group_options(group, affinity, anti_affinity)
    llc_kib = parse_slice(llc, llc_ways, mem_bw)
    per_vcpus = int_list(cell_vcpus, "--cell-vcpus") if cell_vcpus is not None else None
    per_memory = tuple(parse_size_kib(x) for x in cell_memory.split(",")) if cell_memory is not None else None
    per_gpus = int_list(cell_gpus, "--cell-gpus") if cell_gpus is not None else None
    nodes = parse_numa_nodes(numa_nodes)
    if nodes is None and per_vcpus is not None:
        nodes = len(per_vcpus)  # per-cell sizes say how many guest cells
    return VmRequest(
        name=name or "",
        tenant=tenant,
        vcpus=vcpus if vcpus is not None or per_vcpus is None else sum(per_vcpus),
        memory_kib=parse_size_kib(memory) if memory is not None else (sum(per_memory) if per_memory else None),
        gpus=gpus if gpus or per_gpus is None else sum(per_gpus),
        numa_nodes=nodes,
        cell_vcpus=per_vcpus,
        cell_memory_kib=per_memory,
        cell_gpus=per_gpus,
        cpu_policy=cpu_policy,
        thread_policy=thread_policy,
        page_size_kib=parse_page_size(page_size),
        gpu_affinity=gpu_affinity,
        emulator_threads=emulator_threads,
        host=host,
        group=group,
        anti_affinity=anti_affinity,
        affinity=affinity,
        memory_modes=parse_memory_modes(cell_memory_mode) if cell_memory_mode is not None else (memory_mode,),
        iothreads=iothreads,
        iothread_policy=iothreads_policy,
        nics=nics,
        nics_per_gpu=nics_per_gpu,
        nic_affinity=nic_affinity,
        nic_function=nic_function,
        llc_kib=llc_kib,
        llc_ways=llc_ways,
        mem_bw=mem_bw,
        cold_memory_kib=parse_size_kib(cold_memory) if cold_memory is not None else 0,
        cold_tier=cold_tier,
        partition=partition_ask(vgpu, mig),
        dedicated_vcpus=parse_vcpu_list(dedicated_vcpus) if dedicated_vcpus is not None else frozenset(),
    )


def parse_vcpu_list(text: str) -> frozenset[int]:
    """``--dedicated-vcpus 0-3,6`` as vCPU ids.

    Raises:
        InvalidInputError: not a list of ids and ranges.
    """
    if "^" not in text:  # a cpuset's exclusions have no meaning in a list of vCPUs
        try:
            return parse_cpuset(text)
        except InvalidInputError:
            pass
    raise InvalidInputError(f"bad --dedicated-vcpus {text!r}: expected vCPU ids and ranges, e.g. 0-3,6")


def partition_ask(vgpu: str | None, mig: str | None) -> PartitionAsk | None:
    """``--vgpu TYPE[:N]`` or ``--mig PROFILE[:N]`` as the request's partitions (None: neither).

    Raises:
        InvalidInputError: both given, or a malformed one.
    """
    if vgpu is not None and mig is not None:
        raise InvalidInputError("--vgpu and --mig exclude each other: a VM takes partitions of one kind")
    if vgpu is not None:
        return parse_partition(PartitionKind.VGPU, vgpu)
    return None if mig is None else parse_partition(PartitionKind.MIG, mig)


def parse_slice(llc: str | None, llc_ways: int | None, mem_bw: int | None) -> int | None:
    """``--llc SIZE`` in KiB, after checking it against ``--llc-ways`` and ``--mem-bw``.

    Raises:
        InvalidInputError: both --llc and --llc-ways, a size or way count below one, a cap outside 1..100.
    """
    if llc is not None and llc_ways is not None:
        raise InvalidInputError("give --llc SIZE or --llc-ways N, not both")
    if llc_ways is not None and llc_ways < 1:
        raise InvalidInputError(f"--llc-ways must be 1 or more, got {llc_ways}")
    if mem_bw is not None and not 1 <= mem_bw <= 100:
        raise InvalidInputError(f"--mem-bw must be a percentage from 1 to 100, got {mem_bw}")
    if llc is None:
        return None
    kib = parse_size_kib(llc)
    if kib < 1:
        raise InvalidInputError(f"--llc must be 1KiB or more, got {llc!r}")
    return kib


def slice_changes(llc: str | None, llc_ways: str | None, mem_bw: str | None) -> dict[str, int | None]:
    """``tenant update``'s ``--llc SIZE|none``, ``--llc-ways N|none``, ``--mem-bw PCT|none`` as the tenant
    fields they change (a cache slice given one way clears the other; none clears it).

    Raises:
        InvalidInputError: a bad value (as :func:`parse_slice` says), or --llc and --llc-ways both.
    """
    def number(text: str, flag: str) -> int:
        if not text.isdecimal() or len(text) > 9:
            raise InvalidInputError(f"bad {flag} {text!r}: use a whole number, or none")
        return int(text)

    cleared = {v.strip().lower() for v in (llc, llc_ways) if v is not None} == {"none"}
    changes: dict[str, int | None] = {}
    if cleared:
        changes.update(llc_kib=None, llc_ways=None)
    elif llc is not None or llc_ways is not None:
        ways = number(llc_ways.strip(), "--llc-ways") if llc_ways is not None else None
        changes.update(llc_kib=parse_slice(llc, ways, None), llc_ways=ways)
    if mem_bw is not None:
        cap = None if mem_bw.strip().lower() == "none" else number(mem_bw.strip(), "--mem-bw")
        parse_slice(None, None, cap)
        changes["mem_bw"] = cap
    return changes
