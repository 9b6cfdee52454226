"""A placement next to the domain libvirt holds: what differs, and a placement read back from a domain.

Pure: no I/O. :func:`differences` compares a VM's placement with its parsed
persistent (and live) domain the way vnuma's template renders it: vCPU
``i`` pinned to its own pCPU (``dedicated``) or to its cell's set
(``shared``), the emulator to its own pCPUs or else every vCPU pCPU,
``<numatune><memory>`` to the host cells and each memnode to its guest
cell's host cell. :func:`placement_from_domain` builds the placement a
foreign domain's real pinning amounts to, for ``vnuma reconcile --adopt``;
its guest shape is the cell count the domain has (a move keeps it) unless
vnuma's metadata says the VM was placed with ``auto``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.asks import as_asked
from vnuma.placement.iommu import companions
from vnuma.placement.kept import RECONSTRUCTED, kept_request
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    DeviceAssignment,
    EmulatorThreads,
    MemoryMode,
    PartitionAsk,
    Placement,
    ThreadPolicy,
    VmRequest,
)
from vnuma.placement.pins import emulator_pins, vcpu_pins
from vnuma.render.gpumemory import gpu_nodes
from vnuma.services.names import check_name
from vnuma.sources.domainxml import Domain, GuestCell
from vnuma.topology import DeviceKind, Host, format_cpuset
from vnuma.topology.pcie import Level
from vnuma.topology.resctrl import l3_banks

PINS, SHAPE = "pins", "shape"


@dataclass(frozen=True, slots=True)
class Difference:
    """One value that differs: ``kind`` pins or shape, ``where`` live or persistent, ``what`` names it."""

    kind: str
    where: str
    what: str
    expected: str
    actual: str

    @property
    def text(self) -> str:
        """``persistent vcpupin 0: expected 2, found 5``."""
        return f"{self.where} {self.what}: expected {self.expected}, found {self.actual}"


def _ids(ids: frozenset[int] | None, none: str) -> str:
    return none if ids is None else (format_cpuset(ids) or "(empty)")


def _pin_values(d: Domain) -> dict[str, frozenset[int] | None]:
    values: dict[str, frozenset[int] | None] = {f"vcpupin {v}": d.pins_of(v) for v in range(d.vcpus)}
    values["emulatorpin"] = d.emulatorpin
    values["numatune nodeset"] = d.memory_nodeset
    values.update({f"memnode {m.cellid}": m.nodeset for m in d.memnodes})
    return values


def _expected_pins(p: Placement) -> dict[str, frozenset[int] | None]:
    values: dict[str, frozenset[int] | None] = {f"vcpupin {v}": s for v, s in sorted(vcpu_pins(p).items())}
    values["emulatorpin"] = emulator_pins(p)
    values["numatune nodeset"] = frozenset(p.host_cells) | {c.host_cell for c in p.cold}
    values.update({f"memnode {c.guest_cell}": _memnode_nodes(p, c) for c in sorted(p.cells, key=_guest)})
    values.update({f"memnode {c.guest_cell}": frozenset({c.host_cell}) for c in p.cold})
    return values


def _memnode_nodes(p: Placement, c: CellAssignment) -> frozenset[int]:
    """What the cell's memnode binds: its host cell, or all the VM's host cells when interleaved."""
    return frozenset(p.host_cells) if c.memory_mode is MemoryMode.INTERLEAVE else frozenset({c.host_cell})


def _guest(c: CellAssignment) -> int:
    return c.guest_cell


def _pin_differences(expected: dict[str, frozenset[int] | None], d: Domain, where: str) -> list[Difference]:
    actual = _pin_values(d)
    return [
        Difference(PINS, where, key, _ids(expected.get(key), "none"), _ids(actual.get(key), "unpinned"))
        for key in sorted(set(expected) | set(actual), key=_natural)
        if expected.get(key) != actual.get(key)
    ]


def _natural(key: str) -> tuple[str, int]:
    head, _, tail = key.rpartition(" ")
    return (head, int(tail)) if tail.isdecimal() and len(tail) <= 9 else (key, -1)


def _shape_values(cells: dict[int, tuple[frozenset[int], int, int]], vcpus: int, memory: int, devs: tuple[str, ...]
                  ) -> dict[str, str]:
    values = {"vcpus": str(vcpus), "memory KiB": str(memory), "guest cells": format_cpuset(cells) or "none",
              "hostdevs": ",".join(devs) or "none"}
    for g, (cpus, mem, page) in cells.items():
        values[f"guest cell {g}"] = f"vCPUs {format_cpuset(cpus) or 'none'}, {mem} KiB in {page} KiB pages"
    return values


def _slice_values(l3_kib: tuple[tuple[int, int], ...], bandwidth: tuple[tuple[int, int], ...]) -> dict[str, str]:
    values = {f"L3 cache {i}": f"{kib} KiB" for i, kib in l3_kib}
    values.update({f"bandwidth domain {i}": str(cap) for i, cap in bandwidth})
    return values


def _domain_cells(d: Domain, base_kib: int) -> dict[int, tuple[frozenset[int], int, int]]:
    """Each guest cell's vCPUs, memory and page size (the host's base page ``base_kib`` without hugepages)."""
    return {c.id: (c.vcpus, c.memory_kib, d.page_size_of(c.id) or base_kib) for c in _guest_cells(d)}


def differences(p: Placement, persistent: Domain, live: Domain | None, host: Host) -> list[Difference]:
    """Everything in which the domain differs from what ``p`` renders to on ``host`` (its cache slice and
    bandwidth cap included); live pins only when running."""
    expected = _expected_pins(p)
    found = _pin_differences(expected, persistent, "persistent")
    if live is not None:
        found += _pin_differences(expected, live, "live")
    cells = {c.guest_cell: (frozenset(c.vcpus), c.memory_kib, c.page_size_kib) for c in (*p.cells, *p.cold)}
    # A GPU's memory nodes (vnuma.render.gpumemory): no vCPUs, no memory, no backing of their own.
    cells |= {g.guest_cell: (frozenset(), 0, host.base_page_kib) for g in gpu_nodes(host, p)}
    want = _shape_values(cells, p.vcpus, p.memory_kib + p.cold_kib, tuple(sorted(d.address for d in p.devices)))
    have = _shape_values(_domain_cells(persistent, host.base_page_kib), persistent.vcpus, persistent.memory_kib,
                         persistent.hostdevs)
    banks = l3_banks(host.resctrl)
    granule = {i: b.controls[0].granularity_kib for i, b in banks.items()}
    want.update(_slice_values(tuple((i, w * granule.get(i, 0)) for i, w in p.llc), p.mem_bw))
    have.update(_slice_values(persistent.l3_kib, persistent.bandwidth))
    found += [
        Difference(SHAPE, "persistent", key, want.get(key, "none"), have.get(key, "none"))
        for key in sorted(set(want) | set(have), key=_natural)
        if want.get(key) != have.get(key)
    ]
    return found


def _guest_cells(d: Domain) -> tuple[GuestCell, ...]:
    """The domain's guest cells; a domain without ``<numa>`` is one cell holding everything."""
    return d.cells or (GuestCell(0, frozenset(range(d.vcpus)), d.memory_kib),)


