"""Memory performance between NUMA cells as the platform rates it (ACPI HMAT), and the memory tiers.

Pure: no I/O. Where SLIT distances (10/12/21) only say which node is nearer,
HMAT gives, per initiator and target (a cell with memory), read and write
latency (ns) and bandwidth (KiB/s). libvirt's capabilities list them under
``<interconnects>`` for each target's best initiator; hwloc as memory
attributes whose initiators are cpusets (mapped to the cells whose CPUs they
cover entirely; the others are kept in ``ignored`` and shown) or a GPU (the
cell of its own memory, :mod:`vnuma.sources.hwloc`). These are rated platform
values, not measurements.

An initiator is usually a cell with CPUs. It may also be a cell without CPUs:
an ACPI *Generic Initiator*, a device that accesses memory itself. Grace
Hopper and Grace Blackwell in NUMA mode name the GPU so, as the initiator of
its own memory's node (:mod:`vnuma.sources.gpunodes` records which GPU it is).
Such figures are kept and shown, and rank nothing: a cell's kind, the cell
choice (:func:`cpu_cell_ratings`) and the cold tier go by CPU initiators only,
since a guest's memory is read by its vCPUs, never by another device's engine.

A cell's **kind** (:func:`cell_kinds`): hwloc names it (its NUMA node
``subtype``: ``DRAM``, ``HBM``/``MCDRAM``, ``CXL``...); capabilities do not,
so a cell with CPUs is ``dram``, and a memory-only cell is ``hbm`` when its
best read bandwidth from a CPU cell beats every CPU cell's own, ``cxl`` when
HMAT rates it below, and ``unknown`` without HMAT figures from a CPU cell for
it. A GPU's own memory (:attr:`vnuma.topology.Cell.gpu_memory`) is ``gpu``
whatever HMAT says: it is no tier of the host's memory, and ranks last. A
cell's **tier** (:func:`cell_tiers`) ranks the kinds present on the host,
fastest first: ``hbm``, ``dram``, ``cxl``, ``unknown``, ``gpu`` (0 is the
fastest tier the host has).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from vnuma.topology import Host

KINDS = ("hbm", "dram", "cxl", "unknown", "gpu")
"""Memory kinds, fastest first (``gpu``, a GPU's own memory, is no host tier: last)."""
_SUBTYPES = {"DRAM": "dram", "HBM": "hbm", "MCDRAM": "hbm", "CXL": "cxl", "CXL-DRAM": "cxl", "NVM": "cxl"}

Matrix = tuple[tuple[int, int, int], ...]
"""(initiator cell, target cell, value) triples sorted by initiator then target."""


@dataclass(frozen=True, slots=True)
class Hmat:
    """HMAT figures per (initiator, target): latency in ns, bandwidth in KiB/s; read and write apart."""

    latency_ns: Matrix = ()
    bandwidth_kib_s: Matrix = ()
    write_latency_ns: Matrix = ()
    write_bandwidth_kib_s: Matrix = ()
    ignored: tuple[str, ...] = ()
    """hwloc initiators (cpusets) that cover no cell's CPUs entirely, as written in the file."""

    @property
    def empty(self) -> bool:
        return not (self.latency_ns or self.bandwidth_kib_s or self.write_latency_ns or self.write_bandwidth_kib_s)

    def matrices(self) -> dict[str, Matrix]:
        return {
            "latency_ns": self.latency_ns,
            "bandwidth_kib_s": self.bandwidth_kib_s,
            "write_latency_ns": self.write_latency_ns,
            "write_bandwidth_kib_s": self.write_bandwidth_kib_s,
        }


NO_HMAT = Hmat()


class Where(Protocol):
    """A place in a document being read: its children by key or index, and the error naming it."""

    def key(self, name: str) -> Where: ...

    def index(self, i: int) -> Where: ...

    def fail(self, problem: str) -> Exception: ...


def hmat_from_json(value: object, at: Where) -> Hmat:
    """HMAT in its JSON form (``host show --json``, traces): ``{"latency_ns": {"<initiator>": {"<target>":
    int}}, "bandwidth_kib_s": …, "write_latency_ns": …, "write_bandwidth_kib_s": …, "ignored_initiators":
    [cpuset]}``, every key optional; ids decimal strings, values integers of 1 or more. Which cells they name
    is the host's check (:func:`hmat_problem`).

    Raises:
        the error ``at.fail`` makes, naming the key.
    """
    if not isinstance(value, Mapping):
        raise at.fail("expected an object")
    matrices = {name: _matrix_from_json(value.get(name) or {}, at.key(name)) for name in NO_HMAT.matrices()}
    ignored = value.get("ignored_initiators") or []
    if not isinstance(ignored, list) or not all(isinstance(v, str) for v in ignored):
        raise at.key("ignored_initiators").fail("expected a list of strings")
    return Hmat(**matrices, ignored=tuple(ignored))


def _matrix_from_json(raw: object, at: Where) -> Matrix:
    if not isinstance(raw, Mapping):
        raise at.fail("expected an object of initiator cell id -> {target cell id -> value}")
    out = []
    for initiator, row in raw.items():
        r_at = at.key(str(initiator))
        if not isinstance(initiator, str) or not initiator.isdecimal() or len(initiator) > 9:
            raise r_at.fail("initiator cell ids must be decimal strings")
        if not isinstance(row, Mapping):
            raise r_at.fail("expected an object of target cell id -> value")
        for target, number in row.items():
            t_at = r_at.key(str(target))
            if not isinstance(target, str) or not target.isdecimal() or len(target) > 9:
                raise t_at.fail("target cell ids must be decimal strings")
            if type(number) is not int or number < 1:
                raise t_at.fail(f"expected an integer of 1 or more, got {number!r}")
            out.append((int(initiator), int(target), number))
    return tuple(sorted(out))


def nested(matrix: Matrix) -> dict[int, dict[int, int]]:
    """``{initiator: {target: value}}``."""
    out: dict[int, dict[int, int]] = {}
    for initiator, target, value in matrix:
        out.setdefault(initiator, {})[target] = value
    return out


def hmat_problem(hmat: Hmat, cell_ids: frozenset[int]) -> str | None:
    """The first entry naming a cell the host lacks, a pair given twice or a value below 1; None when
    consistent. An initiator without CPUs is no problem (a Generic Initiator: see the module doc)."""
    for name, matrix in hmat.matrices().items():
        seen: set[tuple[int, int]] = set()
        for initiator, target, value in matrix:
            where = f"hmat {name} initiator {initiator} target {target}"
            if initiator not in cell_ids or target not in cell_ids:
                return f"{where}: there is no cell {initiator if initiator not in cell_ids else target}"
            if (initiator, target) in seen:
                return f"{where}: listed twice"
            seen.add((initiator, target))
            if value < 1:
                return f"{where}: value {value} is below 1"
    return None


def cpu_initiated(matrix: Matrix, cpu_cells: Iterable[int]) -> dict[int, dict[int, int]]:
    """``{initiator: {target: value}}`` of the rows whose initiator is one of ``cpu_cells``: the figures that
    rank memory (a Generic Initiator's are left out, see the module doc)."""
    keep = frozenset(cpu_cells)
    return {i: row for i, row in nested(matrix).items() if i in keep}


def _best(matrix: Mapping[int, Mapping[int, int]], target: int, *, low: bool) -> int | None:
    values = [row[target] for row in matrix.values() if target in row]
    if not values:
        return None
    return min(values) if low else max(values)


def cell_kinds(host: Host) -> dict[int, str]:
    """Each cell's memory kind (see the module doc), by cell id."""
    cpu_cells = [c.id for c in host.cells if c.cpus]
    bandwidth = cpu_initiated(host.hmat.bandwidth_kib_s, cpu_cells)
    latency = cpu_initiated(host.hmat.latency_ns, cpu_cells)
    own_bandwidth = [bandwidth.get(c, {}).get(c) for c in cpu_cells]
    own_latency = [latency.get(c, {}).get(c) for c in cpu_cells]
    dram_bandwidth = max((b for b in own_bandwidth if b is not None), default=None)
    dram_latency = min((v for v in own_latency if v is not None), default=None)
    kinds: dict[int, str] = {}
    for cell in host.cells:
        named = _SUBTYPES.get((cell.subtype or "").upper())
        if cell.gpu_memory:
            kinds[cell.id] = "gpu"
        elif named is not None:
            kinds[cell.id] = named
        elif cell.cpus:
            kinds[cell.id] = "dram"
        else:
            kinds[cell.id] = _memory_only_kind(cell.id, bandwidth, latency, dram_bandwidth, dram_latency)
    return kinds


def _memory_only_kind(
    cell: int, bandwidth: Mapping[int, Mapping[int, int]], latency: Mapping[int, Mapping[int, int]],
    dram_bandwidth: int | None, dram_latency: int | None,
) -> str:
    best = _best(bandwidth, cell, low=False)
    if best is not None and dram_bandwidth is not None:
        return "hbm" if best > dram_bandwidth else "cxl"
    nearest = _best(latency, cell, low=True)
    if nearest is not None and dram_latency is not None:
        return "hbm" if nearest < dram_latency else "cxl"
    return "unknown"


def cell_tiers(host: Host) -> dict[int, int]:
    """Each cell's tier: the rank of its kind among the kinds the host has, 0 the fastest."""
    kinds = cell_kinds(host)
    present = sorted(set(kinds.values()), key=KINDS.index)
    return {cell: present.index(kind) for cell, kind in kinds.items()}


UNRATED_LATENCY_NS = 1 << 40
"""The latency a pair HMAT does not rate counts as: worse than any rated one."""


def cpu_cell_ratings(host: Host) -> dict[tuple[int, int], tuple[int, int]] | None:
    """(read bandwidth KiB/s, read latency ns) per ordered pair (initiator, target) of the host's CPU cells,
    0 and :data:`UNRATED_LATENCY_NS` where HMAT rates one figure and not the other; pairs it rates neither for
    are left out. None when it rates no pair of CPU cells (the cell choice then goes by SLIT alone)."""
    cpu_cells = {c.id for c in host.cells if c.cpus}
    bandwidth = {(i, t): v for i, t, v in host.hmat.bandwidth_kib_s if i in cpu_cells and t in cpu_cells}
    latency = {(i, t): v for i, t, v in host.hmat.latency_ns if i in cpu_cells and t in cpu_cells}
    pairs = bandwidth.keys() | latency.keys()
    if not pairs:
        return None
    return {p: (bandwidth.get(p, 0), latency.get(p, UNRATED_LATENCY_NS)) for p in pairs}
