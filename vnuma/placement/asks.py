"""A VM's request as an operator asks for it, declared once: :data:`ASKS`.

Pure: no I/O. Every way of writing a request is derived from this table
instead of listing its options again: ``vnuma place``'s options
(:mod:`vnuma.cli.asking`), the body of ``POST /v1/place`` and its OpenAPI
schema (:mod:`vnuma.api.bodies`), the ``--server`` client's body, a trace's
request keys (:mod:`vnuma.sources.tracerequests` and ``trace export``), the
``"request"`` every placement keeps (:func:`as_asked`), and the refusal
memory's key (:func:`shape_key`).

An :class:`Ask` is one option: its ``name`` (the body member and the key of
a stored request; the flag is ``--`` and the name with dashes), the
:class:`Form` its value is written in, its default and help, the rule that
reads it, and the :class:`~vnuma.placement.model.VmRequest` fields it sets
(``read``: the value as written -> those fields) and is written back from
(``write``). :func:`request_from` reads a whole request (and checks what no
single option can: sums of per-cell lists, options that need or exclude
each other); :func:`as_asked` writes one; the two are inverse on every
request :func:`request_from` makes. A request field no option sets is the
engine's own (:data:`INTERNAL`: the tenant's isolation, cells and hosts a
move avoids).

Adding an option: one :class:`Ask` here, the rule that reads its field, its
render block if it has one, and tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from enum import Enum, StrEnum
from operator import attrgetter
from typing import Any

from vnuma.errors import InvalidInputError, OptionsError
from vnuma.placement.altmodel import SIZE_KEYS, parse_alternatives, written
from vnuma.placement.asktexts import (
    PAGE_WORDS,
    check_groups,
    int_list,
    memory_modes,
    numa_nodes,
    page_size,
    partition,
    sizes_list,
    vcpu_list,
)
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
from vnuma.placement.partitionmodel import PartitionKind
from vnuma.topology import format_cpuset, parse_size_kib
from vnuma.topology.pcie import Level
from vnuma.topology.sizes import PAGE_SIZE_CHOICES, exact_size


class Form(StrEnum):
    """How an option's value is written (on the command line, in a body, in a stored request).

    ``count``: a whole number, 0 or more; ``number``: a whole number or null; ``text``: a string or null;
    ``choice``: one of :attr:`Ask.choices`' words (null too when the default is null); ``nodes``:
    ``auto`` or a whole number; ``nics``: a whole number, ``per-gpu`` or null; ``alternatives``: a list of
    partial requests (:mod:`vnuma.placement.altmodel`), or null."""

    COUNT = "count"
    NUMBER = "number"
    TEXT = "text"
    CHOICE = "choice"
    NODES = "nodes"
    NICS = "nics"
    ALTERNATIVES = "alternatives"


Read = Callable[[Any], Mapping[str, Any]]
Write = Callable[[VmRequest], Any]


@dataclass(frozen=True, slots=True)
class Ask:
    """One option of a VM's request (see the module doc)."""

    name: str
    form: Form
    help: str
    rule: str
    """The check, filter or module that reads it (``--explain``'s check names, or a module)."""
    read: Read
    write: Write
    default: Any = None
    metavar: str | None = None
    choices: type[Enum] | tuple[str, ...] | None = None
    trace: str | None = None
    """The trace's key for it when not :attr:`name` (the trace format's own ``memory_mib``...)."""
    cli: str | None = None
    """Its command-line flag when not ``--`` and the name with dashes."""

    @property
    def flag(self) -> str:
        return self.cli or "--" + self.name.replace("_", "-")

    @property
    def words(self) -> tuple[str, ...]:
        """A choice's words, as written."""
        if isinstance(self.choices, tuple):
            return self.choices
        assert self.choices is not None
        return tuple(str(c.value) for c in self.choices)


def _field(name: str, convert: Callable[[Any], Any] = lambda v: v) -> Read:
    return lambda value: {name: convert(value)}


