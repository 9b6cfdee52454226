"""What ``host show --json`` must say of a file, given what the file says (:mod:`tests.corpus.reader`) and
the parts vnuma said it left out (``left_out``: ``[{"what", "why"}]``, absent before that key existed).

A difference between the file and vnuma's host is accepted only where ``left_out`` names it, and every
``left_out`` entry must name a part of the file that vnuma indeed does not show as the file says it.
The names understood (``what``):

- ``PU 4``, ``PUs 4,6-8``: CPUs not kept (nor kept as anyone's SMT sibling);
- ``cell 3``, ``NUMA node 3``, ``NUMA nodes 0-1``: cells not kept (their distances go with them);
- ``device 0000:04:00.0`` (optionally ``(GPU)``/``(NIC)`` and more words): a PCI function not kept,
  named by its address or, when its fields make no address, by its node-device name;
- ``NUMA node 1 of device 0000:04:00.0 ...``: the device kept without a NUMA node;
- ``6143 of cell 0's 6144 × 1 GiB pages``: that many pages of the pool cut;
- ``distance from cell 0 to cell 1``: that distance not kept; ``64 distances between cells 0-7``:
  none between those cells kept;
- ``HMAT ...``, ``mediated device ...``: parts this reader does not read (accepted as said).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.corpus.reader import CellFacts, DeviceFacts, FileFacts, cpu_list

_UNITS = {"KiB": 1, "MiB": 1024, "GiB": 1024**2, "TiB": 1024**3}
_PCI_NAME = re.compile(r"^pci_([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])$", re.IGNORECASE)
_NODE_OF_DEVICE = re.compile(r"^NUMA node (\d+) of device (\S+)")
_DEVICE = re.compile(r"^device (\S+)")
_CPUS = re.compile(r"^PUs? ([0-9,\-]+)$")
_CELLS = re.compile(r"^(?:cell|NUMA nodes?) ([0-9,\-]+)$")
_POOL = re.compile(r"^(\d+) of cell (\d+)'s (\d+) × ([0-9.]+) ([KMGT]iB) pages$")
_DISTANCE = re.compile(r"^distance from cell (\d+) to cell (\d+)$")
_DISTANCES = re.compile(r"^\d+ distances between cells ([0-9,\-]+)$")
_UNREAD = ("HMAT ", "mediated device ")


@dataclass
class LeftOut:
    """The parts ``left_out`` names, read back into ids."""

    cpus: set[int] = field(default_factory=set)
    cells: set[int] = field(default_factory=set)
    devices: set[str] = field(default_factory=set)
    device_nodes: set[str] = field(default_factory=set)
    pages_cut: dict[tuple[int, int], int] = field(default_factory=dict)
    distances: set[tuple[int, int]] = field(default_factory=set)


def read_left_out(entries: list[dict[str, str]]) -> tuple[LeftOut, list[str]]:
    """The parts named, and one problem per entry whose ``what`` this test cannot read."""
    out, problems = LeftOut(), []
    for entry in entries:
        what = entry["what"]
        if (m := _NODE_OF_DEVICE.match(what)) is not None:
            out.device_nodes.add(m.group(2))
        elif (m := _DEVICE.match(what)) is not None:
            out.devices.add(m.group(1))
        elif (m := _CPUS.match(what)) is not None:
            out.cpus |= cpu_list(m.group(1))
        elif (m := _CELLS.match(what)) is not None:
            out.cells |= cpu_list(m.group(1))
        elif (m := _POOL.match(what)) is not None:
            size = round(float(m.group(4)) * _UNITS[m.group(5)])
            out.pages_cut[(int(m.group(2)), size)] = int(m.group(1))
        elif (m := _DISTANCE.match(what)) is not None:
            out.distances.add((int(m.group(1)), int(m.group(2))))
        elif (m := _DISTANCES.match(what)) is not None:
            cells = cpu_list(m.group(1))
            out.distances |= {(a, b) for a in cells for b in cells}
        elif not what.startswith(_UNREAD):
            problems.append(f"left_out names a part this test cannot read: {what!r} ({entry['why']})")
    return out, problems


def device_names(dev: DeviceFacts) -> set[str]:
    """The names ``left_out`` may give a device: its address, its node-device name and the address that
    name spells (``pci_0000_00_02_0``: ``0000:00:02.0``)."""
    names = {dev.name} | ({dev.address} if dev.address else set())
    if (m := _PCI_NAME.match(dev.name)) is not None:
        names.add("{}:{}:{}.{}".format(*m.groups()).lower())
    return names


def expected_memory(cell: CellFacts, fmt: str) -> int:
    """A cell's memory when the file does not say: capabilities take the sum of its pools, hwloc 0
    (both as vnuma's parsers document)."""
    if cell.memory_kib is not None:
        return cell.memory_kib
    return sum(size * count for size, count in cell.pages.items()) if fmt == "capabilities" else 0


def compare(facts: FileFacts, fmt: str, shown: dict[str, Any]) -> list[str]:
    """Every difference between the file and ``host show --json`` that ``left_out`` does not name, and
    every ``left_out`` entry that names nothing of the file vnuma shows differently."""
    left, problems = read_left_out(shown.get("left_out") or [])
    cells = {c["id"]: c for c in shown["cells"]}
    problems += _cells(facts, fmt, cells, left)
    problems += _devices(facts, shown["devices"], left)
    return problems


def _cells(facts: FileFacts, fmt: str, cells: dict[int, Any], left: LeftOut) -> list[str]:
    problems = []
    every_cpu = set(facts.cpu_cells()) | facts.unowned_cpus
    for cpu in sorted(left.cpus - every_cpu):
        problems.append(f"left_out names PU {cpu}, which the file does not list")
    for cell_id in sorted(left.cells - set(facts.cells)):
        problems.append(f"left_out names cell {cell_id}, which the file does not list")
    for cpu in sorted(facts.unowned_cpus - left.cpus):
        problems.append(f"PU {cpu} is in no NUMA node of the file, and left_out does not name it")
    kept = {i: c for i, c in facts.cells.items() if i not in left.cells}
    if set(cells) != set(kept):
        problems.append(f"cells {sorted(cells)} shown, the file has {sorted(facts.cells)} "
                        f"(left out: {sorted(left.cells)})")
    for cell_id in sorted(set(cells) & set(kept)):
        problems += [f"cell {cell_id}: {p}" for p in _cell(kept[cell_id], fmt, cells[cell_id], left, set(kept))]
    for cpu in sorted(left.cpus & every_cpu):
        if any(cpu == c["id"] for cell in cells.values() for c in cell["cpus"]):
            problems.append(f"PU {cpu} is named in left_out but shown")
    return problems


def _cell(cell: CellFacts, fmt: str, shown: dict[str, Any], left: LeftOut, kept: set[int]) -> list[str]:
    problems = []
    memory = expected_memory(cell, fmt)
    if shown["memory_kib"] != memory:
        problems.append(f"memory {shown['memory_kib']} KiB shown, the file says {memory} KiB")
    cpus = {c["id"]: c for c in shown["cpus"]}
    file_cpus = {i: c for i, c in cell.cpus.items() if i not in left.cpus}
    if set(cpus) != set(file_cpus):
        problems.append(f"CPUs {sorted(cpus)} shown, the file has {sorted(cell.cpus)}")
    for cpu_id in sorted(set(cpus) & set(file_cpus)):
        want, got = file_cpus[cpu_id], cpus[cpu_id]
        for key in ("socket", "die", "core"):
            if getattr(want, key) is not None and got[key] != getattr(want, key):
                problems.append(f"CPU {cpu_id}: {key} {got[key]} shown, the file says {getattr(want, key)}")
        if want.siblings is not None and set(got["siblings"]) != set(want.siblings) - left.cpus:
            problems.append(f"CPU {cpu_id}: siblings {got['siblings']} shown, the file says {sorted(want.siblings)}")
    pages = {size: count - left.pages_cut.get((cell.id, size), 0) for size, count in cell.pages.items()}
    for (cut_cell, size), cut in left.pages_cut.items():
        if cut_cell == cell.id and not 0 < cut <= cell.pages.get(size, 0):
            problems.append(f"left_out cuts {cut} of {cell.pages.get(size, 0)} × {size} KiB pages")
    if {int(s): n for s, n in shown["pages"].items()} != pages:
        problems.append(f"pages {shown['pages']} shown, the file says {cell.pages} (cut: {left.pages_cut})")
    distances = {
        other: value for other, value in cell.distances.items()
        if other in kept and (cell.id, other) not in left.distances
    }
    if {int(o): v for o, v in shown["distances"].items()} != distances:
        problems.append(f"distances {shown['distances']} shown, the file says {cell.distances}")
    return problems


def _devices(facts: FileFacts, shown: list[dict[str, Any]], left: LeftOut) -> list[str]:
    problems = []
    by_address = {d["address"]: d for d in shown}
    listed: dict[str, int] = {}
    for dev in facts.devices:
        if dev.address is not None:
            listed[dev.address] = listed.get(dev.address, 0) + 1
    named = set().union(*(device_names(d) for d in facts.devices)) if facts.devices else set()
    for name in sorted((left.devices | left.device_nodes) - named):
        problems.append(f"left_out names device {name}, which the file does not list")
    for dev in facts.devices:
        gone = bool(device_names(dev) & left.devices)
        if dev.address is None or listed[dev.address] > 1:
            if not gone:
                problems.append(f"device {dev.name}: {'listed twice' if dev.address else 'no PCI address'} "
                                "in the file, and left_out does not name it")
            continue
        if gone:
            if dev.address in by_address:
                problems.append(f"device {dev.address} is named in left_out but shown")
            continue
        if dev.address not in by_address:
            problems.append(f"device {dev.address} is in the file but not shown")
            continue
        node = None if dev.address in left.device_nodes else dev.numa_node
        if by_address[dev.address]["numa_node"] != node:
            problems.append(f"device {dev.address}: NUMA node {by_address[dev.address]['numa_node']} shown, "
                            f"the file says {dev.numa_node}")
    unknown = set(by_address) - set(listed)
    if unknown:
        problems.append(f"devices {sorted(unknown)} shown, which the file does not list")
    return problems


def invariants(shown: dict[str, Any]) -> list[str]:
    """What issue 34 asks of every imported host, whatever the file says: a cell's page pools fit its
    memory, and no memory-only cell without memory is kept (it is left out and said so)."""
    problems = []
    for cell in shown["cells"]:
        pooled = sum(int(size) * count for size, count in cell["pages"].items())
        if pooled > cell["memory_kib"]:
            problems.append(f"cell {cell['id']}: page pools of {pooled} KiB above its {cell['memory_kib']} KiB")
        if not cell["cpus"] and cell["memory_kib"] == 0 and any(cell["pages"].values()):
            problems.append(f"cell {cell['id']}: no CPUs and no memory but pages, kept")
    return problems
