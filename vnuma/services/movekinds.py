"""How a journaled move changes libvirt: its *kind*, chosen before anything changes.

The kind comes from where the VM's domain is and what it is doing (libvirt is
asked, not the inventory) and from the permits the run was given (:mod:`.permits`;
:mod:`.rebalance_apply` carries each kind out):

========== =================================================================
claims     no domain (the VM is only placed): only the claims move
redefine   defined, not running, same host: define the new XML
live       running, same host, same guest NUMA shape, page size and
           devices, and memory either stays on its host cells or is 4 KiB
           backed under ``restrictive`` numatune: vCPUs and emulator re-pinned
           with ``pinVcpuFlags``/``pinEmulator`` (live), the memory nodeset
           changed live when it moves, then the new XML defined (so the
           persistent definition matches too)
restart    running, same host, not live-capable: stop, define, start
           (only with the ``restart`` permit)
move       another host, not running: define on the destination, then
           undefine on the source (the domain always exists somewhere)
migrate    another host, running, the ``migrate`` permit, no passed-through devices
           (a VM with them needs the ``restart`` permit): libvirt live migration
           with the destination XML rendered from the new placement (between
           two hosts of the embedded hypervisor, which runs no guests: stop,
           undefine, define and start there, as move-restart)
move-restart another host, running, the ``restart`` permit (not ``migrate``):
           define on the destination, stop and undefine on the source, start
           on the destination
========== =================================================================

Pure: no I/O.
"""

from __future__ import annotations

from vnuma.errors import ConflictError
from vnuma.hypervisor.base import DomainState
from vnuma.inventory.schema import VmState
from vnuma.placement.model import Placement
from vnuma.render.view import effective_memory_modes
from vnuma.services.permits import Permits
from vnuma.topology import PAGE_4K

CLAIMS, REDEFINE, LIVE, RESTART, MOVE, MIGRATE, MOVE_RESTART = (
    "claims", "redefine", "live", "restart", "move", "migrate", "move-restart",
)


def _guest_shape(p: Placement) -> tuple[object, ...]:
    return (
        tuple((c.vcpus, c.memory_kib, c.page_size_kib) for c in p.cells),
        tuple(d.address for d in p.devices), p.cpu_policy, p.threads_per_core,
        tuple((a.gpu, a.vf, a.name, a.start) for a in p.partitions),
    )


def live_capable(before: Placement, after: Placement, memnode_mode: str | None, base_kib: int = PAGE_4K) -> bool:
    """True when a running VM can move from ``before`` to ``after`` without a restart (see the module doc):
    to other host cells only when every guest cell's memory is ``restrictive`` as rendered (the placement's
    mode or the ``--memnode-mode`` override it was applied with) and in the host's base pages (``base_kib``)."""
    if before.host != after.host or _guest_shape(before) != _guest_shape(after):
        return False
    if before.host_cells == after.host_cells:
        return True
    restrictive = set(effective_memory_modes(after, memnode_mode)) == {"restrictive"}
    return restrictive and all(c.page_size_kib == base_kib for c in after.cells)


def observed(inventory_state: VmState, domain: DomainState) -> VmState:
    if domain is DomainState.RUNNING:
        return VmState.RUNNING
    if inventory_state in (VmState.DEFINED, VmState.STOPPED):
        return inventory_state
    return VmState.DEFINED


def move_kind(vm: str, before: Placement, after: Placement, state: VmState, memnode_mode: str | None,
              may: Permits, base_kib: int = PAGE_4K) -> str:
    """The kind of the move of running or defined VM ``vm`` (see the module doc); ``base_kib``: its host's base
    page.

    Raises:
        ConflictError: a move the permits ``may`` do not allow, with the carrying command's way to allow it.
    """
    if state is VmState.PLACED:
        return CLAIMS
    if state is not VmState.RUNNING:
        return REDEFINE if before.host == after.host else MOVE
    if before.host == after.host:
        if live_capable(before, after, memnode_mode, base_kib):
            return LIVE
        if may.restart:
            return RESTART
        raise ConflictError(
            f"VM {vm!r} is running and cannot move from cells {list(before.host_cells)} to "
            f"{list(after.host_cells)} live (guest NUMA shape, page size, or memory mode "
            f"{'/'.join(effective_memory_modes(after, memnode_mode))} where only restrictive moves live)",
            hint=f"allow {may.restart_hint}",
        )
    if may.migrate and not before.devices and not before.partitions:
        return MIGRATE
    if may.restart:
        return MOVE_RESTART
    if may.migrate:
        raise ConflictError(
            f"VM {vm!r} passes devices through "
            f"({', '.join([d.address for d in before.devices] + [f'mdev {a.uuid}' for a in before.partitions])}): "
            "libvirt cannot migrate it live",
            hint=f"move it with {may.restart_hint} instead",
        )
    ways = [w for w in (may.migrate_hint, may.restart_hint) if w]
    raise ConflictError(
        f"VM {vm!r} is running and would move from host {before.host!r} to {after.host!r}",
        hint=f"allow {' or '.join(ways)}",
    )