def _given(name: str, convert: Callable[[Any], Any]) -> Read:
    """A field set from a value when given (None leaves the field's default)."""
    return lambda value: {} if value is None else {name: convert(value)}


def _choice(name: str, kind: type[Enum]) -> Read:
    def read(value: Any) -> Mapping[str, Any]:
        try:
            return {name: None if value is None else kind(value)}
        except ValueError:
            words = ", ".join(str(k.value) for k in kind)
            raise InvalidInputError(f"bad {name.replace('_', '-')} {value!r}: use one of {words}") from None
    return read


def _value(attr: str) -> Write:
    get = attrgetter(attr)
    return lambda req: (v.value if isinstance(v := get(req), Enum) else v)


def _size(attr: str) -> Write:
    get = attrgetter(attr)
    return lambda req: None if not (v := get(req)) else exact_size(v)


def _listed(attr: str, each: Callable[[int], str] = str) -> Write:
    get = attrgetter(attr)
    return lambda req: None if (v := get(req)) is None else ",".join(each(x) for x in v)


def _nics(value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if value == "per-gpu" or (isinstance(value, str) and value.strip().lower() == "per-gpu"):
        return {"nics_per_gpu": True}
    if isinstance(value, str) and not value.strip().isdecimal():
        raise OptionsError(f"bad --nics: {value!r} is not a count or per-gpu")
    return {"nics": int(value)}


def _level(value: Any) -> Mapping[str, Any]:
    try:
        return {"nic_affinity": Level(str(value).strip().upper())}
    except ValueError:
        raise OptionsError(f"bad --nic-affinity: {value!r} is not one of pix, pxb, phb, node, sys") from None


def _partition_of(kind: PartitionKind) -> Read:
    return lambda value: {} if value is None else {"partition": partition(kind, value)}


def _partition_text(kind: PartitionKind) -> Write:
    def write(req: VmRequest) -> str | None:
        p = req.partition
        return None if p is None or p.kind is not kind else f"{p.name}:{p.count}"
    return write


_LEVELS = tuple(level.value.lower() for level in Level)

ASKS: tuple[Ask, ...] = (
    Ask("tenant", Form.TEXT, "The tenant that owns the VM.", "quota", _field("tenant"), _value("tenant")),
    Ask("vcpus", Form.NUMBER, "Guest vCPUs (default: GPUs' share).", "cell-cpus", _field("vcpus"),
        _value("vcpus"), metavar="N"),
    Ask("memory", Form.TEXT, "Guest memory, e.g. 64GiB (default: GPUs' share).", "cell-pages",
        _field("memory_kib", lambda v: None if v is None else parse_size_kib(v)), _size("memory_kib"),
        metavar="SIZE", trace="memory_mib"),
    Ask("gpus", Form.COUNT, "GPUs to pass through.", "gpus", _field("gpus", int), _value("gpus"), default=0,
        metavar="N"),
    Ask("vgpu", Form.TEXT, "N vGPU instances (mediated devices) of a vGPU type.", "partitions",
        _partition_of(PartitionKind.VGPU), _partition_text(PartitionKind.VGPU), metavar="TYPE[:N]"),
    Ask("mig", Form.TEXT, "N MIG instances of a profile, e.g. 3g.40gb:2.", "partitions",
        _partition_of(PartitionKind.MIG), _partition_text(PartitionKind.MIG), metavar="PROFILE[:N]"),
    Ask("name", Form.TEXT, "VM name (default TENANT-vmN).", "name", _field("name", lambda v: v or ""),
        lambda req: req.name or None, metavar="NAME"),
    Ask("numa_nodes", Form.NODES, "Guest NUMA nodes: N or auto.", "numa-nodes", _field("numa_nodes", numa_nodes),
        lambda req: "auto" if req.numa_nodes is None else req.numa_nodes, default="auto", metavar="N|auto"),
    Ask("cpu_policy", Form.CHOICE, "Pin each vCPU to a pCPU of its own (dedicated), let them float (shared), "
        "or pin --dedicated-vcpus and float the others (mixed).", "cell-cpus", _choice("cpu_policy", CpuPolicy),
        _value("cpu_policy"), default=CpuPolicy.DEDICATED, choices=CpuPolicy),
    Ask("dedicated_vcpus", Form.TEXT, "With --cpu-policy mixed: the vCPUs pinned 1:1, e.g. 0-3,6 (the others "
        "float).", "mixed", _given("dedicated_vcpus", vcpu_list),
        lambda req: format_cpuset(req.dedicated_vcpus) if req.dedicated_vcpus else None, metavar="LIST"),
    Ask("thread_policy", Form.CHOICE, "How dedicated vCPUs use SMT siblings: sibling pairs where they can "
        "(prefer), a whole core each (isolate), or sibling pairs only (require).", "cell-cpus",
        _choice("thread_policy", ThreadPolicy), _value("thread_policy"), default=ThreadPolicy.PREFER,
        choices=ThreadPolicy),
    Ask("page_size", Form.TEXT, f"{PAGE_SIZE_CHOICES} [default: config page_size, VNUMA_PAGE_SIZE, else large].",
        "page-size", _given("page_size_kib", page_size),
        lambda req: PAGE_WORDS.get(req.page_size_kib, f"{req.page_size_kib}K"),
        metavar="SIZE", trace="page_size_kib"),
    Ask("gpu_affinity", Form.CHOICE, "Each GPU on one of the VM's cells (required), there when it can be "
        "(preferred), or on the socket of one (socket).", "gpus", _choice("gpu_affinity", GpuAffinity),
        _value("gpu_affinity"), default=GpuAffinity.REQUIRED, choices=GpuAffinity),
    Ask("nics", Form.NICS, "NICs to pass through beside the GPUs: a count, or per-gpu.", "nics", _nics,
        lambda req: "per-gpu" if req.nics_per_gpu else (req.nics or None), metavar="N|per-gpu"),
    Ask("nic_affinity", Form.CHOICE, "Farthest PCIe level between a GPU and its NIC: pix, pxb (default), phb, "
        "node or sys.", "nics", _level, lambda req: req.nic_affinity.value.lower(), default="pxb",
        metavar="LEVEL", choices=_LEVELS),
    Ask("nic_function", Form.CHOICE, "NICs as whole physical functions, or as SR-IOV virtual functions.", "nics",
        _choice("nic_function", NicFunction), _value("nic_function"), default=NicFunction.PF, choices=NicFunction),
    Ask("emulator_threads", Form.CHOICE, "Emulator threads over the VM's pCPUs (share), or on a pCPU of their "
        "own (isolate).", "cell-cpus", _choice("emulator_threads", EmulatorThreads), _value("emulator_threads"),
        default=EmulatorThreads.SHARE, choices=EmulatorThreads),
    Ask("memory_mode", Form.CHOICE, "How every guest cell's memory binds to host memory.", "memory-mode",
        lambda v: {"memory_modes": memory_modes(str(v))[:1]},
        lambda req: req.memory_modes[0].value if len(req.memory_modes) == 1 else MemoryMode.STRICT.value,
        default=MemoryMode.STRICT, choices=MemoryMode),
    Ask("cell_memory_mode", Form.TEXT, "One memory mode per guest cell, e.g. strict,interleave (with "
        "--numa-nodes N).", "memory-mode", _given("memory_modes", memory_modes),
        lambda req: ",".join(m.value for m in req.memory_modes) if len(req.memory_modes) > 1 else None,
        metavar="LIST"),
    Ask("cell_vcpus", Form.TEXT, "vCPUs of each guest cell, e.g. 12,4.", "numa-nodes",
        _given("cell_vcpus", lambda v: int_list(v, "--cell-vcpus")), _listed("cell_vcpus"), metavar="LIST"),
    Ask("cell_memory", Form.TEXT, "Memory of each guest cell, e.g. 96GiB,32GiB.", "numa-nodes",
        _given("cell_memory_kib", sizes_list),
        _listed("cell_memory_kib", exact_size), metavar="LIST"),
    Ask("cell_gpus", Form.TEXT, "GPUs of each guest cell, e.g. 2,0.", "gpus",
        _given("cell_gpus", lambda v: int_list(v, "--cell-gpus")), _listed("cell_gpus"), metavar="LIST"),
    Ask("iothreads", Form.COUNT, "I/O threads for the domain (0-64).", "iothreads", _field("iothreads", int),
        _value("iothreads"), default=0, metavar="N"),
    Ask("iothreads_policy", Form.CHOICE, "Pin I/O threads with the emulator, or beside the first device.",
        "iothreads", _choice("iothread_policy", IoThreadPolicy), _value("iothread_policy"),
        default=IoThreadPolicy.EMULATOR, choices=IoThreadPolicy),
    Ask("host", Form.TEXT, "Only consider this host.", "host", _field("host"), _value("host"), metavar="HOST"),
    Ask("llc", Form.TEXT, "L3 cache slice on each L3 domain its vCPUs use, e.g. 4MiB (rounded up to whole ways "
        "of each host's cache).", "resctrl", _given("llc_kib", parse_size_kib), _size("llc_kib"), metavar="SIZE"),
    Ask("llc_ways", Form.NUMBER, "The L3 slice as a number of cache ways.", "resctrl", _field("llc_ways"),
        _value("llc_ways"), metavar="N"),
    Ask("mem_bw", Form.NUMBER, "Memory-bandwidth cap on each of those L3 domains (MBA, %).", "resctrl",
        _field("mem_bw"), _value("mem_bw"), metavar="PCT"),
    Ask("cold_memory", Form.TEXT, "One more guest cell with this memory and no vCPUs, on a host memory-only cell "
        "(CXL, a capacity tier).", "cold-tier", _given("cold_memory_kib", parse_size_kib),
        _size("cold_memory_kib"), metavar="SIZE", trace="cold_memory_mib"),
    Ask("cold_tier", Form.CHOICE, "Which memory-only cells may back --cold-memory.", "cold-tier",
        _choice("cold_tier", ColdTier), _value("cold_tier"), default=ColdTier.ANY, choices=ColdTier),
    Ask("group", Form.TEXT, "Replica group the VM belongs to.", "group", _field("group"), _value("group"),
        metavar="GROUP"),
    Ask("anti_affinity", Form.CHOICE, "Keep the group's VMs on different hosts or host cells.", "group",
        _choice("anti_affinity", AntiAffinity), _value("anti_affinity"), choices=AntiAffinity),
    Ask("affinity", Form.CHOICE, "Keep the group's VMs together on one host.", "group",
        _choice("affinity", Affinity), _value("affinity"), choices=Affinity),
    Ask("alternatives", Form.ALTERNATIVES, "What to take instead when the request fits on no host, e.g. "
        "mig=3g.40gb:2 or gpus=1,vcpus=8 (devices: gpus, mig, vgpu, nics; and vcpus, memory); repeat it for "
        "more, tried in order.", "alternatives", lambda v: {"alternatives": parse_alternatives(v)},
        lambda req: written(req.alternatives), metavar="OPTION=VALUE[,...]", cli="--or"),
)
"""Every option of a VM's request, in ``vnuma place --help``'s order."""

BY_NAME: dict[str, Ask] = {a.name: a for a in ASKS}

INTERNAL = frozenset({"isolation", "avoid_hosts", "avoid_cells"})
"""Request fields no option sets: the tenant's isolation (copied in by the service), what a move avoids.
Every other field is some option's (the round-trip property test draws them all)."""

SIZE_FIELDS = ("name", "vcpus", "memory_kib", "gpus")
"""The fields that make two requests of one shape different sizes (the refusal memory compares them)."""


def request_from(values: Mapping[str, Any], *, page_size_default: str = "large") -> VmRequest:
    """The request the option ``values`` (by :attr:`Ask.name`; absent: the default) ask for.

    ``page_size_default``: the page size when none is given (the configured default). Per-cell sizes
    give the guest cell count when ``numa_nodes`` is auto, and the totals when they are not given.

    Raises:
        InvalidInputError: an unknown option, a value an option cannot read, options that need or exclude
            each other (see :func:`vnuma.placement.asktexts.check_groups`); whether the numbers make a VM
            at all is the engine's request check.
    """
    unknown = sorted(set(values) - BY_NAME.keys())
    if unknown:
        raise InvalidInputError(f"unknown request option(s): {', '.join(unknown)}")
    given = {k: _plain(BY_NAME[k], v) for k, v in values.items() if v is not None}
    check_groups(given)
    fields_: dict[str, Any] = {"name": "", "tenant": None, "vcpus": None, "memory_kib": None}
    for ask in ASKS:
        value = given.get(ask.name, _plain(ask, ask.default))
        if ask.name == "page_size" and value is None:
            value = page_size_default
        fields_.update(ask.read(value))
    req = _completed(VmRequest(**fields_))
    if not req.alternatives:
        return req
    sizes = {k: BY_NAME[k].write(req) for k in SIZE_KEYS}  # an alternative keeps the size asked, unless it gives one
    return replace(req, alternatives=tuple(a.with_sizes(sizes) for a in req.alternatives))


def _plain(ask: Ask, value: Any) -> Any:
    """A value as an option writes it: a choice's word, a number given as text (a domain's metadata) as one."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, str) and ask.form in (Form.COUNT, Form.NUMBER):
        return _whole(ask, value)
    return value


def _whole(ask: Ask, text: str) -> int:
    """A number written as text (a domain's metadata, a form): a whole number, or what to write instead."""
    if not text.strip().lstrip("-").isdecimal() or len(text.strip()) > 12:
        raise InvalidInputError(f"bad {ask.flag} {text!r}: use a whole number")
    return int(text)


def _completed(req: VmRequest) -> VmRequest:
    """Totals and the guest cell count taken from per-cell lists where they were not given."""
    changes: dict[str, Any] = {}
    if req.numa_nodes is None and req.cell_vcpus is not None:
        changes["numa_nodes"] = len(req.cell_vcpus)
    if req.vcpus is None and req.cell_vcpus is not None:
        changes["vcpus"] = sum(req.cell_vcpus)
    if req.memory_kib is None and req.cell_memory_kib:
        changes["memory_kib"] = sum(req.cell_memory_kib)
    if not req.gpus and req.cell_gpus is not None:
        changes["gpus"] = sum(req.cell_gpus)
    return replace(req, **changes) if changes else req


def as_asked(req: VmRequest) -> dict[str, Any]:
    """The request as its options write it: every option by name (JSON-ready; what :func:`request_from`
    reads back into ``req``, the engine's own fields apart)."""
    return {ask.name: ask.write(req) for ask in ASKS}


def written_default(ask: Ask) -> Any:
    """``ask``'s default as :attr:`Ask.write` writes values (a choice's word)."""
    return ask.default.value if isinstance(ask.default, Enum) else ask.default


def asked_changes(req: VmRequest, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The options of ``req`` that differ from their default, and those named in ``keep`` whatever they are:
    what :func:`request_from` needs to read ``req`` back."""
    written = as_asked(req)
    return {k: v for k, v in written.items() if k in keep or v != written_default(BY_NAME[k])}


_SHAPE = attrgetter(*sorted({f.name for f in fields(VmRequest)} - set(SIZE_FIELDS)))


def shape_key(req: VmRequest) -> tuple[Any, ...]:
    """Every field of ``req`` but its name and sizes: two requests with one key differ in size only."""
    return _SHAPE(req)  # type: ignore[no-any-return]
