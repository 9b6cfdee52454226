"""Host rows: add, refresh, remove, reserve, and decode to :class:`Host`.

Functions take an open ``Session`` inside the caller's transaction and
return dataclasses; ORM rows never leave ``vnuma.inventory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import delete, func, literal_column, select, text, update
from sqlalchemy.orm import Session

from vnuma.errors import ConflictError, InvalidInputError, NotFoundError
from vnuma.inventory import figures
from vnuma.inventory.changes import HOST_REMOVED, mark
from vnuma.inventory.claims import decode_placement
from vnuma.inventory.claimtables import CpuClaim, DeviceClaim, PageClaim, PartitionClaim
from vnuma.inventory.hostwrite import host_columns
from vnuma.inventory.lookup import named_row
from vnuma.inventory.models import HostRow, VmRow
from vnuma.inventory.topologies import decode_host, decode_left_out, encode_left_out
from vnuma.placement.resctrl import ResctrlUse, policy_problem
from vnuma.topology import Host, format_cpuset, parse_cpuset
from vnuma.topology.hostcheck import check_host
from vnuma.topology.leftout import LeftOut
from vnuma.topology.resctrl import ResctrlPolicy, format_policy, parse_policy

_LIST_HINT = "see `vnuma host list`"


def host_row(session: Session, name: str, *, lock: bool = False) -> HostRow:
    """The row of host ``name``; ``lock`` takes its row lock (PostgreSQL) for a write.

    Raises:
        NotFoundError: no such host.
    """
    return named_row(session, HostRow, name, "host", lock=lock)


def row_host(row: HostRow) -> Host:
    """The Host of a row."""
    return decode_host(
        row.name, row.uri, row.source, row.topology, row.reserved_cpuset, row.cordoned, row.resctrl_policy,
        row.device_states,
    )


def bump_generation(session: Session, host_id: int) -> None:
    """Count one more change to the host's claims or reservations (its generation and its mark)."""
    session.execute(
        update(HostRow).where(HostRow.id == host_id).values(
            host_generation=HostRow.host_generation + 1,
            change_mark=literal_column(mark(session.get_bind().dialect.name)),
            **dict.fromkeys(figures.COLUMNS),  # a change other than a claim keeps no figures (figures.py)
        )
    )


def topology_override(session: Session, name: str) -> str | None:
    """Where a refresh of host ``name`` reads its topology; None: its libvirt capabilities.

    Raises:
        NotFoundError: no such host.
    """
    found = session.execute(select(HostRow.topology_override).where(HostRow.name == name)).one_or_none()
    if found is None:
        raise NotFoundError(f"host {name!r} is not in the inventory", hint=_LIST_HINT)
    return found[0]


def left_out(session: Session, name: str) -> tuple[LeftOut, ...]:
    """The parts the import that wrote host ``name``'s topology left out.

    Raises:
        NotFoundError: no such host.
    """
    return decode_left_out(name, host_row(session, name).left_out)


def topology_overrides(session: Session) -> dict[str, str]:
    """Host name -> topology override, for the hosts that have one."""
    stmt = select(HostRow.name, HostRow.topology_override).where(HostRow.topology_override.is_not(None))
    return {name: override for name, override in session.execute(stmt)}


def vm_names_on(session: Session, host_id: int) -> list[str]:
    """Names of the VMs placed on a host, sorted."""
    return list(session.scalars(select(VmRow.name).where(VmRow.host_id == host_id).order_by(VmRow.name)))


def remove_host(session: Session, name: str) -> None:
    """Delete a host that has no VMs.

    Raises:
        NotFoundError: no such host.
        ConflictError: VMs are still placed on it.
    """
    row = host_row(session, name, lock=True)
    vms = vm_names_on(session, row.id)
    if vms:
        raise ConflictError(
            f"host {name!r} still has {len(vms)} VM(s): {_some(vms)}",
            hint="release them first with `vnuma vm release NAME`",
        )
    session.execute(delete(HostRow).where(HostRow.id == row.id))
    session.execute(text(HOST_REMOVED))