def placement_from_domain(d: Domain, live: Domain | None, host: Host, tenant: str) -> Placement:
    """The placement ``d``'s persistent pinning amounts to on ``host``, owned by ``tenant``.

    Dedicated when every vCPU is pinned to its own pCPU, shared when each
    guest cell's vCPUs share one set; a guest cell's host cell is its
    memnode's node, else the one cell holding its pCPUs. The emulator keeps
    its emulatorpin (none: it follows the vCPUs' pCPUs, as vnuma renders it).

    Raises:
        InvalidInputError: a name vnuma cannot use, live pins that differ from
            the persistent ones, an unpinned vCPU, pins that fit neither
            policy, a guest cell spread over host cells, a pCPU the host lacks.
    """
    check_name(d.name, "VM")
    if live is not None and _pin_values(live) != _pin_values(d):
        raise InvalidInputError("its live pinning differs from its persistent definition; make them agree first")
    # A cell without vCPUs or memory holds nothing to place: a GPU's memory node, which the render derives again
    # from the host (vnuma.render.gpumemory).
    cells = tuple(c for c in _guest_cells(d) if c.vcpus or c.memory_kib)
    covered = sorted(v for c in cells for v in c.vcpus)
    if covered != list(range(d.vcpus)):
        raise InvalidInputError(f"its guest cells hold vCPUs {format_cpuset(covered)} of {d.vcpus}")
    pins = {}
    for v in range(d.vcpus):
        cpus = d.pins_of(v)
        if not cpus:
            raise InvalidInputError(f"vCPU {v} is not pinned (vnuma records pinned domains only)")
        pins[v] = cpus
    policy = _policy(d, cells, pins)
    cell_of = {cpu.id: cell.id for cell in host.cells for cpu in cell.cpus}
    stray = {c for cpus in pins.values() for c in cpus} - set(cell_of)
    if stray:
        raise InvalidInputError(f"pCPU(s) {format_cpuset(stray)} do not exist on host {host.name!r}")
    every = tuple(_assign(d, c, pins, policy, cell_of, host.base_page_kib) for c in cells)
    # A guest cell with memory and no vCPUs bound to a memory-only host cell is a cold tier.
    memory_only = {c.id for c in host.cells if c.memory_only}
    cold = tuple(a for a in every if not a.vcpus and a.host_cell in memory_only)
    assignments = tuple(a for a in every if a not in cold)
    mark = d.mark
    thread = mark.thread_policy if mark is not None and mark.thread_policy in set(ThreadPolicy) else "prefer"
    found = Placement(
        vm=d.name, tenant=tenant, host=host.name, cells=assignments,
        emulator_pcpus=tuple(sorted(d.emulatorpin or ())),
        devices=_devices(d, host, assignments), cpu_policy=policy,
        thread_policy=ThreadPolicy(thread), threads_per_core=d.threads_per_core or 1,
        numa_nodes=None if mark is not None and mark.numa_nodes == "auto" else len(assignments),
        llc=_ways(d, host), mem_bw=d.bandwidth, cold=cold,
        dedicated_vcpus=mark.dedicated_vcpus if mark is not None and policy is CpuPolicy.MIXED else frozenset(),
    )
    if mark is not None and mark.request is not None:
        kept: Mapping[str, Any] = {**mark.request, "name": d.name, "tenant": tenant}
        kept_request(replace(found, request=kept))  # a request that cannot be read refuses the adoption
    else:
        kept = {**as_asked(reconstructed(found)), RECONSTRUCTED: True}
    return replace(found, request=kept)


