"""Checks a placement against a host and the claims already on it, before it is recorded.

Pure: no I/O. ``vms.claim`` (ORM) and ``sqlite_direct`` (DB-API) load
:class:`HostClaims` inside the claiming transaction (:func:`host_claims`
assembles it from their rows) and call :func:`check_claim` and
:func:`check_tenant_quota`; the database constraints behind them catch
whatever these checks might miss. Every refusal names the host, the
resource and the VM holding it. Both writers store what
:func:`encode_placement` and :func:`claim_rows` give, so they write the
same rows.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import ConflictError, InvalidInputError, InventoryError
from vnuma.placement.model import CpuPolicy, Isolation, Placement, held_pcpus
from vnuma.topology import DeviceKind, Host, format_cpuset

_REPLACE_HINT = "the host changed since the placement was computed; place the VM again"


@dataclass(frozen=True, slots=True)
class Holder:
    """A VM (and its tenant) holding one resource: a pCPU or a NUMA cell."""

    vm: str
    tenant: str
    isolation: Isolation


@dataclass(frozen=True, slots=True)
class HostClaims:
    """What the VMs already on a host hold.

    ``cpus``: (cpu id, exclusive, holder); ``pages``: (cell, page size KiB)
    -> pages claimed; ``devices``: address -> VM; ``cells``: (cell id, holder).
    """

    cpus: tuple[tuple[int, bool, Holder], ...] = ()
    pages: tuple[tuple[tuple[int, int], int], ...] = ()
    devices: tuple[tuple[str, str], ...] = ()
    cells: tuple[tuple[int, Holder], ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimRows:
    """The rows a claim writes: (pCPU, exclusive), (cell, page size KiB, count), device addresses."""

    cpus: tuple[tuple[int, bool], ...]
    pages: tuple[tuple[int, int, int], ...]
    devices: tuple[str, ...]


def encode_placement(p: Placement) -> str:
    """The ``vms.placement`` column's text for a placement."""
    return json.dumps(placement_to_dict(p), separators=(",", ":"))


def decode_placement(name: str, document: str) -> Placement:
    """The placement stored for VM ``name``.

    Raises:
        InventoryError: the stored document cannot be read back.
    """
    try:
        return placement_from_dict(json.loads(document))
    except (ValueError, TypeError, InvalidInputError) as err:
        raise InventoryError(f"inventory: stored placement of VM {name!r} is unreadable: {err}") from err


def claim_rows(p: Placement, host: Host) -> ClaimRows:
    """What a placement claims on ``host``, as rows to insert."""
    # Siblings an isolate VM keeps empty are claimed too, so the unique index covers them.
    held = held_pcpus(p, host)
    cpus = [(c, True) for c in sorted(held)] + [(c, False) for c in sorted(p.shared_pcpus - held)]
    pages = tuple((cell, size, n) for (cell, size), n in page_needs(p).items())
    return ClaimRows(tuple(cpus), pages, tuple(d.address for d in p.devices))


def host_claims(
    cpus: Iterable[tuple[int, bool, Holder]],
    pages: Iterable[tuple[int, int, int]],
    page_users: Iterable[tuple[int, Holder]],
    devices: Iterable[tuple[str, str]],
    host: Host,
) -> HostClaims:
    """HostClaims from the rows read: cpus ordered by (VM, pCPU), pages summed per (cell, size)."""
    cpus = tuple(cpus)
    cell_of = {cpu.id: cell.id for cell in host.cells for cpu in cell.cpus}
    cells = set(page_users) | {(cell_of[cpu], h) for cpu, _, h in cpus if cpu in cell_of}
    return HostClaims(
        cpus=cpus,
        pages=tuple(((cell, size), int(n)) for cell, size, n in pages),
        devices=tuple(devices),
        cells=tuple(sorted(cells, key=lambda c: (c[0], c[1].vm))),
    )


def check_tenant_quota(
    tenant: str, max_vcpus: int | None, max_gpus: int | None, used: tuple[int, int], p: Placement
) -> None:
    """Refuse a claim that takes the tenant over a quota, given its (vCPUs, GPUs) in use.

    Raises:
        ConflictError: a quota would be exceeded.
    """
    for label, now, more, limit in (
        ("vCPUs", used[0], p.vcpus, max_vcpus),
        ("GPUs", used[1], gpu_count(p), max_gpus),
    ):
        if limit is not None and more and now + more > limit:
            raise ConflictError(
                f"tenant {tenant!r} holds {now} {label}; VM {p.vm!r} would take it to {now + more}, "
                f"over its quota of {limit}",
                hint="release a VM of this tenant or raise its quota",
            )


def all_pcpus(p: Placement) -> frozenset[int]:
    """Every pCPU the placement touches: pins, floating set and emulator pCPUs."""
    return p.dedicated_pcpus | p.shared_pcpus | frozenset(p.emulator_pcpus)


def page_needs(p: Placement) -> dict[tuple[int, int], int]:
    """Pages the placement claims per (host cell, page size KiB), zero counts left out."""
    needs: Counter[tuple[int, int]] = Counter()
    for c in p.cells:
        needs[(c.host_cell, c.page_size_kib)] += c.pages
    return {key: n for key, n in sorted(needs.items()) if n > 0}


def gpu_count(p: Placement) -> int:
    """GPUs the placement passes through."""
    return sum(1 for d in p.devices if d.kind is DeviceKind.GPU)


