"""The readable ``host show`` tables: cells, devices and the distance matrix."""

from __future__ import annotations

from vnuma.cli import output
from vnuma.topology import Host, format_cpuset, format_size_kib


def host_tables(host: Host) -> None:
    """Print one host as three tables."""
    reserved = format_cpuset(host.reserved_cpus) or "none"
    output.echo_lines([f"host {host.name}  source={host.source}  uri={host.uri or '-'}  reserved={reserved}"])
    rows = []
    for cell in host.cells:
        cores = {(c.socket, c.die, c.core) if c.core is not None else frozenset(c.siblings) for c in cell.cpus}
        sockets = sorted({c.socket for c in cell.cpus if c.socket is not None})
        pages = ", ".join(
            f"{p.count} x {format_size_kib(p.size_kib)}" for p in cell.pages if p.size_kib != 4 and p.count
        )
        gpus = sum(1 for d in host.devices if d.numa_node == cell.id and d.kind == "gpu")
        nics = sum(1 for d in host.devices if d.numa_node == cell.id and d.kind == "nic")
        rows.append(
            (
                cell.id,
                ",".join(map(str, sockets)) or "-",
                format_cpuset(cell.cpu_ids) or "(memory only)",
                len(cell.cpus),
                len(cores),
                format_size_kib(cell.memory_kib),
                pages or "-",
                gpus,
                nics,
            )
        )
    output.echo_table(
        "cells", ["CELL", "SOCKET", "CPUS", "NCPU", "CORES", "MEMORY", "HUGEPAGES", "GPUS", "NICS"], rows
    )
    if host.devices:
        output.echo_table(
            "devices",
            ["ADDRESS", "KIND", "CELL", "VENDOR", "PRODUCT", "PARENT"],
            [(d.address, d.kind, d.numa_node, d.vendor_id, d.product_id, d.parent) for d in host.devices],
        )
    if any(c.distances for c in host.cells):
        ids = [c.id for c in host.cells]
        output.echo_table(
            "distances",
            ["CELL", *map(str, ids)],
            [(c.id, *(c.distance_to(o) for o in ids)) for c in host.cells],
        )
