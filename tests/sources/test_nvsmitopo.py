"""Saved ``nvidia-smi topo -m`` text: read as printed by several drivers, believed only for its own host, and
kept with the host's stored topology."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.placement.test_nics import DGX
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.errors import InvalidInputError, OtherHostFileError
from vnuma.inventory.topologies import ShapeDecoder, encode_topology
from vnuma.sources.nvsmitopo import parse_topo_matrix, with_nvlinks
from vnuma.topology import DeviceKind
from vnuma.topology.hostcheck import check_host
from vnuma.topology.nvlink import NvLink, nvlink_count
from vnuma.topology.pcie import gpu_matrix

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"
H20 = (DATA / "h20-8gpu-topo-m.txt").read_text()
POWER9 = (DATA / "v100-4gpu-power9-topo-m.txt").read_text()
DGX_TOPO = (DATA / "dgx-like-topo-m.txt").read_text()
GPUS = [g.address for g in DGX.devices_of(DeviceKind.GPU)]


def test_a_newer_drivers_matrix_with_nic_legend_and_gpu_numa_id() -> None:
    m = parse_topo_matrix(H20, "h20")
    assert m.labels == (*(f"GPU{i}" for i in range(8)), *(f"NIC{i}" for i in range(8)))
    assert m.gpus == 8 and m.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert {m.cells[i][j] for i in range(8) for j in range(8) if i != j} == {"NV18"}
    assert m.cells[0][8] == "PIX" and m.cells[8][0] == "PIX" and m.cells[4][8] == "SYS"


def test_an_older_drivers_matrix_with_mlx5_columns() -> None:
    m = parse_topo_matrix(POWER9, "power9")
    assert m.labels[4:] == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3") and m.numa == (0, 0, 8, 8)
    assert (m.cells[0][1], m.cells[2][3], m.cells[0][2]) == ("NV3", "NV3", "SYS")


def test_text_pasted_through_a_terminal_reads_the_same() -> None:
    aligned = "\n".join(re.sub(r"\t", "    ", line) for line in POWER9.splitlines())
    assert parse_topo_matrix(aligned, "aligned") == parse_topo_matrix(POWER9, "tabs")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("hello\n", "no header naming GPU0"),
        (POWER9.replace("GPU0\t X \tNV3", "GPU0\t X \tNV2", 1), "GPU0/GPU1 reads NV2 but GPU1/GPU0 NV3"),
        (POWER9.replace("GPU1\tNV3\t X \tSYS", "GPU1\tNV3\t X \tLOL", 1), "row GPU1"),
        ("\n".join(line for line in POWER9.splitlines() if not line.startswith("GPU3")), "no row for GPU3"),
    ],
    ids=["not-topo", "asymmetric", "unknown-cell", "missing-row"],
)
def test_text_that_is_not_the_matrix_is_refused(text: str, words: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(words)):
        parse_topo_matrix(text, "t.txt")


def test_the_hosts_own_text_gives_its_nvlinks() -> None:
    linked = with_nvlinks(DGX, parse_topo_matrix(DGX_TOPO, "dgx"), "dgx")
    assert len(linked.nvlinks) == 2 * 28  # every pair of the 8 GPUs on each socket
    assert nvlink_count(linked.nvlinks, GPUS[0], GPUS[7]) == 12 and nvlink_count(linked.nvlinks, GPUS[0], GPUS[8]) == 0
    gpus, rows = gpu_matrix(linked)
    assert list(gpus) == GPUS and rows[0][:2] == ("X", "NV12") and rows[0][8] == "SYS"
    assert rows[14][15] == "NV12" and gpu_matrix(DGX)[1][14][15] == "PXB"  # without the text: PCIe's level


def test_another_hosts_text_is_refused_naming_the_gpus() -> None:
    with pytest.raises(OtherHostFileError, match=r"it shows 8 GPUs, the host has 16 \(0000:13:00\.0, ") as err:
        with_nvlinks(DGX, parse_topo_matrix(H20, "h20"), "h20")
    assert err.value.hint is not None and "nvidia-smi topo -m" in err.value.hint
    moved = DGX_TOPO.splitlines()
    moved[4] = re.sub(r"\t0\t\tN/A$", "\t1\t\tN/A", moved[4])  # GPU3 said to be on node 1
    with pytest.raises(OtherHostFileError, match=r"GPU3 \(0000:2c:00\.0\) on NUMA node 1, the host says 0"):
        with_nvlinks(DGX, parse_topo_matrix("\n".join(moved), "moved"), "moved")
    rows = DGX_TOPO.splitlines()
    rows[1] = rows[1].replace("\tSYS", "\tNODE", 1)  # GPU0-GPU8 across the sockets said to be one node
    rows[9] = rows[9].replace("SYS", "NODE", 1)
    with pytest.raises(OtherHostFileError, match=r"GPU0-GPU8 \(0000:13:00\.0, 0000:73:00\.0\) NODE, the host says SYS"):
        with_nvlinks(DGX, parse_topo_matrix("\n".join(rows), "level"), "level")


def test_nvlinks_survive_the_host_dict_and_the_stored_topology() -> None:
    linked = with_nvlinks(DGX, parse_topo_matrix(DGX_TOPO, "dgx"), "dgx")
    assert host_from_dict(host_to_dict(linked)) == linked
    assert ShapeDecoder().host("dgx", None, linked.source.value, encode_topology(linked), "") == linked
    assert '"nvlinks"' not in encode_topology(DGX)  # a host without them stores the text it stored before


def test_an_nvlink_must_name_two_of_the_hosts_gpus() -> None:
    nic = next(d.address for d in DGX.devices if d.kind is DeviceKind.NIC)
    for links in ((NvLink(GPUS[0], nic, 2),), (NvLink(GPUS[1], GPUS[0], 2),), (NvLink(GPUS[0], GPUS[1], 2),) * 2):
        with pytest.raises(InvalidInputError, match="NVLink"):
            check_host(replace(DGX, nvlinks=links))
