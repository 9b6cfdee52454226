"""The readable ``host show`` tables: cells, devices and the distance matrix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vnuma.cli import output
from vnuma.placement.resctrl import Classes
from vnuma.topology import Cell, Host, format_cpuset, format_size_kib
from vnuma.topology.leftout import LeftOut
from vnuma.topology.partitions import GpuUse
from vnuma.topology.resctrl import default_schemata, l3_banks


def host_tables(
    host: Host, use: Mapping[str, GpuUse], classes: Classes | None, left_out: Sequence[LeftOut] = ()
) -> None:
    """Print one host as tables; ``use``: each GPU's mode and free partitions as claimed now; ``classes``: the
    resctrl classes of service its VMs leave; ``left_out``: the parts its import left out (a table of its own,
    last, when there are any)."""
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
                format_cpuset(cell.cpu_ids) or _memory_only(cell),
                len(cell.cpus),
                len(cores),
                format_size_kib(cell.memory_kib),
                pages or "-",
                gpus,
                nics,
            )
        )
    output.echo_table("cells", ["CELL", "SOCKET", "CPUS", "NCPU", "CORES", "MEMORY", "HUGEPAGES", "GPUS", "NICS"], rows)
    if host.devices:
        output.echo_table(
            "devices",
            ["ADDRESS", "KIND", "CELL", "VENDOR", "PRODUCT", "PARENT"],
            [(d.address, d.kind, d.numa_node, d.vendor_id, d.product_id, d.parent) for d in host.devices],
        )
    states_table(host)
    pcie_tables(host)
    partition_table(host, use)
    memory_tables(host)
    if any(c.distances for c in host.cells):
        ids = [c.id for c in host.cells]
        output.echo_table(
            "distances",
            ["CELL", *map(str, ids)],
            [(c.id, *(c.distance_to(o) for o in ids)) for c in host.cells],
        )
    resctrl_tables(host, classes)
    if left_out:
        output.echo_table("left out when the host was read (vnuma host import --strict refuses such a host)",
                          ["PART", "WHY"], [(i.what, i.why) for i in left_out])


def _memory_only(cell: Cell) -> str:
    """The CPUS column of a memory-only cell: ``(memory only)``, or whose GPU memory (or empty GPU node) it is."""
    if cell.gpu_memory:
        what = "GPU memory" if cell.memory_kib else "GPU node"
        return f"({what} of {cell.gpu})" if cell.gpu is not None else f"({what})"
    return "(memory only)"


def states_table(host: Host) -> None:
    """The host's tainted and cleaning devices (and devices with their own --after-release), when it has any or
    its released devices are cleaned."""
    states = host.device_states
    kept = [d for d in states.devices if d.state is not None or d.after_release is not None]
    if not kept and states.after_release.value == "free":
        return
    output.echo_table(
        f"device states (tainted and cleaning devices take no new claims; after release: "
        f"{states.after_release.value})",
        ["DEVICE", "STATE", "REASON", "BY", "SINCE", "EFFECT", "AFTER-RELEASE", "CLEANING-S"],
        [(d.address, d.state.value if d.state else "-", d.reason or "-", d.by or "-", d.since or "-",
          d.effect.value if d.effect else "-", states.releases_to(d.address).value, f"{d.cleaning_s:.0f}")
         for d in kept],
    )


def partition_table(host: Host, use: Mapping[str, GpuUse]) -> None:
    """Each GPU's vGPU types (offered itself or through its virtual functions), and the MIG profiles of the
    GPUs whose model has a kept geometry, when any GPU has either: free as vnuma's claims leave them."""
    from vnuma.topology.partitions import mig_geometry, mig_partitions, vgpu_partitions

    def mode(gpu: str) -> str:
        """The GPU's mode, with its layout when it holds partitions (``mig: 3g.40gb@0 (vm1), ...``)."""
        found = use.get(gpu)
        if found is None or found.mode is None:
            return "-"
        held = ", ".join(f"{h.label()} ({h.vm})" for h in found.layout)
        return f"{found.mode}: {held}" if held else found.mode

    def free(gpu: str, name: str, total: int) -> int:
        found = use.get(gpu)
        return found.free.get(name, total) if found else total

    partitions = vgpu_partitions(host)
    if partitions:
        output.echo_table(
            "GPU partitions (vGPU types)",
            ["GPU", "MODE", "TYPE", "NAME", "FREE", "TOTAL"],
            [(gpu, mode(gpu), p.type, p.name, free(gpu, p.type, p.total), p.total)
             for gpu, ps in sorted(partitions.items()) for p in ps],
        )
    if host.mdevs:
        pf = {d.address: d.pf for d in host.devices if d.pf is not None}
        output.echo_table(
            "mediated devices (vGPU instances that exist on the host)",
            ["UUID", "TYPE", "ON", "GPU", "IOMMU GROUP"],
            [(m.uuid, m.type, m.parent, pf.get(m.parent, m.parent), "-" if m.iommu_group is None else m.iommu_group)
             for m in host.mdevs],
        )
    mig, models = mig_partitions(host), mig_geometry(host)
    if mig:
        output.echo_table(
            "GPU MIG profiles (vnuma gpu-profile; FREE: instances of the profile alone the GPU takes now, "
            "TOTAL: on the empty GPU)",
            ["GPU", "MODEL", "MODE", "PROFILES (FREE/TOTAL)"],
            [(gpu, models[gpu].model, mode(gpu), ", ".join(f"{m.profile} {free(gpu, m.profile, m.total)}/{m.total}"
                                                            for m in ms))
             for gpu, ms in sorted(mig.items())],
        )