def reconstructed(p: Placement) -> VmRequest:
    """The request a VM's placement amounts to, for a domain whose metadata keeps none (rendered before vnuma
    kept requests, or by another tool): its size, guest shape (the cell count it has, unless placed with
    ``auto``; cells of different sizes each their own), policies, page size, memory modes, slices, cold tier,
    NICs as recorded and GPU partitions; GPUs ``required``. Marked reconstructed where it is kept."""
    pins = {x for c in p.cells for x in c.pcpus}
    modes = p.memory_modes
    cells = sorted(p.cells, key=lambda c: c.guest_cell)
    sizes = [(len(c.vcpus), c.memory_kib) for c in cells]
    own = len(set(sizes)) > 1
    gpus = [d for d in p.devices if d.kind is DeviceKind.GPU]
    nics = sum(1 for d in p.devices if d.kind is DeviceKind.NIC and d.peer_of is None)
    first = p.partitions[0] if p.partitions else None
    return VmRequest(
        name=p.vm, tenant=p.tenant, vcpus=p.vcpus, memory_kib=p.memory_kib, gpus=len(gpus),
        numa_nodes=p.numa_nodes if len(set(modes)) == 1 and not own else len(modes),
        cell_vcpus=tuple(v for v, _ in sizes) if own else None,
        cell_memory_kib=tuple(m for _, m in sizes) if own else None,
        cell_gpus=tuple(sum(1 for d in gpus if d.guest_cell == c.guest_cell) for c in cells) if own and gpus else None,
        memory_modes=modes[:1] if len(set(modes)) == 1 else modes,
        iothreads=p.iothreads, iothread_policy=p.iothread_policy, group=p.group, anti_affinity=p.anti_affinity,
        affinity=p.affinity, cpu_policy=p.cpu_policy, thread_policy=p.thread_policy,
        page_size_kib=p.cells[0].page_size_kib if p.cells else None,
        emulator_threads=EmulatorThreads.ISOLATE if set(p.emulator_pcpus) - pins else EmulatorThreads.SHARE,
        llc_ways=max((w for _i, w in p.llc), default=None), mem_bw=max((c for _i, c in p.mem_bw), default=None),
        cold_memory_kib=p.cold_kib, cold_tier=p.cold_tier,
        nics=0 if p.nics_per_gpu or p.nic_affinity is None else nics,
        nics_per_gpu=p.nics_per_gpu and p.nic_affinity is not None, nic_affinity=p.nic_affinity or Level.PXB,
        nic_function=p.nic_function,
        partition=None if first is None else PartitionAsk(first.kind, first.name, len(p.partitions)),
        dedicated_vcpus=p.dedicated_vcpus,
    )


