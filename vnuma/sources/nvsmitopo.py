"""Saved ``nvidia-smi topo -m`` text: the GPU x GPU (and NIC) matrix, read for the host's NVLinks.

Pure: no I/O. ``nvidia-smi topo -m`` prints a header of device labels
(``GPU0``.., then NICs as ``NIC0``.. with a "NIC Legend", or as ``mlx5_0``..
in older drivers) and extra columns (``CPU Affinity``, ``NUMA Affinity``,
``GPU NUMA ID``), one row per device, cells ``X`` (itself), ``NV#`` (# bonded
NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE`` or ``SYS`` (``SOC`` in old
drivers), tab-separated (space-aligned when pasted through a terminal).

The text names no PCI address: NVML numbers GPUs in PCI bus order, so
``GPUi`` is the host's i-th GPU by address. :func:`with_nvlinks` therefore
checks the text against the host before it believes it: the same number of
GPUs, each GPU's NUMA node, and every GPU pair's PCIe level where the host's
facts tell one (:func:`vnuma.topology.pcie.pcie_level`); text saved on
another host is refused, naming the GPUs that disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vnuma.errors import InvalidInputError, OtherHostFileError
from vnuma.topology import DeviceKind, Host
from vnuma.topology.nvlink import NvLink
from vnuma.topology.pcie import pcie_level

EXTRA_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CELL = re.compile(r"^(X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$")
_GPU = re.compile(r"^GPU\d+$")
MAX_DEVICES = 1024


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """The devices' labels (GPUs first, as printed), the device x device cells, and each GPU's NUMA affinity
    (None where the text gives none)."""

    labels: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    numa: tuple[int | None, ...]

    @property
    def gpus(self) -> int:
        return sum(1 for label in self.labels if _GPU.match(label))


def parse_topo_matrix(text: str, source: str) -> TopoMatrix:
    """Read ``nvidia-smi topo -m`` text (``source`` names it in errors).

    Raises:
        InvalidInputError: no header naming GPU0, a row or cell that is not the matrix's, a matrix that is not
            symmetric.
    """
    lines = [line.rstrip("\r") for line in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if "GPU0" in _split(line)), None)
    if start is None:
        raise InvalidInputError(f"{source}: not `nvidia-smi topo -m` text (no header naming GPU0)",
                                hint="save the output of `nvidia-smi topo -m` on the host")
    header = [t for t in _split(lines[start]) if t]
    labels = tuple(t for t in header if t not in EXTRA_COLUMNS)
    extras = [t for t in header if t in EXTRA_COLUMNS]
    if len(labels) > MAX_DEVICES or len(set(labels)) != len(labels):
        raise InvalidInputError(f"{source}: the header's device labels repeat or are too many")
    rows: dict[str, list[str]] = {}
    numa: dict[str, int | None] = {}
    for line in lines[start + 1:]:
        cells = _split(line)
        if not cells or cells[0] not in labels:
            if rows:
                break  # the legend after the matrix
            continue
        label, values = cells[0], cells[1:]
        if len(values) < len(labels) or any(not _CELL.match(v) for v in values[:len(labels)]):
            raise InvalidInputError(f"{source}: row {label}: expected {len(labels)} cells of X, NV#, PIX, PXB, "
                                    f"PHB, NODE or SYS, got {values[:len(labels)]}")
        rows[label] = ["SYS" if v == "SOC" else v for v in values[:len(labels)]]
        numa[label] = _numa(dict(zip(extras, values[len(labels):], strict=False)).get("NUMA Affinity"))
    missing = [label for label in labels if label not in rows]
    if missing:
        raise InvalidInputError(f"{source}: no row for {', '.join(missing)}")
    cells_ = tuple(tuple(rows[label]) for label in labels)
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            if (cells_[i][j] == "X") != (i == j) or cells_[i][j] != cells_[j][i]:
                raise InvalidInputError(f"{source}: {a}/{b} reads {cells_[i][j]} but {b}/{a} {cells_[j][i]}")
    gpus = [label for label in labels if _GPU.match(label)]
    return TopoMatrix(labels, cells_, tuple(numa[g] for g in gpus))


def _split(line: str) -> list[str]:
    """Cells of a line: tab-separated as nvidia-smi prints, else columns two or more spaces apart."""
    parts = line.split("\t") if "\t" in line else re.split(r" {2,}", line)
    return [p.strip() for p in parts]


def _numa(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def with_nvlinks(host: Host, matrix: TopoMatrix, source: str) -> Host:
    """``host`` with the NVLinks ``matrix`` shows between its GPUs (``GPUi`` = the i-th GPU by address).

    Raises:
        OtherHostFileError: the text is another host's: a different number of GPUs, a GPU on another NUMA node,
            or a GPU pair at another PCIe level than the host's facts give (each named with its address).
    """
    gpus = host.devices_of(DeviceKind.GPU)
    where = f"{source}: not host {host.name!r}'s `nvidia-smi topo -m`"
    hint = f"save `nvidia-smi topo -m` on host {host.name} itself"
    if matrix.gpus != len(gpus):
        shown = ", ".join(g.address for g in gpus) or "none"
        raise OtherHostFileError(f"{where}: it shows {matrix.gpus} GPUs, the host has {len(gpus)} ({shown})",
                                 hint=hint)
    wrong = [f"GPU{i} ({g.address}) on NUMA node {n}, the host says {g.numa_node}"
             for i, (g, n) in enumerate(zip(gpus, matrix.numa, strict=True))
             if n is not None and g.numa_node is not None and n != g.numa_node]
    links: list[NvLink] = []
    for i, a in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            b, cell = gpus[j], matrix.cells[i][j]
            if cell.startswith("NV"):
                links.append(NvLink(a.address, b.address, int(cell[2:])))
            elif (level := pcie_level(a, b)) is not None and str(level) != cell:
                wrong.append(f"GPU{i}-GPU{j} ({a.address}, {b.address}) {cell}, the host says {level}")
    if wrong:
        raise OtherHostFileError(f"{where}: {'; '.join(wrong)}", hint=hint)
    return replace(host, nvlinks=tuple(links))
