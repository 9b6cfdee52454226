"""The view model a domain template renders: every value decided and formatted here.

Pure: no I/O. :func:`build_view` turns a host and a placement into strings
(cpusets, KiB, nodesets, controller indexes) so templates hold no
arithmetic or policy; an operator template sees exactly the same names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from vnuma.errors import ConfigError, RenderError
from vnuma.placement.model import MAX_IOTHREADS, CellAssignment, CpuPolicy, MemoryMode, Placement, mixed_split
from vnuma.placement.pins import iothread_pins, vcpu_pins
from vnuma.render.cputopology import Topology, guest_topology, host_sockets, topology_of
from vnuma.render.distances import mirrored
from vnuma.render.gpumemory import GpuNode, gpu_nodes, tied
from vnuma.render.guestarch import guest_arch
from vnuma.render.guestview import GuestView, guest_view, hint_string
from vnuma.render.metadata import VNUMA_NS
from vnuma.render.metaview import MetaCell, MetaDevice, meta_cell, meta_devices, meta_request
from vnuma.render.pcie import PcieLayout, layout_devices
from vnuma.render.tiers import Interconnect, interconnects
from vnuma.render.tune import Tune, tune_of
from vnuma.topology import Host, format_cpuset

MEMNODE_MODES = ("strict", "restrictive", "preferred", "interleave")
OVERRIDE_MODES = ("strict", "restrictive", "preferred")
"""What ``--memnode-mode`` may impose: modes that keep each cell's pages where its claims are."""
DOMAIN_TYPES = ("kvm", "qemu")
# QEMU cannot pass the host CPU through without KVM; under TCG the closest
# model is 'maximum' (-cpu max), supported since libvirt 7.9.
_CPU_MODE = {"kvm": "host-passthrough", "qemu": "maximum"}
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, VNUMA_NS)


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Rendering choices that are not part of the placement.

    ``memnode_mode`` overrides the memory mode of every guest cell, and
    ``iothreads`` the VM's I/O thread count; None renders the placement's
    (chosen at ``vnuma place``). ``arch``/``machine``: None follows the host (:mod:`vnuma.render.guestarch`).
    """

    memnode_mode: str | None = None
    iothreads: int | None = None
    machine: str | None = None
    domain_type: str = "kvm"
    arch: str | None = None
    uuid: str | None = None
    emulator: str | None = None
    sockets: int | None = None
    cores: int | None = None
    threads: int | None = None
    """``sockets``/``cores``/``threads``: the guest CPU topology the operator asks for instead of the
    one that follows the host (:func:`vnuma.render.cputopology.topology_of`)."""
    guest_hints: bool = False
    """Give the guest its view (:mod:`vnuma.render.guestview`) as an SMBIOS OEM string."""


@dataclass(frozen=True, slots=True)
class Pin:
    """A ``<vcpupin>``/``<iothreadpin>``: ``id`` is the vCPU or iothread id."""

    id: str
    cpuset: str


@dataclass(frozen=True, slots=True)
class MemNode:
    """A ``<memnode cellid mode nodeset>``."""

    cellid: str
    mode: str
    nodeset: str


@dataclass(frozen=True, slots=True)
class Sibling:
    """One ``<sibling id value>`` of a guest cell's ``<distances>``."""

    id: str
    value: str


@dataclass(frozen=True, slots=True)
class GuestCell:
    """A ``<cpu><numa><cell>``: ``cpus`` empty when memory-only, ``mem_access`` set when hugepage-backed."""

    id: str
    cpus: str
    memory_kib: str
    mem_access: str
    distances: tuple[Sibling, ...]


@dataclass(frozen=True, slots=True)
class Page:
    """A ``<memoryBacking><hugepages><page size nodeset>``: guest cells backed by ``size_kib`` pages."""

    size_kib: str
    nodeset: str