def memory_tables(host: Host) -> None:
    """Memory tiers (kind, tier, memory-side caches) and the HMAT matrices, when the host has more than one
    kind of memory or publishes HMAT."""
    from vnuma.topology.hmat import nested
    from vnuma.topology.tiers import cell_kinds, cell_tiers

    kinds, tiers = cell_kinds(host), cell_tiers(host)
    hmat = host.hmat
    if len(set(kinds.values())) > 1 or not hmat.empty or any(c.caches for c in host.cells):
        output.echo_table(
            "memory tiers (0 is the fastest; kind from hwloc, else from HMAT, else unknown for memory-only cells)",
            ["CELL", "KIND", "TIER", "CPUS", "MEMORY-SIDE CACHE"],
            [
                (
                    c.id,
                    kinds[c.id],
                    tiers[c.id],
                    "yes" if c.cpus else "none",
                    ", ".join(
                        f"L{m.level} {format_size_kib(m.size_kib)} {m.associativity} {m.policy}" for m in c.caches
                    )
                    or "-",
                )
                for c in host.cells
            ],
        )
    shown = (
        ("latency_ns", "HMAT read latency (ns)", 1),
        ("bandwidth_kib_s", "HMAT read bandwidth (GiB/s)", 1 << 20),
        ("write_latency_ns", "HMAT write latency (ns)", 1),
        ("write_bandwidth_kib_s", "HMAT write bandwidth (GiB/s)", 1 << 20),
    )
    for key, title, scale in shown:
        matrix = nested(hmat.matrices()[key])
        if not matrix:
            continue
        targets = sorted({t for row in matrix.values() for t in row})
        output.echo_table(
            f"{title}: initiator cell (row) to memory cell (column)",
            ["CELL", *(str(t) for t in targets)],
            [(_initiator(host, i), *(_scaled(row.get(t), scale) for t in targets))
             for i, row in sorted(matrix.items())],
        )
    if hmat.ignored:
        output.echo_lines([f"HMAT initiators covering no cell's CPUs (ignored): {', '.join(hmat.ignored)}"])


def _initiator(host: Host, cell_id: int) -> str:
    """An HMAT row's initiator: the cell id, and for a cell without CPUs (a Generic Initiator) what it is."""
    cell = host.cell(cell_id)
    if cell.cpus:
        return str(cell_id)
    if cell.gpu is not None:
        return f"{cell_id} (GPU {cell.gpu})"
    return f"{cell_id} (GPU)" if cell.gpu_memory else f"{cell_id} (no CPUs)"


def _scaled(value: int | None, scale: int) -> str:
    if value is None:
        return "-"
    return str(value) if scale == 1 else f"{value / scale:.1f}"


def pcie_tables(host: Host) -> None:
    """The device tree by root complex, the GPU x NIC level matrix (when the host has both) and the GPU x GPU
    matrix (two GPUs or more)."""
    from vnuma.report.pcietree import level_table, tree_lines
    from vnuma.topology.pcie import gpu_matrix

    lines = tree_lines(host)
    if lines:
        output.echo_lines(["PCIe (GPUs and NICs under their root complex and bridges)", *lines])
    table = level_table(host)
    if table is not None:
        output.echo_table(
            "GPU x NIC (PIX one switch, PXB bridges, PHB host bridge, NODE same cell, SYS other cell)", *table
        )
    gpus, rows = gpu_matrix(host)
    if len(gpus) > 1:
        output.echo_table(
            "GPU x GPU, as nvidia-smi topo -m (NV# bonded NVLinks, else the PCIe level)",
            ["GPU", "ADDRESS", *(f"GPU{i}" for i in range(len(gpus))), "CPU AFFINITY", "NUMA AFFINITY"],
            [(f"GPU{i}", address, *row, *_affinity(host, address)) for i, (address, row) in enumerate(zip(gpus, rows,
                                                                                                        strict=True))],
        )