def _some(names: list[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def claimed_cpus(session: Session, host_id: int) -> dict[int, str]:
    """Every claimed pCPU of a host -> the name of one VM holding it."""
    stmt = select(CpuClaim.cpu_id, VmRow.name).join(VmRow, VmRow.id == CpuClaim.vm_id)
    return {
        cpu: vm for cpu, vm in session.execute(stmt.where(CpuClaim.host_id == host_id).order_by(VmRow.name))
    }


def reserve(session: Session, name: str, cpus: frozenset[int] | None, policy: ResctrlPolicy | None) -> None:
    """:func:`set_resctrl_policy` and :func:`reserve_cpus` (each when given) in the caller's transaction."""
    if policy is not None:
        set_resctrl_policy(session, name, policy)
    if cpus is not None:
        reserve_cpus(session, name, cpus)


def set_resctrl_policy(session: Session, name: str, policy: ResctrlPolicy) -> None:
    """Set the host's cache ways kept for itself and its bandwidth-cap limit.

    Raises:
        NotFoundError: no such host.
        InvalidInputError: a policy the host cannot hold beside its VMs' slices
            (:func:`vnuma.placement.resctrl.policy_problem`).
    """
    row = host_row(session, name, lock=True)
    host = replace(row_host(row), resctrl_policy=policy)
    use = ResctrlUse()
    for vm, doc in session.execute(select(VmRow.name, VmRow.placement).where(VmRow.host_id == row.id)):
        use.apply(decode_placement(vm, doc), +1)
    problem = policy_problem(host, use)
    if problem is not None:
        raise InvalidInputError(f"host {name!r}: {problem.reason}", hint=problem.hint)
    row.resctrl_policy = format_policy(policy)
    session.flush()
    bump_generation(session, row.id)


def reserve_cpus(session: Session, name: str, cpus: frozenset[int]) -> None:
    """Set the host's reserved CPUs (an empty set clears them).

    Raises:
        NotFoundError: no such host.
        InvalidInputError: CPUs the host does not have.
        ConflictError: CPUs a VM has claimed.
    """
    row = host_row(session, name, lock=True)
    stray = cpus - row_host(row).cpu_ids
    if stray:
        raise InvalidInputError(f"host {name!r} has no CPU(s) {format_cpuset(stray)}")
    held = {cpu: vm for cpu, vm in claimed_cpus(session, row.id).items() if cpu in cpus}
    if held:
        holders = _some(sorted(set(held.values())))
        raise ConflictError(
            f"host {name!r}: CPU(s) {format_cpuset(held)} are claimed by VM(s) {holders}",
            hint="release those VMs first, or reserve other CPUs",
        )
    row.reserved_cpuset = format_cpuset(cpus)
    session.flush()
    bump_generation(session, row.id)


def set_cordoned(session: Session, name: str, cordoned: bool) -> bool:
    """Cordon or uncordon a host; returns whether it was cordoned before.

    Raises:
        NotFoundError: no such host.
    """
    row = host_row(session, name, lock=True)
    before = row.cordoned
    if before != cordoned:
        row.cordoned = cordoned
        session.flush()
        bump_generation(session, row.id)
    return before


def replace_host(
    session: Session, host: Host, topology_override: str | None = None, left_out: Sequence[LeftOut] = ()
) -> None:
    """Refresh a host's topology, keeping its reserved CPUs and cordon, and record where it was read (None:
    libvirt) and the parts that read left out.

    Raises:
        NotFoundError: no such host.
        InvalidInputError: an inconsistent topology.
        ConflictError: the new topology lacks reserved or claimed CPUs,
            claimed devices or cells, or has fewer pages than are claimed.
    """
    check_host(replace(host, reserved_cpus=frozenset()))
    row = host_row(session, host.name, lock=True)
    new = replace(host, reserved_cpus=parse_cpuset(row.reserved_cpuset), cordoned=row.cordoned,
                  resctrl_policy=parse_policy(row.resctrl_policy or ""))
    lost_reserved = new.reserved_cpus - new.cpu_ids
    if lost_reserved:
        raise ConflictError(
            f"host {host.name!r}: the new topology lacks reserved CPU(s) {format_cpuset(lost_reserved)}",
            hint=f"change the reservation first with `vnuma host reserve {host.name} CPUS`",
        )
    _check_claims_survive(session, row.id, new)
    for key, value in host_columns(new).items():
        setattr(row, key, value)
    row.topology_override = topology_override
    row.left_out = encode_left_out(left_out)
    session.flush()
    bump_generation(session, row.id)


def _check_claims_survive(session: Session, host_id: int, new: Host) -> None:
    where = f"host {new.name!r}: the new topology"
    hint = "release the VMs that hold them first"
    lost_cpus = {c: vm for c, vm in claimed_cpus(session, host_id).items() if c not in new.cpu_ids}
    if lost_cpus:
        raise ConflictError(
            f"{where} lacks CPU(s) {format_cpuset(lost_cpus)} claimed by VM(s) "
            f"{_some(sorted(set(lost_cpus.values())))}",
            hint=hint,
        )
    addresses = {d.address for d in new.devices}
    devices = session.execute(
        select(DeviceClaim.address, VmRow.name).join(VmRow).where(DeviceClaim.host_id == host_id)
    ).all() + session.execute(
        select(PartitionClaim.gpu, VmRow.name).join(VmRow).where(PartitionClaim.host_id == host_id)
    ).all()
    lost_devices = sorted({f"{a} (VM {vm})" for a, vm in devices if a not in addresses})
    if lost_devices:
        raise ConflictError(f"{where} lacks claimed device(s) {', '.join(lost_devices)}", hint=hint)
    pages = session.execute(
        select(PageClaim.cell_id, PageClaim.page_size_kib, func.sum(PageClaim.count))
        .where(PageClaim.host_id == host_id)
        .group_by(PageClaim.cell_id, PageClaim.page_size_kib)
        .order_by(PageClaim.cell_id, PageClaim.page_size_kib)
    ).all()
    cells = {c.id: c for c in new.cells}
    for cell_id, size_kib, claimed in pages:
        if cell_id not in cells:
            raise ConflictError(f"{where} lacks NUMA cell {cell_id}, which VMs use", hint=hint)
        if cells[cell_id].pages_of(size_kib) < claimed:
            raise ConflictError(
                f"{where} has {cells[cell_id].pages_of(size_kib)} pages of {size_kib} KiB on cell {cell_id}, "
                f"but VMs claim {claimed}",
                hint=hint,
            )


def host_generation(session: Session, name: str) -> int:
    """How many times the host's claims or reservations changed."""
    return host_row(session, name).host_generation