@dataclass(frozen=True, slots=True)
class DomainView:
    """Everything ``domain.xml.j2`` writes, as strings, tuples and flags."""

    name: str
    uuid: str
    domain_type: str
    arch: str
    machine: str
    firmware: str
    apic: bool
    gic_version: str
    """``firmware``, ``apic``, ``gic_version``: see :class:`vnuma.render.guestarch.GuestArch`."""
    emulator: str
    tenant: str
    vm: str
    host: str
    namespace: str
    cpu_policy: str
    thread_policy: str
    numa_nodes: str
    memory_kib: str
    vcpus: str
    vcpupins: tuple[Pin, ...]
    emulator_cpuset: str
    iothreads: str
    iothreadpins: tuple[Pin, ...]
    memory_mode: str
    memory_nodeset: str
    memnodes: tuple[MemNode, ...]
    cpu_mode: str
    topology: Topology
    cells: tuple[GuestCell, ...]
    pages: tuple[Page, ...]
    pcie: PcieLayout
    meta_emulator_pcpus: str
    meta_cells: tuple[MetaCell, ...]
    meta_devices: tuple[MetaDevice, ...]
    guest: GuestView
    """What the guest sees (``vnuma vm guest-view``); templates may use it too."""
    guest_hints: str
    """The SMBIOS OEM string carrying :attr:`guest` (``--guest-hints``), or "" for none."""
    tune: Tune
    """Its cache slice and bandwidth cap (:mod:`vnuma.render.tune`)."""
    interconnects: tuple[Interconnect, ...] = ()
    """The guest HMAT (:mod:`vnuma.render.tiers`); empty when the host publishes none."""
    meta_cold: tuple[MetaCell, ...] = ()  # the cold guest cell in vnuma's metadata (none or one)
    meta_request: tuple[tuple[str, str], ...] = ()
    """The request the VM keeps, as asked: (option with dashes, value as text) for each option that differs
    from its default, its tenant, name and size whatever they are (:func:`vnuma.placement.asks.asked_changes`);
    none for a placement that keeps none."""
    meta_dedicated_vcpus: str = ""
    """A ``mixed`` VM's dedicated vCPUs in vnuma's metadata ("" for the other policies)."""


def domain_uuid(placement: Placement) -> str:
    """The deterministic domain UUID of a placement: uuid5 of tenant and VM.

    Not of the host: a VM keeps its identity wherever it moves, and libvirt
    migrates a domain only onto a definition with the same UUID. A domain
    libvirt already holds keeps the UUID it has (the services pass it as
    ``RenderOptions.uuid``), so definitions made before stay valid.
    """
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{placement.tenant}/{placement.vm}"))