def check_claim(p: Placement, isolation: Isolation, host: Host, claims: HostClaims) -> None:
    """Refuse a placement that does not fit the host as it is now.

    Raises:
        InvalidInputError: a malformed placement (a vCPU/pCPU count mismatch,
            a pCPU pinned twice, memory not a whole number of pages).
        ConflictError: missing, reserved or already claimed CPUs, pages or
            devices, or a tenant isolation rule broken.
    """
    _check_shape(p, host)
    reserved = all_pcpus(p) & host.reserved_cpus
    if reserved:
        raise ConflictError(
            f"host {host.name!r}: CPU(s) {format_cpuset(reserved)} are reserved", hint=_REPLACE_HINT
        )
    _check_cpus_free(p, host, claims)
    _check_pages(p, host, claims)
    taken = {addr: vm for addr, vm in claims.devices}
    for dev in p.devices:
        if dev.address in taken:
            raise ConflictError(
                f"host {p.host!r}: device {dev.address} is already given to VM {taken[dev.address]!r}",
                hint=_REPLACE_HINT,
            )
    _check_isolation(p, isolation, host, claims)


def _check_shape(p: Placement, host: Host) -> None:
    where = f"placement of VM {p.vm!r}"
    cells = {c.id: c for c in host.cells}
    pins: list[int] = []
    for c in p.cells:
        if c.host_cell not in cells:
            raise ConflictError(f"host {host.name!r} has no NUMA cell {c.host_cell}", hint=_REPLACE_HINT)
        stray = set(c.pcpus) - cells[c.host_cell].cpu_ids
        if stray:
            raise ConflictError(
                f"host {host.name!r}: cell {c.host_cell} has no CPU(s) {format_cpuset(stray)}",
                hint=_REPLACE_HINT,
            )
        if p.cpu_policy is CpuPolicy.DEDICATED and len(c.vcpus) != len(c.pcpus):
            raise InvalidInputError(
                f"{where}: guest cell {c.guest_cell} pins {len(c.vcpus)} vCPUs to {len(c.pcpus)} pCPUs"
            )
        if c.page_size_kib <= 0 or c.memory_kib % c.page_size_kib:
            raise InvalidInputError(
                f"{where}: guest cell {c.guest_cell} memory {c.memory_kib} KiB is not a whole number "
                f"of {c.page_size_kib} KiB pages"
            )
        pins.extend(c.pcpus)
    if p.cpu_policy is CpuPolicy.DEDICATED and len(pins) != len(set(pins)):
        twice = sorted(cpu for cpu, n in Counter(pins).items() if n > 1)
        raise InvalidInputError(f"{where}: pCPU(s) {format_cpuset(twice)} pinned to more than one vCPU")
    stray = set(p.emulator_pcpus) - host.cpu_ids
    if stray:
        raise ConflictError(f"host {host.name!r} has no CPU(s) {format_cpuset(stray)}", hint=_REPLACE_HINT)
    addresses = {d.address for d in host.devices}
    for dev in p.devices:
        if dev.address not in addresses:
            raise ConflictError(f"host {host.name!r} has no device {dev.address}", hint=_REPLACE_HINT)


def _check_cpus_free(p: Placement, host: Host, claims: HostClaims) -> None:
    exclusive: dict[int, str] = {}
    any_claim: dict[int, str] = {}
    for cpu, excl, h in claims.cpus:  # ordered by VM name: messages name the first holder
        any_claim.setdefault(cpu, h.vm)
        if excl:
            exclusive.setdefault(cpu, h.vm)
    # A pinned pCPU must be free of any VM; a floating VM only avoids pinned pCPUs.
    for wanted, held in ((held_pcpus(p, host), any_claim), (p.shared_pcpus, exclusive)):
        clash = sorted(cpu for cpu in wanted if cpu in held)
        if clash:
            raise ConflictError(
                f"host {p.host!r}: pCPU(s) {format_cpuset(clash)} are already held by VM {held[clash[0]]!r}",
                hint=_REPLACE_HINT,
            )


def _check_pages(p: Placement, host: Host, claims: HostClaims) -> None:
    claimed = dict(claims.pages)
    for (cell_id, size_kib), need in page_needs(p).items():
        free = host.cell(cell_id).pages_of(size_kib) - claimed.get((cell_id, size_kib), 0)
        if need > free:
            raise ConflictError(
                f"host {p.host!r}: cell {cell_id} has {max(free, 0)} free pages of {size_kib} KiB, "
                f"VM {p.vm!r} needs {need}",
                hint=_REPLACE_HINT,
            )


def _strict(a: Isolation, b: Isolation, level: Isolation) -> bool:
    return a is level or b is level


def _check_isolation(p: Placement, isolation: Isolation, host: Host, claims: HostClaims) -> None:
    by_id = {cpu.id: cpu for cell in host.cells for cpu in cell.cpus}
    cores = {sib for cpu in all_pcpus(p) for sib in by_id[cpu].siblings}
    for cpu, _, h in claims.cpus:
        if h.tenant == p.tenant or cpu not in cores:
            continue
        if isolation is not Isolation.NONE or h.isolation is not Isolation.NONE:
            raise ConflictError(
                f"host {p.host!r}: VM {p.vm!r} (tenant {p.tenant!r}, {isolation} isolation) would share "
                f"the physical core of pCPU {cpu} with VM {h.vm!r} (tenant {h.tenant!r}, "
                f"{h.isolation} isolation)",
                hint=_REPLACE_HINT,
            )
    mine = set(p.host_cells)
    for cell_id, h in claims.cells:
        if h.tenant != p.tenant and cell_id in mine and _strict(isolation, h.isolation, Isolation.CELL):
            raise ConflictError(
                f"host {p.host!r}: VM {p.vm!r} (tenant {p.tenant!r}, {isolation} isolation) would share "
                f"NUMA cell {cell_id} with VM {h.vm!r} (tenant {h.tenant!r}, {h.isolation} isolation)",
                hint=_REPLACE_HINT,
            )
