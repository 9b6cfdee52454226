"""The host's PCIe layout: root complexes, bridges, IOMMU groups, SR-IOV and links from node devices and
hwloc, and NVIDIA's GPU-NIC levels read from them.

The DGX-like fixture (tests/data/nodedev/dgx-like.xml) has, per socket, four
root complexes each holding a switch with 2 GPUs and 2 NICs (8 VFs each); on
pci0000:10 a NIC on a second root port (PHB) and an audio function in the
first GPU's IOMMU group; on pci0000:b8 the GPUs behind a second switch
(PXB); and a management NIC without a NUMA node.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli.conftest import Cli, refused_unchanged
from vnuma.codec import host_from_dict, host_to_dict
from vnuma.inventory.topologies import ShapeDecoder, encode_topology
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.hwloc import parse_hwloc
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.topology import DeviceKind, Host, PciDevice
from vnuma.topology.pcie import Level, pcie_level

DATA = Path(__file__).resolve().parent.parent / "data"
DGX = DATA / "nodedev" / "dgx-like.xml"
CAPS = DATA / "capabilities" / "x86-2socket-cdp.xml"


@pytest.fixture(scope="module")
def dgx() -> Host:
    host = parse_capabilities(CAPS.read_bytes(), name="dgx")
    return replace(host, devices=with_parent_bridges(parse_nodedev_file_content(DGX.read_bytes(), "dgx")))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "inventory.db")


def _dev(host: Host, address: str) -> PciDevice:
    return next(d for d in host.devices if d.address == address)


def test_a_gpu_knows_its_root_complex_bridges_group_class_and_link(dgx: Host) -> None:
    gpu = _dev(dgx, "0000:13:00.0")
    assert (gpu.root_complex, gpu.bridges) == ("pci0000:10", ("0000:12:00.0", "0000:11:00.0", "0000:10:01.0"))
    assert (gpu.iommu_group, gpu.iommu_peers, gpu.pci_class) == (104, ("0000:13:00.1",), 0x030200)
    assert gpu.link is not None and (gpu.link.speed_gts, gpu.link.width, gpu.link.downtrained) == (32.0, 16, False)
    audio = _dev(dgx, "0000:13:00.1")
    assert (audio.kind, audio.iommu_peers) == (DeviceKind.OTHER, ("0000:13:00.0",))


def test_sr_iov_relations_point_both_ways(dgx: Host) -> None:
    pfs = [d for d in dgx.devices if d.vfs]
    assert len(pfs) == 16 and all(pf.vf_max == 8 and len(pf.vfs) == 8 for pf in pfs)
    for pf in pfs:
        for vf in pf.vfs:
            assert _dev(dgx, vf).pf == pf.address
    assert sum(1 for d in dgx.devices if d.pf is not None) == 128


def test_a_device_without_a_numa_node_still_has_its_root_complex(dgx: Host) -> None:
    mgmt = _dev(dgx, "0000:02:00.0")
    assert (mgmt.numa_node, mgmt.root_complex, mgmt.bridges) == (None, "pci0000:00", ("0000:00:1c.0",))


@pytest.mark.parametrize(
    ("gpu", "nic", "level"),
    [
        ("0000:13:00.0", "0000:15:00.0", Level.PIX),  # one switch
        ("0000:13:00.0", "0000:17:00.0", Level.PHB),  # same root complex, another root port
        ("0000:13:00.0", "0000:2d:00.0", Level.NODE),  # another root complex on the same node
        ("0000:13:00.0", "0000:75:00.0", Level.SYS),  # the other socket
        ("0000:c4:00.0", "0000:bd:00.0", Level.PXB),  # behind a second switch
        ("0000:13:00.0", "0000:02:00.0", None),  # the NIC has no NUMA node: cannot tell
    ],
)
def test_levels_are_nvidias(dgx: Host, gpu: str, nic: str, level: Level | None) -> None:
    a, b = _dev(dgx, gpu), _dev(dgx, nic)
    assert pcie_level(a, b) == pcie_level(b, a) == level


def test_without_paths_the_parent_links_give_the_bridges_and_levels_degrade_honestly() -> None:
    devices = with_parent_bridges(
        parse_nodedev_file_content((DATA / "nodedev" / "bundle-devices.xml").read_bytes(), "b")
    )
    gpu = next(d for d in devices if d.kind is DeviceKind.GPU)
    nic = next(d for d in devices if d.kind is DeviceKind.NIC)
    assert (gpu.root_complex, gpu.bridges) == (None, ("0000:c6:01.0",))
    expected = None if gpu.numa_node == nic.numa_node else Level.SYS
    assert pcie_level(gpu, nic) == expected


def test_hwloc_gives_the_host_bridge_and_the_bridges() -> None:
    host = parse_hwloc((DATA / "hwloc" / "2pkg-snc-smt-cxl-gpu.xml").read_bytes(), name="h")
    gpu, nic = _dev(host, "0000:17:00.0"), _dev(host, "0000:b7:00.0")
    assert (gpu.root_complex, gpu.bridges, gpu.pci_class) == ("pci0000:16", ("0000:16:01.0",), 0x030200)
    assert (nic.root_complex, nic.bridges, nic.link) == ("pci0000:b7", (), None)


def test_the_layout_survives_the_host_dict_and_the_stored_topology(dgx: Host) -> None:
    assert host_from_dict(host_to_dict(dgx)) == dgx
    assert ShapeDecoder().host("dgx", None, dgx.source.value, encode_topology(dgx), "") == dgx
    keys = set(host_to_dict(dgx)["devices"][0])
    assert keys >= {
        "address",
        "kind",
        "numa_node",
        "vendor_id",
        "product_id",
        "parent",
        "root_complex",
        "bridges",
        "iommu_group",
        "iommu_peers",
        "class",
        "vfs",
        "pf",
        "link",
    }


def test_host_show_draws_the_tree_and_the_matrix(cli: Cli) -> None:
    cli.ok("host", "import", "dgx", "--capabilities", str(CAPS), "--nodedev", str(DGX))
    text = cli.ok("host", "show", "dgx").stdout
    assert "pci0000:10 (cell 0)" in text and "8 VFs of 8" in text and "iommu group 104 with 0000:13:00.1" in text
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("GPU x NIC")) + 1
    header = lines[at]
    nics = header.split()[2:]
    assert "0000:15:00.0" in nics and "0000:15:00.2" not in nics  # VFs stay out of the matrix
    row = next(line for line in lines[at:] if line.startswith("0000:13:00.0 "))
    levels = dict(zip(nics, row.split()[2:], strict=True))
    assert (levels["0000:15:00.0"], levels["0000:17:00.0"], levels["0000:75:00.0"]) == ("PIX", "PHB", "SYS")
    shown = cli.ok("host", "show", "dgx", "--json").json()
    gpu = next(d for d in shown["devices"] if d["address"] == "0000:13:00.0")
    assert gpu["class"] == "0x030200" and gpu["link"] == {
        "speed_gts": 32.0,
        "width": 16,
        "max_speed_gts": 32.0,
        "max_width": 16,
    }


def test_a_parent_cycle_is_refused_naming_the_device(cli: Cli, tmp_path: Path) -> None:
    text = (DATA / "nodedev" / "bundle-devices.xml").read_text()
    cyclic = text.replace(
        "<parent>computer</parent>\n    <capability type='pci'>\n      <class>0x060400",
        "<parent>pci_0000_c7_00_0</parent>\n    <capability type='pci'>\n      <class>0x060400",
        1,
    )
    assert cyclic != text
    bad = tmp_path / "cyclic.xml"
    bad.write_text(cyclic)
    cli.ok("host", "list")  # the inventory exists before the refusal
    refused_unchanged(
        cli, ["host", "import", "h", "--capabilities", str(CAPS), "--nodedev", str(bad)], 4, "<parent> links come back"
    )


def test_a_path_that_does_not_start_at_a_root_complex_leaves_it_unknown() -> None:
    text = (DATA / "nodedev" / "gpu-h100.xml").read_text().replace("/sys/devices/pci0000:16/", "/sys/devices/virtual/")
    (gpu,) = parse_nodedev_file_content(text, "g")
    assert (gpu.root_complex, gpu.bridges) == (None, ())


# --- levels on random trees ---------------------------------------------------------------------------


@st.composite
def device_pairs(draw: st.DrawFn) -> tuple[PciDevice, PciDevice]:
    bridges = [f"0000:{i:02x}:00.0" for i in range(1, 7)]

    def one(n: int) -> PciDevice:
        root = draw(st.sampled_from(["pci0000:00", "pci0000:80", None]))
        chain = draw(st.lists(st.sampled_from(bridges), unique=True, max_size=4))
        return PciDevice(
            f"0000:f{n}:00.0",
            DeviceKind.GPU,
            "0x10de",
            "0x2330",
            draw(st.sampled_from([0, 1, None])),
            root_complex=root,
            bridges=tuple(chain),
        )

    return one(1), one(2)


@given(device_pairs())
def test_levels_are_symmetric_and_agree_with_root_complex_and_node(pair: tuple[PciDevice, PciDevice]) -> None:
    a, b = pair
    level = pcie_level(a, b)
    assert level == pcie_level(b, a)
    same_rc = a.root_complex is not None and a.root_complex == b.root_complex
    if same_rc:
        assert level in (Level.PIX, Level.PXB, Level.PHB)
    if a.root_complex and b.root_complex and a.root_complex != b.root_complex:
        nodes = {a.numa_node, b.numa_node}
        assert level == (None if None in nodes else Level.SYS if len(nodes) == 2 else Level.NODE)
    if level in (Level.PIX, Level.PXB):
        assert a.bridges[-1:] == b.bridges[-1:] != ()  # they share their root port


def test_a_gpus_virtual_functions_are_not_gpus(cli: Cli) -> None:
    cli.ok(
        "host", "import", "sriov", "--capabilities", str(CAPS), "--nodedev", str(DATA / "nodedev" / "gpu-sriov-vfs.xml")
    )
    shown = cli.ok("host", "show", "sriov", "--json").json()
    kinds = {d["address"]: (d["kind"], d["pf"]) for d in shown["devices"]}
    assert kinds["0000:3b:00.0"] == ("gpu", None)
    assert {kinds[f"0000:3b:00.{f}"] for f in range(4, 8)} == {("other", "0000:3b:00.0")}
    assert next(h for h in cli.ok("host", "list", "--json").json() if h["name"] == "sriov")["gpus"] == 1
    cli.ok("tenant", "create", "t")
    refused = cli("place", "t", "--gpus", "2", "--vcpus", "2", "--memory", "1GiB")
    assert refused.exit_code == 4 and "the whole fleet has 1" in refused.stderr, refused.stderr
    placed = cli.ok(
        "place", "t", "--gpus", "1", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--json"
    ).json()
    assert [d["address"] for d in placed["devices"]] == ["0000:3b:00.0"]


def test_vgpu_types_are_counted_on_their_gpu(cli: Cli) -> None:
    cli.ok(
        "host",
        "import",
        "v",
        "--capabilities",
        str(CAPS),
        "--nodedev",
        str(DATA / "nodedev" / "gpu-sriov-vfs.xml"),
        "--nodedev",
        str(DATA / "nodedev" / "gpu-mdev-types.xml"),
    )
    shown = {d["address"]: d for d in cli.ok("host", "show", "v", "--json").json()["devices"]}
    # An SR-IOV GPU: a type's capacity is the number of its VFs offering it (4 here, each VF one instance).
    assert shown["0000:3b:00.0"]["partitions"] == [
        {"type": "nvidia-1047", "name": "NVIDIA H100-20C", "free": 4, "total": 4},
        {"type": "nvidia-1049", "name": "NVIDIA H100-40C", "free": 4, "total": 4},
    ]
    assert shown["0000:3b:00.4"]["partitions"] == [] and len(shown["0000:3b:00.4"]["mdev_types"]) == 2
    # Types on the physical function itself: the driver's available instances.
    assert [(p["type"], p["total"]) for p in shown["0000:86:00.0"]["partitions"]] == [
        ("nvidia-11", 16),
        ("nvidia-18", 2),
    ]
    assert {d["mode"] for d in shown.values()} == {None}
    assert "GPU partitions (vGPU types" in cli.ok("host", "show", "v").stdout
    host = parse_capabilities(CAPS.read_bytes(), name="v")
    devices = with_parent_bridges(
        parse_nodedev_file_content((DATA / "nodedev" / "gpu-sriov-vfs.xml").read_bytes(), "s")
        + parse_nodedev_file_content((DATA / "nodedev" / "gpu-mdev-types.xml").read_bytes(), "m")
    )
    host = replace(host, devices=devices)
    assert host_from_dict(host_to_dict(host)) == host


def test_existing_mediated_devices_are_kept_with_the_host_and_shown(cli: Cli) -> None:
    nodedev = DATA / "nodedev"
    files = ["gpu-sriov-vfs.xml", "gpu-mdev-types.xml", "mdevs-existing.xml"]
    cli.ok("host", "list")  # the inventory exists before the refusal
    refused_unchanged(cli, ["host", "import", "v", "--capabilities", str(CAPS), "--nodedev",
                            str(nodedev / "mdevs-existing.xml"), "--strict"], 4, "which the host does not have")
    args = [a for f in files for a in ("--nodedev", str(nodedev / f))]
    cli.ok("host", "import", "v", "--capabilities", str(CAPS), *args)
    shown = cli.ok("host", "show", "v", "--json").json()
    assert [(m["type"], m["parent"], m["iommu_group"]) for m in shown["mdevs"]] == [
        ("nvidia-18", "0000:86:00.0", 131), ("nvidia-18", "0000:86:00.0", 132), ("nvidia-1049", "0000:3b:00.4", 140),
    ]
    table = cli.ok("host", "show", "v").stdout
    assert "mediated devices" in table and "c3a5e7d1-88f2-4a0b-9d6e-51b2a4f7e013" in table
    line = next(x for x in table.splitlines() if x.startswith("c3a5e7d1"))
    assert line.split()[2:4] == ["0000:3b:00.4", "0000:3b:00.0"]  # on a VF: its GPU is the PF
    host = host_from_dict(shown)
    assert len(host.mdevs) == 3 and host_from_dict(host_to_dict(host)) == host
    plain = replace(host, mdevs=())
    assert '"mdevs"' in encode_topology(host) and '"mdevs"' not in encode_topology(plain)
    assert ShapeDecoder().host("v", None, host.source.value, encode_topology(host), "") == host
