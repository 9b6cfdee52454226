"""The parts of a host an import leaves out, and the one step every import path runs to find them.

Pure: no I/O. Real machines and their tools produce files that are partly
unusable: a PU in no NUMA node (an offline node, a cgroup-restricted
``lstopo``), one device among a hundred with a malformed address or listed
twice, hugepage pools larger than their cell (libvirt's own test files),
a memory-only cell without memory, HMAT figures naming cells that do not
exist. An import keeps what is usable and lists every part it left out,
with why (:class:`LeftOut`); ``--strict`` refuses instead (:func:`refusal`).

What only one format can say is found where that format is read (a hwloc PU
in no node, a node-device document that cannot be read). Everything a
:class:`Host` itself can show is decided here, once, by :func:`usable`, which
every parser and every path that joins devices to a topology runs:

1. a **memory-only cell that lists pages but no memory** (no CPUs, 0 KiB
   or less), or a negative memory size, is left out, with its distances,
   HMAT figures and pages (one line says so for all). An empty node (no
   CPUs, no memory, no pages: a node the kernel keeps for memory that may
   come, such as a Grace Hopper GPU's nodes kept for MIG,
   :mod:`vnuma.sources.gpunodes`) is kept as it is: nothing in it is
   usable, and nothing is lost. A **negative memory size or page count**
   of another cell is read as 0;
2. **page pools fit their cell** (:func:`fit_pools`): each pool keeps at most
   what the cell's memory holds, the largest pages first, so when the pools
   together exceed the memory the smallest pages are cut first. On a real
   host the hugepage counts are the kernel's own pools, carved from that
   node's memory, while the 4 KiB count is derived (libvirt and hwloc both
   report the node's memory minus its hugepages): a sum above the memory is
   the derived count's error. A hugepage count that alone exceeds the cell
   (libvirt's test files list 6144 × 1 GiB pages on a 1 GiB cell) is capped
   to what fits;
3. a **distance** naming a cell the host does not have, or below 10 (SLIT's
   own distance), is left out; so is an **HMAT figure** naming a cell the
   host does not have, or below 1 (negative figures included);
4. a **device listed twice** is left out, every copy (which one is right
   cannot be told); a device on a **NUMA node the host does not have** is
   kept without a node (it is usable, its locality is not), and the node
   is listed as left out;
5. a **mediated device** on a PCI device the host does not have, or listed
   twice, is left out.

What stays wrong after these steps (a CPU in two cells, siblings that do
not exist, duplicate cell ids...) is refused by :func:`vnuma.topology.hostcheck.check_host`.
A GPU or NIC left out is named as one (``device 0000:3b:00.0 (GPU)``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from vnuma.errors import InvalidInputError
from vnuma.topology import Cell, DeviceKind, Host, PagePool, PciDevice, format_cpuset, format_size_kib
from vnuma.topology.hmat import Hmat, Matrix
from vnuma.topology.hostcheck import check_host

T = TypeVar("T")
_HMAT_NAMES = {
    "latency_ns": "read latency", "bandwidth_kib_s": "read bandwidth",
    "write_latency_ns": "write latency", "write_bandwidth_kib_s": "write bandwidth",
}


@dataclass(frozen=True, slots=True)
class LeftOut:
    """One part of a host an import left out: ``what`` names it (``PU 0``, ``device 0000:04:00.0``),
    ``why`` says why (``in no NUMA node``)."""

    what: str
    why: str

    def line(self) -> str:
        """The sentence printed on stderr: ``PU 0: in no NUMA node, left out``."""
        return f"{self.what}: {self.why}, left out"


@dataclass(frozen=True, slots=True)
class Imported:
    """A host as an import read it: its usable part, checked, and every part left out, in the order found."""

    host: Host
    left_out: tuple[LeftOut, ...] = ()


def numbered(noun: str, ids: Iterable[int]) -> str:
    """``PU 4`` for one id, ``PUs 4,6,8-11`` for several (the plural adds an ``s``)."""
    ids = sorted(set(ids))
    return f"{noun} {ids[0]}" if len(ids) == 1 else f"{noun}s {format_cpuset(ids)}"


def device_label(address: str, kind: DeviceKind | None) -> str:
    """``device 0000:3b:00.0 (GPU)``: a GPU or NIC says what it is; any other device, or an unknown kind, not."""
    shown = {DeviceKind.GPU: " (GPU)", DeviceKind.NIC: " (NIC)"}.get(kind) if kind is not None else None
    return f"device {address}{shown or ''}"


def refusal(left_out: Sequence[LeftOut], where: str, *, hint: str | None = None) -> InvalidInputError | None:
    """The error a strict import raises when parts would be left out (None when nothing is): the first
    part, and how many more."""
    if not left_out:
        return None
    first = left_out[0]
    others = len(left_out) - 1
    more = f" (and {others} more part{'s' if others > 1 else ''} to leave out)" if others else ""
    return InvalidInputError(f"{where}: {first.what} would be left out: {first.why}{more}", hint=hint)


def usable(host: Host, left_out: Iterable[LeftOut] = ()) -> Imported:
    """The usable part of a host as a parser read it (see the module doc for what is left out), checked.

    ``left_out``: what the parser already left out; the result lists it first.

    Raises:
        InvalidInputError: what is still inconsistent (:func:`vnuma.topology.hostcheck.check_host`).
    """
    found = list(left_out)
    file_cells = {c.id for c in host.cells}
    cells = []
    for cell in host.cells:
        pages = sum(p.count for p in cell.pages if p.count > 0)
        if not cell.cpus and cell.memory_kib <= 0 and (pages or cell.memory_kib < 0):
            said = [f"{cell.memory_kib} KiB" if cell.memory_kib else "", f"{pages} pages listed" if pages else ""]
            shown = "; ".join(filter(None, said))
            found.append(LeftOut(f"cell {cell.id}", "no CPUs and no memory" + (f" ({shown})" if shown else "")))
            continue
        cell = _no_negatives(cell, found)
        pools, cut = fit_pools(cell.memory_kib, cell.pages)
        found.extend(_cut_pools(cell, pools, cut))
        cells.append(replace(cell, pages=pools))
    kept = {c.id for c in cells}
    if not cells and host.cells:
        raise InvalidInputError(f"host {host.name!r}: no usable NUMA cell ({found[-1].what}: {found[-1].why})")

    def missing(cell_id: int) -> str | None:
        """Why a cell another part names is not there; None when it is (or left out above: said once)."""
        return None if cell_id in kept or cell_id in file_cells else f"the host has no cell {cell_id}"

    cells = _fit_distances(cells, kept, missing, found)
    devices, twice = unique_devices(host.devices)
    found += twice
    devices = [_on_a_cell(d, kept, file_cells, found) for d in devices]
    addresses = {d.address for d in devices}
    mdevs = _unique(host.mdevs, lambda m: m.uuid, lambda m: f"mediated device {m.uuid}", found)
    for mdev in mdevs:
        if mdev.parent not in addresses:
            found.append(LeftOut(f"mediated device {mdev.uuid}", f"on PCI device {mdev.parent}, which the host "
                                 "does not have"))
    result = replace(
        host, cells=tuple(cells), devices=tuple(sorted(devices, key=lambda d: d.address)),
        mdevs=tuple(m for m in mdevs if m.parent in addresses), hmat=_fit_hmat(host.hmat, kept, missing, found),
    )
    return Imported(check_host(result), tuple(found))


def fit_pools(memory_kib: int, pools: Sequence[PagePool]) -> tuple[tuple[PagePool, ...], dict[int, int]]:
    """The pools a cell of ``memory_kib`` can hold, and how many pages of each size were cut.

    The largest pages are kept first: each pool keeps as many pages as the
    memory the larger ones leave holds, so the smallest pages are cut first
    (see the module doc for why). Pools keep their order.
    """
    left = memory_kib
    kept: dict[int, int] = {}
    for pool in sorted(pools, key=lambda p: -p.size_kib):
        kept[pool.size_kib] = min(pool.count, max(left, 0) // pool.size_kib)
        left -= kept[pool.size_kib] * pool.size_kib
    fitted = tuple(PagePool(p.size_kib, kept[p.size_kib]) for p in pools)
    return fitted, {p.size_kib: p.count - kept[p.size_kib] for p in pools if p.count > kept[p.size_kib]}


def _no_negatives(cell: Cell, found: list[LeftOut]) -> Cell:
    """The cell with a negative memory size or page count read as 0 (said in ``found``)."""
    memory = cell.memory_kib
    if memory < 0:
        found.append(LeftOut(f"memory of cell {cell.id}", f"{memory} KiB is negative"))
    for pool in cell.pages:
        if pool.count < 0:
            found.append(LeftOut(f"{format_size_kib(pool.size_kib)} page count of cell {cell.id}",
                                 f"{pool.count} is negative"))
    if memory >= 0 and all(p.count >= 0 for p in cell.pages):
        return cell
    return replace(cell, memory_kib=max(memory, 0), pages=tuple(PagePool(p.size_kib, max(p.count, 0))
                                                                for p in cell.pages))


def _cut_pools(cell: Cell, fitted: Sequence[PagePool], cut: dict[int, int]) -> list[LeftOut]:
    """One part per pool cut (``fitted``: the pools kept), the largest pages first as the rule fits them."""
    out = []
    memory = format_size_kib(cell.memory_kib)
    for size in sorted(cut, reverse=True):
        larger = sum(p.size_kib * p.count for p in fitted if p.size_kib > size)
        room = cell.memory_kib - larger
        if not larger:
            why = f"more than the cell's {memory} of memory holds"
        elif room <= 0:
            why = f"the cell's {memory} of memory is taken by its larger pages"
        else:
            why = f"more than the {format_size_kib(room)} its larger pages leave of the cell's {memory} of memory"
        pages = f"{cell.pages_of(size)} × {format_size_kib(size)} pages"
        out.append(LeftOut(f"{cut[size]} of cell {cell.id}'s {pages}", why))
    return out


def _fit_distances(
    cells: list[Cell], kept: set[int], missing: Callable[[int], str | None], found: list[LeftOut]
) -> list[Cell]:
    """The cells without the distances naming a cell not kept or below 10; said once per missing cell and
    once for all those below 10 (a matrix of relative latencies has a value below 10 in every entry)."""
    towards: dict[int, list[int]] = {}
    low: list[tuple[int, int, int]] = []
    out = []
    for cell in cells:
        distances = []
        for other, value in cell.distances:
            if other not in kept:
                towards.setdefault(other, []).append(cell.id)
            elif value < 10:
                low.append((cell.id, other, value))
            else:
                distances.append((other, value))
        out.append(cell if len(distances) == len(cell.distances) else replace(cell, distances=tuple(distances)))
    for other, sources in sorted(towards.items()):
        why = missing(other)
        if why is not None:
            plural = "s" if len(sources) > 1 else ""
            found.append(LeftOut(f"distance{plural} from {numbered('cell', sources)} to cell {other}", why))
    if len(low) == 1:
        a, b, value = low[0]
        found.append(LeftOut(f"distance from cell {a} to cell {b}", f"{value} is below 10"))
    elif low:
        values = [v for _a, _b, v in low]
        between = numbered("cell", {c for a, b, _v in low for c in (a, b)})
        found.append(LeftOut(f"{len(low)} distances between {between}",
                             f"below 10 ({min(values)} to {max(values)}); a SLIT distance is 10 or more"))
    return out


def _fit_hmat(hmat: Hmat, kept: set[int], missing: Callable[[int], str | None], found: list[LeftOut]) -> Hmat:
    """HMAT without the figures naming a cell not kept or below 1; said once per missing cell and once per
    matrix for those below 1."""
    matrices: dict[str, Matrix] = {}
    naming: dict[int, list[str]] = {}
    for name, matrix in hmat.matrices().items():
        entries = []
        low: list[tuple[int, int, int]] = []
        for initiator, target, value in matrix:
            absent = [c for c in (initiator, target) if c not in kept]
            if absent:
                naming.setdefault(absent[0], []).append(f"HMAT {_HMAT_NAMES[name]} from cell {initiator} to cell "
                                                        f"{target}")
            elif value < 1:
                low.append((initiator, target, value))
            else:
                entries.append((initiator, target, value))
        matrices[name] = tuple(entries)
        if len(low) == 1:
            found.append(LeftOut(f"HMAT {_HMAT_NAMES[name]} from cell {low[0][0]} to cell {low[0][1]}",
                                 f"{low[0][2]} is below 1"))
        elif low:
            values = [v for _i, _t, v in low]
            found.append(LeftOut(f"{len(low)} HMAT {_HMAT_NAMES[name]} figures",
                                 f"below 1 ({min(values)} to {max(values)})"))
    for cell_id, figures in sorted(naming.items()):
        why = missing(cell_id)
        if why is not None:
            found.append(LeftOut(figures[0] if len(figures) == 1 else f"{len(figures)} HMAT figures naming cell "
                                 f"{cell_id}", why))
    return replace(hmat, **matrices)


def unique_devices(devices: Sequence[PciDevice]) -> tuple[list[PciDevice], list[LeftOut]]:
    """The devices whose address appears once, and one part left out per address listed more than once
    (every copy is left out: which one is right cannot be told)."""
    found: list[LeftOut] = []
    kinds: dict[str, set[DeviceKind]] = {}
    for dev in devices:
        kinds.setdefault(dev.address, set()).add(dev.kind)

    def label(dev: PciDevice) -> str:  # one copy a GPU or a NIC: the device is named as one
        notable = [k for k in (DeviceKind.GPU, DeviceKind.NIC) if k in kinds[dev.address]]
        return device_label(dev.address, notable[0] if notable else dev.kind)

    return _unique(devices, lambda d: d.address, label, found), found


def _unique(items: Sequence[T], key: Callable[[T], str], label: Callable[[T], str], found: list[LeftOut]) -> list[T]:
    """The items whose key appears once; every copy of one listed twice is left out (one line)."""
    counts = Counter(key(i) for i in items)
    said: set[str] = set()
    for item in items:
        if counts[key(item)] > 1 and key(item) not in said:
            said.add(key(item))
            found.append(LeftOut(label(item), "listed twice" if counts[key(item)] == 2
                                 else f"listed {counts[key(item)]} times"))
    return [i for i in items if counts[key(i)] == 1]


def _on_a_cell(dev: PciDevice, kept: set[int], file_cells: set[int], found: list[LeftOut]) -> PciDevice:
    """The device, without its NUMA node when the host has no such cell (said in ``found``)."""
    if dev.numa_node is None or dev.numa_node in kept:
        return dev
    node = dev.numa_node
    why = f"cell {node} is left out" if node in file_cells else f"the host has no cell {node}"
    found.append(LeftOut(f"NUMA node {node} of {device_label(dev.address, dev.kind)}", f"{why} (the device is kept)"))
    return replace(dev, numa_node=None)