def _affinity(host: Host, gpu: str) -> tuple[str, str]:
    """The CPUs and NUMA node of a GPU's cell, as nvidia-smi's affinity columns ("-" without one)."""
    node = next(d.numa_node for d in host.devices if d.address == gpu)
    if node is None:
        return "-", "-"
    return format_cpuset(host.cell(node).cpu_ids) or "-", str(node)


def resctrl_tables(host: Host, classes: Classes | None) -> None:
    """The resctrl section: cache ids (not NUMA cells) with their ways and classes, bandwidth domains,
    monitors, the classes of service left to VMs; one line when the host reports none."""
    r = host.resctrl
    if r.empty:
        output.echo_lines(["resctrl: none (no cache or memory-bandwidth allocation or monitoring reported)"])
        return
    if r.caches:
        rows = []
        for bank in r.caches:
            control = bank.controls[0] if bank.controls else None
            rows.append(
                (
                    bank.id,
                    f"L{bank.level}",
                    "/".join(c.type for c in bank.controls) or bank.type,
                    format_size_kib(bank.size_kib),
                    bank.ways if bank.ways is not None else "-",
                    format_size_kib(control.granularity_kib) if control else "-",
                    format_size_kib(control.min_kib) if control else "-",
                    control.max_allocs if control else "monitor only",
                    format_cpuset(bank.cpus),
                    format_cpuset(host.cells_of(bank.cpus)) or "-",
                )
            )
        output.echo_table(
            "resctrl caches (ids are L3 cache ids, not NUMA cells)",
            ["CACHE ID", "LEVEL", "TYPE", "SIZE", "WAYS", "GRANULE", "MIN", "CLOS", "CPUS", "CELLS"],
            rows,
        )
    if r.memory_bandwidth:
        output.echo_table(
            "resctrl memory bandwidth",
            ["DOMAIN ID", "GRANULARITY", "MIN", "CLOS", "CPUS", "CELLS"],
            [
                (
                    n.id,
                    _or_dash(n.granularity),
                    _or_dash(n.min),
                    _or_dash(n.max_allocs),
                    format_cpuset(n.cpus),
                    format_cpuset(host.cells_of(n.cpus)) or "-",
                )
                for n in r.memory_bandwidth
            ],
        )
    features = [
        f"{what}: {', '.join(names) or '-'}"
        for what, names in (("cache", r.cache_monitors), ("memory bandwidth", r.bandwidth_monitors))
    ]
    limit = f"; {r.max_monitors} monitors at most" if r.max_monitors is not None else ""
    output.echo_lines([f"resctrl monitors: {'; '.join(features)}{limit}"])
    if classes is not None:
        output.echo_lines([classes_line(classes)])
    policy = host.resctrl_policy
    ways = policy.llc_default_ways
    lines = [f"resctrl policy: VMs' memory-bandwidth caps add up to at most {policy.mem_bw_limit} per domain"]
    if ways is None and l3_banks(r):
        lines.append(f"resctrl policy: no L3 ways kept for the host's own processes: no cache slice is placed "
                     f"here until `vnuma host reserve {host.name} --llc-ways N`")
    elif ways is not None:
        lines.append(f"resctrl policy: the host's own processes keep {ways} L3 way(s) of every cache; shrink its "
                     "default group to them (VMs' slices take the others):")
        lines += [f"  echo '{line}' > /sys/fs/resctrl/schemata" for line in default_schemata(r, ways)]
    output.echo_lines(lines)


def classes_line(c: Classes) -> str:
    """``resctrl classes of service: 2 of 3 left (...)``: what VMs may still take of the host's."""
    line = (f"resctrl classes of service: {c.left} of {c.total} left (host-wide: the host has {c.total + 1}, its "
            f"default group holds one, each VM with a slice or a cap one, whatever its cells)")
    if c.used > c.total:
        line += f"; {c.used} VMs hold one: {c.used - c.total} more than the host can start at once"
    return line


def _or_dash(value: int | None) -> int | str:
    return "-" if value is None else value
