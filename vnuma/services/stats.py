"""``vnuma stats``: per-cell use, fragmentation and per-VM locality, planned and measured.

Reads the inventory (one transaction per read) and, for running VMs on
hosts whose libvirt URI is local (``qemu:///...``), the QEMU process's
``/proc/PID/numa_maps`` (:mod:`.hostprobe`). Memory-bandwidth monitoring
(resctrl MBM) is not read in this version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vnuma.errors import NotFoundError
from vnuma.inventory.db import open_inventory
from vnuma.placement.model import Placement
from vnuma.placement.usage import HostUse, Locality, host_use, locality
from vnuma.services import Settings, hostprobe
from vnuma.topology import Host


@dataclass(frozen=True, slots=True)
class Measured:
    """Resident memory of a running VM's QEMU process per host NUMA node, and its local share."""

    pid: int
    node_kib: tuple[tuple[int, int], ...]
    local: float | None


@dataclass(frozen=True, slots=True)
class VmStats:
    """One VM: its state, planned locality and (when readable) measured memory placement."""

    locality: Locality
    state: str
    measured: Measured | None


@dataclass(frozen=True, slots=True)
class StatsReport:
    """Hosts' use and VMs' locality."""

    hosts: tuple[HostUse, ...]
    vms: tuple[VmStats, ...]


def measure(
    placement: Placement, run_dir: Path = hostprobe.RUN_DIR, proc: Path = hostprobe.PROC
) -> Measured | None:
    """Real memory placement of a VM's QEMU process, None when it is not running here."""
    pid = hostprobe.qemu_pid(placement.vm, run_dir)
    if pid is None:
        return None
    per_node = hostprobe.memory_by_node(pid, proc)
    if per_node is None:
        return None
    total = sum(per_node.values())
    mine = sum(kib for node, kib in per_node.items() if node in placement.host_cells)
    return Measured(pid, tuple(per_node.items()), mine / total if total else None)


def collect(
    settings: Settings,
    vm: str | None = None,
    host: str | None = None,
    *,
    run_dir: Path = hostprobe.RUN_DIR,
    proc: Path = hostprobe.PROC,
) -> StatsReport:
    """Stats of every host (or ``host``, or ``vm``'s host) and their VMs (or just ``vm``).

    Raises:
        NotFoundError: unknown VM or host.
    """
    inventory = open_inventory(settings.db_url)
    if vm is not None:
        placement, _state = inventory.get_vm(vm)
        if host is not None and placement.host != host:
            raise NotFoundError(f"VM {vm!r} is on host {placement.host!r}, not {host!r}")
        host = placement.host
    hosts: list[Host] = [inventory.get_host(host)] if host is not None else inventory.list_hosts()
    names = [h.name for h in hosts]
    placements = tuple(inventory.placements_on(names))
    isolation = inventory.tenant_isolations()
    by_name = {h.name: h for h in hosts}
    vms: list[VmStats] = []
    for p, state in inventory.list_vms(host=host):
        if vm is not None and p.vm != vm:
            continue
        probe = hostprobe.is_local_uri(by_name[p.host].uri) and state == "running"
        measured = measure(p, run_dir, proc) if probe else None
        vms.append(VmStats(locality(p, by_name[p.host]), str(state), measured))
    return StatsReport(tuple(host_use(h, placements, isolation) for h in hosts), tuple(vms))
