"""Whether a host's topology holds together: ids, siblings, distances, devices, reserved CPUs, resctrl, HMAT,
NVLinks.

Pure: no I/O. Every reader of a topology (capabilities and hwloc files, traces, the inventory's documents)
asks :func:`check_host` before a host is used.
"""

from __future__ import annotations

from vnuma.errors import InvalidInputError
from vnuma.topology import DeviceKind, Host, format_cpuset
from vnuma.topology.hmat import hmat_problem
from vnuma.topology.nvlink import nvlinks_problem
from vnuma.topology.resctrl import resctrl_problem


def check_host(host: Host) -> Host:
    """Check a host's internal consistency and return it.

    Raises:
        InvalidInputError: duplicate cell or CPU ids, siblings naming a CPU
            that does not exist, distances to missing cells, a device on a
            missing cell, reserved CPUs that do not exist, inconsistent
            resctrl facts (:func:`vnuma.topology.resctrl.resctrl_problem`).
    """
    where = f"host {host.name!r}"
    cell_ids = [c.id for c in host.cells]
    if len(set(cell_ids)) != len(cell_ids):
        raise InvalidInputError(f"{where}: duplicate NUMA cell ids {sorted(cell_ids)}")
    if not host.cells:
        raise InvalidInputError(f"{where}: no NUMA cells")
    seen: set[int] = set()
    for cell in host.cells:
        for cpu in cell.cpus:
            if cpu.id in seen:
                raise InvalidInputError(f"{where}: CPU {cpu.id} appears in more than one cell")
            seen.add(cpu.id)
    for cell in host.cells:
        for cpu in cell.cpus:
            missing = cpu.siblings - seen
            if missing:
                raise InvalidInputError(
                    f"{where}: cell {cell.id} CPU {cpu.id} lists missing sibling CPU(s) "
                    f"{format_cpuset(missing)}"
                )
        for other, dist in cell.distances:
            if other not in cell_ids:
                raise InvalidInputError(f"{where}: cell {cell.id} has a distance to missing cell {other}")
            if dist < 10:
                raise InvalidInputError(f"{where}: cell {cell.id} distance {dist} to cell {other} is below 10")
        if cell.gpu_memory and cell.cpus:
            raise InvalidInputError(f"{where}: cell {cell.id} is GPU memory but has CPUs")
    addresses = {d.address for d in host.devices}
    uuids: set[str] = set()
    for mdev in host.mdevs:
        if mdev.parent not in addresses:
            raise InvalidInputError(
                f"{where}: mediated device {mdev.uuid} is on PCI device {mdev.parent}, which is not among the "
                "host's devices (give its node device too)"
            )
        if mdev.uuid in uuids:
            raise InvalidInputError(f"{where}: mediated device {mdev.uuid} is listed twice")
        uuids.add(mdev.uuid)
    for dev in host.devices:
        if dev.numa_node is not None and dev.numa_node not in cell_ids:
            raise InvalidInputError(f"{where}: device {dev.address} is on missing NUMA cell {dev.numa_node}")
    stray = host.reserved_cpus - seen
    if stray:
        raise InvalidInputError(f"{where}: reserved CPU(s) {format_cpuset(stray)} do not exist")
    problem = resctrl_problem(host.resctrl, frozenset(seen))
    if problem is not None:
        raise InvalidInputError(f"{where}: resctrl {problem}")
    problem = hmat_problem(host.hmat, frozenset(cell_ids))
    if problem is not None:
        raise InvalidInputError(f"{where}: {problem}")
    problem = nvlinks_problem(host.nvlinks, frozenset(d.address for d in host.devices_of(DeviceKind.GPU)))
    if problem is not None:
        raise InvalidInputError(f"{where}: {problem}")
    return host
