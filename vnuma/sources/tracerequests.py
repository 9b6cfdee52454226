"""A trace's requests (``requests[i]`` of ``numa-placement-trace`` version 1): :class:`TraceRequest` and its
parser (format: ``docs/traces.md``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.model import ColdTier, CpuPolicy, NicFunction, ThreadPolicy
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.placement.request import MAX_NICS, parse_partition
from vnuma.sources.tracekeys import At
from vnuma.topology.pcie import Level

PAGE_SIZES = (4, 2048, 1048576)
PER_GPU = "per-gpu"


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One VM request of a trace, as written there (memory in MiB)."""

    tenant: str
    name: str
    vcpus: int
    memory_mib: int
    numa_nodes: int | None
    cpu_policy: CpuPolicy
    thread_policy: ThreadPolicy
    page_size_kib: int | None
    gpus: int
    cold_memory_mib: int = 0
    """Memory of the cold tier (a guest cell with no vCPUs on a host memory-only cell); 0: none."""
    cold_tier: ColdTier = ColdTier.ANY
    """Which memory-only cells may back it: ``any`` capacity tier, or ``cxl`` cells only."""
    nics: int = 0
    """NICs asked as a count (0 with ``nics_per_gpu``, or when none are asked)."""
    nics_per_gpu: bool = False
    """One NIC per GPU (``nics: "per-gpu"``)."""
    nic_affinity: Level = Level.PXB
    """The worst PCIe level a NIC may be at from its GPU (``pix`` .. ``sys``)."""
    nic_function: NicFunction = NicFunction.PF
    """Whole NICs (``pf``) or SR-IOV virtual functions (``vf``)."""
    partition: PartitionAsk | None = None
    """vGPU or MIG instances instead of whole GPUs (``vgpu``/``mig``); None: none."""
    dedicated_vcpus: frozenset[int] = frozenset()
    """Under cpu policy ``mixed``: the vCPUs pinned 1:1 (``dedicated_vcpus``, a list of ids; absent: none)."""

    @property
    def wants_nics(self) -> bool:
        return self.nics_per_gpu or self.nics > 0



def parse_request(raw: object, at: At) -> TraceRequest:
    if not isinstance(raw, dict):
        raise at.fail("expected an object")
    name = at.get(raw, "name", str)
    at = at.noting(f"request {name!r}")  # every later problem names the request
    page = at.get(raw, "page_size_kib", int, nullable=True)
    if page is not None and page not in PAGE_SIZES:
        raise at.key("page_size_kib").fail(f"expected null or one of {', '.join(map(str, PAGE_SIZES))}")
    # Both optional (absent: no cold tier); when present, of the right type (null is refused).
    cold = at.count(raw, "cold_memory_mib", 0) if "cold_memory_mib" in raw else 0
    tier = at.get(raw, "cold_tier", str) if "cold_tier" in raw else None
    gpus = at.count(raw, "gpus", 0)
    # NICs: all three optional (absent: none, pxb, pf); when present, of the right type (null is refused).
    nics, per_gpu = _nics(raw, at)
    affinity = at.get(raw, "nic_affinity", str) if "nic_affinity" in raw else None
    function = at.get(raw, "nic_function", str) if "nic_function" in raw else None
    if (per_gpu or nics) and not gpus:
        raise at.key("nics").fail("NICs are placed within a PCIe level of the VM's GPUs: the request asks for no GPU")
    partition = _partition(raw, at, gpus)
    return TraceRequest(
        tenant=at.get(raw, "tenant", str),
        name=name,
        vcpus=at.count(raw, "vcpus", 1),
        memory_mib=at.count(raw, "memory_mib", 1),
        numa_nodes=at.count(raw, "numa_nodes", 1, nullable=True),
        cpu_policy=_enum(CpuPolicy, at.get(raw, "cpu_policy", str), at.key("cpu_policy")),
        thread_policy=_enum(ThreadPolicy, at.get(raw, "thread_policy", str), at.key("thread_policy")),
        page_size_kib=page,
        gpus=gpus,
        cold_memory_mib=cold,
        cold_tier=ColdTier.ANY if tier is None else _enum(ColdTier, tier, at.key("cold_tier")),
        nics=nics,
        nics_per_gpu=per_gpu,
        nic_affinity=Level.PXB if affinity is None else _level(affinity, at.key("nic_affinity")),
        nic_function=NicFunction.PF if function is None else _enum(NicFunction, function, at.key("nic_function")),
        partition=partition,
        dedicated_vcpus=_vcpu_ids(raw, at),
    )


def _vcpu_ids(raw: Mapping[str, Any], at: At) -> frozenset[int]:
    """``dedicated_vcpus``: a list of vCPU ids (absent: none; whether they suit the policy is the engine's check)."""
    if "dedicated_vcpus" not in raw:
        return frozenset()
    value = raw["dedicated_vcpus"]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise at.key("dedicated_vcpus").fail("expected a list of vCPU ids")
    return frozenset(value)


def _partition(raw: Mapping[str, Any], at: At, gpus: int) -> PartitionAsk | None:
    """``vgpu`` or ``mig`` (``NAME[:COUNT]``); absent: None."""
    asked = [k for k in PartitionKind if k.value in raw]
    if not asked:
        return None
    if len(asked) > 1 or gpus:
        raise at.fail("a request asks whole GPUs (gpus), vgpu or mig: one of them")
    kind = asked[0]
    try:
        return parse_partition(kind, at.get(raw, kind.value, str))
    except InvalidInputError as err:
        raise at.key(kind.value).fail(str(err)) from None


def _nics(raw: Mapping[str, Any], at: At) -> tuple[int, bool]:
    """``nics``: (count, per GPU); absent: (0, False)."""
    if "nics" not in raw:
        return 0, False
    value = raw["nics"]
    if value == PER_GPU:
        return 0, True
    if type(value) is not int:
        got = "null" if value is None else repr(value) if isinstance(value, str) else type(value).__name__
        raise at.key("nics").fail(f"expected an integer or {PER_GPU!r}, got {got}")
    if not 0 <= value <= MAX_NICS:
        raise at.key("nics").fail(f"must be 0 to {MAX_NICS}, got {value}")
    return value, False


def _level(value: str, at: At) -> Level:
    """A PCIe level as the format writes it: lowercase (``pix`` .. ``sys``)."""
    names = [level.value.lower() for level in Level]
    if value not in names:
        raise at.fail(f"expected one of {', '.join(names)}, got {value!r}")
    return Level(value.upper())


def _enum(
    kind: type[CpuPolicy] | type[ThreadPolicy] | type[ColdTier] | type[NicFunction], value: str, at: At
) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise at.fail(f"expected one of {', '.join(k.value for k in kind)}, got {value!r}") from None
