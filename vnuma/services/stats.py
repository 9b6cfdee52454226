"""``vnuma stats``: per-cell use, fragmentation and per-VM locality, planned and measured.

Reads the inventory (one transaction per read) and, for running VMs on
hosts whose libvirt URI is local (``qemu:///...``), the QEMU process's
``/proc/PID/numa_maps`` (:mod:`.hostprobe`). For running VMs on any host
with a libvirt URI, the memory-bandwidth monitors libvirt reports (resctrl
MBM, :mod:`vnuma.sources.mbm`): only domains whose definition has a
``<memorytune><monitor/>`` on hosts with MBM have any. A host whose libvirt
cannot be reached gives a warning, not an error: the inventory's figures
are still shown. A local host with memory-only cells is warned about when
this machine's kernel demotes pages to slower tiers or balances between
tiers (``/sys/kernel/mm/numa/demotion_enabled``, ``kernel.numa_balancing``
bit 2): both move a strictly bound VM's pages behind libvirt's back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vnuma.errors import HypervisorError, NotFoundError
from vnuma.hypervisor.base import Hypervisor
from vnuma.inventory.reading import Snapshot, open_reader
from vnuma.placement.model import Placement
from vnuma.report.usage import HostUse, Locality, UsageCache, locality
from vnuma.services import Settings, hostprobe
from vnuma.services.hypervisors import KeptDomains, open_hypervisor
from vnuma.sources.mbm import local_share, parse_memory_bandwidth
from vnuma.topology import Host


@dataclass(frozen=True, slots=True)
class Measured:
    """Resident memory of a running VM's QEMU process per host NUMA node, and its local share."""

    pid: int
    node_kib: tuple[tuple[int, int], ...]
    local: float | None


@dataclass(frozen=True, slots=True)
class Bandwidth:
    """Memory traffic counted by a VM's MBM monitors: to local controllers, in all, and the local share."""

    local_bytes: int
    total_bytes: int
    local: float | None


@dataclass(frozen=True, slots=True)
class VmStats:
    """One VM: its state, planned locality and (when readable) measured memory placement and bandwidth."""

    locality: Locality
    state: str
    measured: Measured | None
    bandwidth: Bandwidth | None = None


@dataclass(frozen=True, slots=True)
class StatsReport:
    """Hosts' use, VMs' locality, and warnings about hosts whose libvirt could not be read."""

    hosts: tuple[HostUse, ...]
    vms: tuple[VmStats, ...]
    warnings: tuple[str, ...] = ()


class _Bandwidths:
    """MBM counters of running VMs, one libvirt connection per host, opened when first needed."""

    def __init__(self, keeper: KeptDomains) -> None:
        self.keeper = keeper
        self.conns: dict[str, Hypervisor | None] = {}
        self.warnings: list[str] = []

    def of(self, vm: str, host: Host) -> Bandwidth | None:
        if not host.uri:
            return None
        if host.name not in self.conns:
            try:
                self.conns[host.name] = open_hypervisor(self.keeper, host.name, host.uri)
            except HypervisorError as err:
                self.conns[host.name] = None
                self.warnings.append(f"host {host.name}: no memory-bandwidth figures: {err}")
        hv = self.conns[host.name]
        if hv is None:
            return None
        try:
            monitors = parse_memory_bandwidth(hv.monitor_stats([vm]).get(vm, {}))
        except HypervisorError as err:
            self.warnings.append(f"VM {vm}: no memory-bandwidth figures: {err}")
            return None
        if not monitors:
            return None
        return Bandwidth(*local_share(monitors))

    def close(self) -> None:
        for hv in self.conns.values():
            if hv is not None:
                hv.close()


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


def select(snap: Snapshot, vm: str | None, host: str | None) -> tuple[list[Host], tuple[Placement, ...]]:
    """The hosts ``stats`` reports on (``host``, ``vm``'s host, or all) and the placements on them.

    Raises:
        NotFoundError: unknown VM or host, or a VM that is not on ``host``.
    """
    by_name = {h.name: h for h in snap.hosts}
    if vm is not None:
        placement = next((p for p in snap.placements if p.vm == vm), None)
        if placement is None:
            raise NotFoundError(f"VM {vm!r} is not in the inventory", hint="see `vnuma vm list`")
        if host is not None and placement.host != host:
            raise NotFoundError(f"VM {vm!r} is on host {placement.host!r}, not {host!r}")
        host = placement.host
    if host is not None and host not in by_name:
        raise NotFoundError(f"host {host!r} is not in the inventory", hint="see `vnuma host list`")
    hosts = [by_name[host]] if host is not None else list(snap.hosts)
    return hosts, tuple(p for p in snap.placements if host is None or p.host == host)


def collect(
    settings: Settings,
    vm: str | None = None,
    host: str | None = None,
    *,
    run_dir: Path = hostprobe.RUN_DIR,
    proc: Path = hostprobe.PROC,
    sys_root: Path = hostprobe.SYS,
) -> StatsReport:
    """Stats of every host (or ``host``, or ``vm``'s host) and their VMs (or just ``vm``).

    A host on this machine's libvirt (``qemu:///...``) with memory-only cells gets a warning for each
    kernel setting that moves pages between tiers behind strict binding (:func:`hostprobe.tiering_problems`).

    Raises:
        NotFoundError: unknown VM or host.
    """
    with open_reader(settings.db_url) as reader:
        view = reader.fleet_view()
        snap = view.snapshot
        by_name = {h.name: h for h in snap.hosts}
        hosts, placements = select(snap, vm, host)
        vms: list[VmStats] = []
        bandwidths = _Bandwidths(reader)
        try:
            for p in placements:
                if vm is not None and p.vm != vm:
                    continue
                state = view.states[p.vm]
                running = state == "running"
                probe = hostprobe.is_local_uri(by_name[p.host].uri) and running
                measured = measure(p, run_dir, proc) if probe else None
                bandwidth = bandwidths.of(p.vm, by_name[p.host]) if running else None
                vms.append(VmStats(locality(p, by_name[p.host]), str(state), measured, bandwidth))
        finally:
            bandwidths.close()
    cache = UsageCache({name: t.isolation for name, t in snap.tenants.items()})
    on_host: dict[str, list[Placement]] = {}
    for p in placements:
        on_host.setdefault(p.host, []).append(p)
    uses = tuple(cache.host_use(h, on_host.get(h.name, ())) for h in hosts)
    tiered = [h.name for h in hosts if hostprobe.is_local_uri(h.uri) and any(c.memory_only for c in h.cells)]
    tiering = hostprobe.tiering_warnings(sys_root, proc) if tiered else []
    warnings = [f"host {name}: {problem}" for name in tiered for problem in tiering]
    return StatsReport(uses, tuple(vms), tuple(bandwidths.warnings + warnings))