def build_view(host: Host, placement: Placement, options: RenderOptions) -> DomainView:
    """Prepare the view model of ``placement`` on ``host``.

    Raises:
        ConfigError: an unknown memnode mode or domain type, negative iothreads.
        RenderError: a placement that cannot be rendered (no vCPUs, a cell
            whose vCPU and pCPU counts differ, a host cell the host lacks,
            devices that do not fit the guest's PCIe layout, an arch it renders no domain for).
    """
    _check_options(options)
    machine = guest_arch(host.name, host.arch, options.arch, options.machine)
    cells = tuple(sorted(placement.cells, key=lambda c: c.guest_cell))
    _check_placement(host, placement, cells)
    every = cells + placement.cold  # the cold cell, when there is one, is the last guest cell
    if options.memnode_mode is not None and MemoryMode.INTERLEAVE in placement.memory_modes:
        raise ConfigError(
            f"VM {placement.vm!r} has interleaved memory, claimed on every one of its host cells: "
            f"--memnode-mode {options.memnode_mode} would take it from one cell each; leave the override out"
        )
    emulator = placement.emulator_pcpus or tuple(p for c in cells for p in c.pcpus)
    emulator_cpuset = format_cpuset(emulator)
    guest_ids = frozenset(c.guest_cell for c in cells)
    memnodes = _memnodes(cells, options.memnode_mode)
    memnodes += tuple(
        MemNode(str(c.guest_cell), "restrictive" if memnodes[0].mode == "restrictive" else "strict", str(c.host_cell))
        for c in placement.cold
    )
    iothreads = placement.iothreads if options.iothreads is None else options.iothreads
    iothread_cpuset = format_cpuset(iothread_pins(placement))
    gpu_cells = gpu_nodes(host, placement)
    distances = mirrored(host, [*((c.guest_cell, c.host_cell) for c in every),
                                *((g.guest_cell, g.host_cell) for g in gpu_cells)])
    vfs = frozenset(d.address for d in host.devices if d.pf is not None)
    pcie = tied(layout_devices(placement.vm, placement.devices, guest_ids, machine.machine, vfs,
                               {d.address: d for d in host.devices}, placement.partitions), gpu_cells)
    guest = guest_view(placement, every, distances, pcie, gpu_cells)
    return DomainView(
        name=placement.vm,
        uuid=options.uuid or domain_uuid(placement),
        domain_type=options.domain_type,
        arch=machine.arch,
        machine=machine.machine,
        firmware=machine.firmware,
        apic=machine.apic,
        gic_version=machine.gic_version,
        emulator=options.emulator or "",
        tenant=placement.tenant,
        vm=placement.vm,
        host=placement.host,
        namespace=VNUMA_NS,
        cpu_policy=str(placement.cpu_policy),
        thread_policy=str(placement.thread_policy),
        numa_nodes="auto" if placement.numa_nodes is None else str(placement.numa_nodes),
        memory_kib=str(placement.memory_kib + placement.cold_kib),
        vcpus=str(placement.vcpus),
        vcpupins=_vcpupins(placement),
        emulator_cpuset=emulator_cpuset,
        iothreads=str(iothreads),
        iothreadpins=tuple(Pin(str(i), iothread_cpuset) for i in range(1, iothreads + 1)),
        # libvirt requires 'restrictive' on <memory> exactly when memnodes use it.
        memory_mode="restrictive" if memnodes[0].mode == "restrictive" else "strict",
        memory_nodeset=format_cpuset(c.host_cell for c in every),
        memnodes=memnodes,
        cpu_mode=_CPU_MODE[options.domain_type],
        topology=topology_of(
            guest_topology(placement.threads_per_core, tuple(len(c.vcpus) for c in cells), host_sockets(host, cells)),
            placement.vcpus, sockets=options.sockets, cores=options.cores, threads=options.threads,
        ),
        cells=_guest_cells(every, distances, host.base_page_kib) + _gpu_cells(gpu_cells, distances),
        pages=_pages(every, host.base_page_kib),
        pcie=pcie,
        meta_emulator_pcpus=format_cpuset(placement.emulator_pcpus),
        meta_dedicated_vcpus=format_cpuset(placement.dedicated_vcpus),
        meta_cells=tuple(meta_cell(c) for c in cells),
        meta_devices=meta_devices(placement, {h.address: h.guest_address for h in pcie.hostdevs}),
        guest=guest,
        guest_hints=hint_string(guest) if options.guest_hints else "",
        tune=tune_of(host, placement),
        interconnects=interconnects(host, every),
        meta_cold=tuple(meta_cell(c) for c in placement.cold),
        meta_request=meta_request(placement),
    )


def effective_memory_modes(placement: Placement, memnode_mode: str | None) -> tuple[str, ...]:
    """Each guest cell's memory mode as rendered: ``memnode_mode`` for all when given, else the placement's."""
    return tuple(memnode_mode or str(mode) for mode in placement.memory_modes)


def _memnodes(cells: tuple[CellAssignment, ...], override: str | None) -> tuple[MemNode, ...]:
    """One ``<memnode>`` per guest cell: its host cell, or every host cell of the VM when interleaved."""
    every = format_cpuset(c.host_cell for c in cells)
    out = []
    for c in cells:
        mode = override or str(c.memory_mode)
        out.append(MemNode(str(c.guest_cell), mode, every if mode == "interleave" else str(c.host_cell)))
    return tuple(out)


