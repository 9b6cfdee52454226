"""The guest's CPU topology (``<topology sockets dies cores threads>``): following the host, or as asked.

Pure: no I/O. :func:`guest_topology` follows the host's sockets and the placement's threads per core;
:func:`topology_of` puts in what the operator asks (``--sockets/--cores/--threads``).
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.errors import ConfigError
from vnuma.placement.model import CellAssignment
from vnuma.topology import Host


@dataclass(frozen=True, slots=True)
class Topology:
    """``<topology sockets dies cores threads>``; their product is the vCPU count."""

    sockets: str
    dies: str
    cores: str
    threads: str


def guest_topology(
    threads_per_core: int, cell_vcpus: tuple[int, ...], cell_sockets: tuple[int | None, ...] | None = None
) -> Topology:
    """Sockets/dies/cores/threads whose product is ``sum(cell_vcpus)``, following the host.

    When the guest cells with vCPUs are equal: one guest socket per host
    socket they span (``cell_sockets``, the host socket of each guest cell's
    host cell), provided each of those sockets holds as many of the guest's
    cells (two cells of one SNC/NPS socket make one guest socket, not two);
    without socket facts, or when the sockets hold unequal shares, one socket
    per guest cell. Unequal cells make one socket. ``threads_per_core`` falls
    back to 1 when some cell's vCPUs do not split into whole cores of that size.
    """
    total = sum(cell_vcpus)
    cpu_cells = [n for n in cell_vcpus if n]
    threads = (
        threads_per_core if threads_per_core > 0 and all(n % threads_per_core == 0 for n in cpu_cells) else 1
    )
    sockets = len(cpu_cells) if cpu_cells and len(set(cpu_cells)) == 1 else 1
    if sockets > 1 and cell_sockets is not None:
        spanned = [s for n, s in zip(cell_vcpus, cell_sockets, strict=True) if n]
        shares = {s: spanned.count(s) for s in spanned}
        if None not in shares and len(set(shares.values())) == 1:
            sockets = len(shares)
    cores = total // (sockets * threads)
    return Topology(str(sockets), "1", str(cores), str(threads))


def topology_of(
    follows: Topology, vcpus: int, *, sockets: int | None, cores: int | None, threads: int | None
) -> Topology:
    """The host-following topology with the operator's ``--sockets/--cores/--threads`` (None: not given) put in.

    A value not given keeps the host-following one, except cores, which
    takes what the product leaves when not given (``--threads 1`` on 16
    vCPUs in 2 sockets gives 8 cores each).

    Raises:
        ConfigError: a value below 1, or a product other than the vCPU count.
    """
    asked = {"sockets": sockets, "cores": cores, "threads": threads}
    if all(v is None for v in asked.values()):
        return follows
    bad = [f"--{k} {v}" for k, v in asked.items() if v is not None and v < 1]
    if bad:
        raise ConfigError(f"{', '.join(bad)}: a guest CPU topology count must be 1 or more")
    sockets = sockets or int(follows.sockets)
    threads = threads or int(follows.threads)
    if cores is None:
        cores = vcpus // (sockets * threads) if vcpus % (sockets * threads) == 0 else 0
    if sockets * cores * threads != vcpus:
        raise ConfigError(
            f"guest CPU topology {sockets} socket(s) x {cores or '?'} core(s) x {threads} thread(s) does not "
            f"make the VM's {vcpus} vCPUs",
            hint="make their product the vCPU count: `vnuma apply VM --sockets S --cores C --threads T` "
            "(`vnuma render` takes the same)",
        )
    return Topology(str(sockets), "1", str(cores), str(threads))


def host_sockets(host: Host, cells: tuple[CellAssignment, ...]) -> tuple[int | None, ...]:
    """The host socket of each guest cell's host cell (None: not known, or its CPUs span several); the
    host cells exist (:func:`vnuma.render.view.build_view` checked them)."""
    out: list[int | None] = []
    for c in cells:
        found = {cpu.socket for cpu in host.cell(c.host_cell).cpus}
        out.append(found.pop() if len(found) == 1 else None)
    return tuple(out)