def _ways(d: Domain, host: Host) -> tuple[tuple[int, int], ...]:
    """The domain's ``<cachetune>`` as ways of the host's L3 banks.

    Raises:
        InvalidInputError: a cache the host does not allocate, or a size that is not a whole number of ways.
    """
    banks = l3_banks(host.resctrl)
    ways = []
    for cache, kib in d.l3_kib:
        bank = banks.get(cache)
        if bank is None:
            raise InvalidInputError(f"its cachetune names L3 cache {cache}, which host {host.name!r} does not allocate")
        granule = bank.controls[0].granularity_kib
        if kib % granule:
            raise InvalidInputError(f"its cachetune gives cache {cache} {kib} KiB, not a whole number of "
                                    f"{granule} KiB ways")
        ways.append((cache, kib // granule))
    return tuple(ways)


def _policy(d: Domain, cells: tuple[GuestCell, ...], pins: dict[int, frozenset[int]]) -> CpuPolicy:
    if d.mark is not None and d.mark.cpu_policy == CpuPolicy.MIXED:
        return _mixed_policy(d.mark.dedicated_vcpus, cells, pins)
    singles = [next(iter(s)) for s in pins.values() if len(s) == 1]
    one_each = len(singles) == len(pins) and len(set(singles)) == len(pins)
    per_cell = all(len({pins[v] for v in c.vcpus}) <= 1 for c in cells)
    wants_shared = d.mark is not None and d.mark.cpu_policy == CpuPolicy.SHARED
    if per_cell and (wants_shared or not one_each):
        return CpuPolicy.SHARED
    if one_each:
        return CpuPolicy.DEDICATED
    raise InvalidInputError("its vCPU pins are neither one pCPU per vCPU nor one set per guest cell")


def _mixed_policy(
    dedicated: frozenset[int], cells: tuple[GuestCell, ...], pins: dict[int, frozenset[int]]
) -> CpuPolicy:
    """A domain vnuma rendered as ``mixed``: its dedicated vCPUs each on a pCPU of their own, the others of
    each guest cell on one set apart from every pin.

    Raises:
        InvalidInputError: pins that do not match that shape.
    """
    own = [next(iter(pins[v])) for v in sorted(dedicated) if v in pins and len(pins[v]) == 1]
    floating = [v for v in pins if v not in dedicated]
    if not floating or len(own) != len(dedicated) or len(set(own)) != len(own):
        raise InvalidInputError("its metadata says cpu policy mixed, but its dedicated vCPUs are not pinned 1:1")
    for c in cells:
        sets = {pins[v] for v in c.vcpus if v not in dedicated}
        if len(sets) > 1 or any(s & set(own) for s in sets):
            raise InvalidInputError(
                f"its metadata says cpu policy mixed, but guest cell {c.id}'s floating vCPUs do not share one set "
                "apart from the dedicated pCPUs"
            )
    return CpuPolicy.MIXED


def _assign(
    d: Domain, cell: GuestCell, pins: dict[int, frozenset[int]], policy: CpuPolicy, cell_of: dict[int, int],
    base_kib: int,
) -> CellAssignment:
    vcpus = tuple(sorted(cell.vcpus))
    pcpus = frozenset(c for v in vcpus for c in pins[v])
    memnode = next((m for m in d.memnodes if m.cellid == cell.id), None)
    mode = MemoryMode(memnode.mode) if memnode is not None and memnode.mode in set(MemoryMode) else MemoryMode.STRICT
    # An interleaved cell is bound to several host cells: its own is the one holding its pCPUs.
    bound = memnode.nodeset if memnode is not None and mode is not MemoryMode.INTERLEAVE else None
    nodes = bound or frozenset(cell_of[c] for c in pcpus) or d.memory_nodeset or frozenset()
    if len(nodes) != 1:
        raise InvalidInputError(
            f"guest cell {cell.id} is bound to host cells {format_cpuset(nodes) or 'none'}; "
            "vnuma records one host cell per guest cell"
        )
    if policy is CpuPolicy.MIXED:  # pins of its dedicated vCPUs first, then the float set (model.mixed_split)
        dedicated = d.mark.dedicated_vcpus if d.mark is not None else frozenset()
        mine = [next(iter(pins[v])) for v in vcpus if v in dedicated]
        order = (*mine, *sorted(pcpus - set(mine)))
    elif policy is CpuPolicy.DEDICATED:
        order = tuple(next(iter(pins[v])) for v in vcpus)
    else:
        order = tuple(sorted(pcpus))
    return CellAssignment(
        guest_cell=cell.id, host_cell=next(iter(nodes)), vcpus=vcpus, pcpus=order,
        memory_kib=cell.memory_kib, page_size_kib=d.page_size_of(cell.id) or base_kib, memory_mode=mode,
    )


def _devices(d: Domain, host: Host, cells: tuple[CellAssignment, ...]) -> tuple[DeviceAssignment, ...]:
    """The domain's hostdevs as device assignments; a device another hostdev's IOMMU group brings along
    (:func:`~vnuma.placement.iommu.companions`) is marked as following it, on its guest cell."""
    known = {dev.address: dev for dev in host.devices}
    follows = {peer: address for address in d.hostdevs for peer in companions(known, address)}
    out = []
    for address in d.hostdevs:
        dev = known.get(address)
        node = dev.numa_node if dev is not None else None
        guest = next((c.guest_cell for c in cells if c.host_cell == node), cells[0].guest_cell)
        kind = dev.kind if dev is not None else DeviceKind.OTHER
        out.append(DeviceAssignment(address, kind, guest, node, peer_of=follows.get(address)))
    return tuple(out)