def _check_options(options: RenderOptions) -> None:
    if options.memnode_mode is not None and options.memnode_mode not in OVERRIDE_MODES:
        raise ConfigError(
            f"memnode mode override {options.memnode_mode!r}: use one of {', '.join(OVERRIDE_MODES)} "
            "(interleaved memory is claimed on every cell of the VM: place it with --memory-mode interleave)"
        )
    if options.domain_type not in DOMAIN_TYPES:
        raise ConfigError(f"unknown domain type {options.domain_type!r}; use one of {', '.join(DOMAIN_TYPES)}")
    if options.iothreads is not None and not 0 <= options.iothreads <= MAX_IOTHREADS:
        raise ConfigError(f"iothreads must be 0 to {MAX_IOTHREADS}, not {options.iothreads}")


def _check_placement(host: Host, placement: Placement, cells: tuple[CellAssignment, ...]) -> None:
    where = f"placement of VM {placement.vm!r} on host {placement.host!r}"
    if host.name != placement.host:
        raise RenderError(f"{where}: rendered against host {host.name!r}")
    if placement.vcpus == 0:
        raise RenderError(f"{where}: the VM has no vCPUs")
    host_cells = {c.id for c in host.cells}
    guest_ids = [c.guest_cell for c in cells]
    if len(set(guest_ids)) != len(guest_ids):
        raise RenderError(f"{where}: guest cell ids repeat: {guest_ids}")
    for cell in cells:
        if cell.host_cell not in host_cells:
            raise RenderError(
                f"{where}: guest cell {cell.guest_cell} is on missing host cell {cell.host_cell}"
            )
        if placement.cpu_policy is CpuPolicy.DEDICATED and len(cell.vcpus) != len(cell.pcpus):
            counts = f"{len(cell.vcpus)} vCPUs but {len(cell.pcpus)} pCPUs"
            raise RenderError(f"{where}: guest cell {cell.guest_cell} has {counts}")
        if cell.vcpus and not cell.pcpus:
            raise RenderError(f"{where}: guest cell {cell.guest_cell} has vCPUs but no pCPUs")
        if placement.cpu_policy is CpuPolicy.MIXED:
            own, floats = mixed_split(cell, placement.dedicated_vcpus)
            if len(own) < len(cell.vcpus) and not floats:
                raise RenderError(f"{where}: guest cell {cell.guest_cell} has floating vCPUs but no float set")
    memory_only = {c.id for c in host.cells if c.memory_only}
    for cell in placement.cold:
        if cell.host_cell not in memory_only:
            raise RenderError(f"{where}: its cold guest cell is on host cell {cell.host_cell}, not a memory-only cell")


def _vcpupins(placement: Placement) -> tuple[Pin, ...]:
    # vcpu_pins: a dedicated vCPU's one pCPU, a floating one's cell float set (shared, or mixed's others).
    return tuple(Pin(str(v), format_cpuset(cpus)) for v, cpus in sorted(vcpu_pins(placement).items()))


def _guest_cells(
    cells: tuple[CellAssignment, ...], distances: dict[int, dict[int, int]], base_kib: int
) -> tuple[GuestCell, ...]:
    return tuple(
        GuestCell(
            id=str(c.guest_cell),
            cpus=format_cpuset(c.vcpus),
            memory_kib=str(c.memory_kib),
            mem_access="shared" if c.page_size_kib > base_kib else "",
            distances=tuple(Sibling(str(s), str(v)) for s, v in sorted(distances.get(c.guest_cell, {}).items())),
        )
        for c in cells
    )


def _gpu_cells(nodes: tuple[GpuNode, ...], distances: dict[int, dict[int, int]]) -> tuple[GuestCell, ...]:
    """The GPUs' guest nodes (:mod:`vnuma.render.gpumemory`): no vCPUs, ``memory='0'``."""
    return tuple(
        GuestCell(str(g.guest_cell), "", "0", "",
                  tuple(Sibling(str(s), str(v)) for s, v in sorted(distances.get(g.guest_cell, {}).items())))
        for g in nodes
    )


def _pages(cells: tuple[CellAssignment, ...], base_kib: int) -> tuple[Page, ...]:
    by_size: dict[int, list[int]] = {}
    for cell in cells:
        if cell.page_size_kib > base_kib:
            by_size.setdefault(cell.page_size_kib, []).append(cell.guest_cell)
    return tuple(Page(str(size), format_cpuset(ids)) for size, ids in sorted(by_size.items()))
