"""Memory performance between NUMA cells as the platform rates it (ACPI HMAT).

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
choice (:func:`vnuma.topology.tiers.cpu_cell_ratings`) and the cold tier go by CPU initiators only,
since a guest's memory is read by its vCPUs, never by another device's engine.

What the figures make of a host's cells (a cell's memory kind and tier, the ratings the cell choice
reads) is :mod:`vnuma.topology.tiers`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

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
