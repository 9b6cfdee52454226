"""`vnuma apply` and the mediated devices of a VM's GPU partitions, on libvirt's test driver.

The host is a test-driver node file holding the SR-IOV H100 of `tests/data/nodedev/gpu-sriov-vfs.xml` (vGPU
types on 4 VFs) and one mediated device that already exists: the one VM ``ready``'s first vGPU partition
names (its UUID is derived from the VM, so the file can hold it before the VM is placed). The test driver
lists node devices but cannot define, start or remove them: apply defines the domain anyway and says, for
each device it could not make, what to do; a device that exists is left alone without a word.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli
from vnuma.placement.partitions import partition_uuid
from vnuma.sources.demo import demo_capabilities_path

VF = "0000:3b:00.4"
DEVICES = re.compile(r"<device>.*?</device>", re.S)


def _node_file(tmp_path: Path) -> Path:
    sriov = (REPO / "tests" / "data" / "nodedev" / "gpu-sriov-vfs.xml").read_text()
    existing = f"""<device>
    <name>mdev_{partition_uuid("ready", 0).replace("-", "_")}_{VF.replace(":", "_").replace(".", "_")}</name>
    <parent>pci_{VF.replace(":", "_").replace(".", "_")}</parent>
    <capability type='mdev'><type id='nvidia-1049'/><uuid>{partition_uuid("ready", 0)}</uuid>
      <iommuGroup number='64'/></capability>
  </device>"""
    node = tmp_path / "node.xml"
    node.write_text(
        "<node>\n<cpu><mhz>2000</mhz><model>x86_64</model><active>8</active><nodes>1</nodes>"
        "<sockets>1</sockets><cores>4</cores><threads>2</threads></cpu>\n<memory unit='KiB'>16777216</memory>\n"
        + "\n".join(DEVICES.findall(sriov)) + "\n" + existing + "\n</node>\n"
    )
    return node


@pytest.fixture
def lab(cli: Cli, tmp_path: Path) -> Cli:
    node = _node_file(tmp_path)
    cli.ok("host", "add", "lab", "--uri", f"test://{node}", "--capabilities", str(demo_capabilities_path()))
    cli.ok("tenant", "create", "t")
    return cli


def _vgpu(cli: Cli, name: str) -> dict[str, object]:
    doc = cli.ok("place", "t", "--vcpus", "2", "--memory", "2GiB", "--vgpu", "nvidia-1049", "--name", name,
                 "--json").json()
    (part,) = [d for d in doc["devices"] if d["kind"] == "vgpu"]
    return part


def test_an_existing_device_is_used_and_a_missing_one_is_named_with_what_to_do(lab: Cli) -> None:
    shown = lab.ok("host", "show", "lab", "--json").json()
    assert [m["uuid"] for m in shown["mdevs"]] == [partition_uuid("ready", 0)]

    ready = _vgpu(lab, "ready")
    assert (ready["vf"], ready["uuid"]) == (VF, partition_uuid("ready", 0))
    gpu = next(d for d in lab.ok("host", "show", "lab", "--json").json()["devices"] if d["address"] == ready["gpu"])
    assert gpu["mode"] == "vgpu"
    assert gpu["layout"] == [{"vm": "ready", "type": "nvidia-1049", "start": None, "vf": VF}]
    assert f"vgpu: nvidia-1049 on {VF} (ready)" in lab.ok("host", "show", "lab").stdout
    res = lab.ok("apply", "ready")
    assert res.stdout == "VM ready: defined\n" and "note:" not in res.stderr

    other = _vgpu(lab, "other")
    assert other["vf"] != VF
    res = lab.ok("apply", "other")
    assert res.stdout == "VM other: defined\n"
    (note,) = res.stderr.splitlines()
    assert note.startswith(f"note: mediated device {other['uuid']} (vGPU nvidia-1049 on {other['vf']}) not created:")
    assert "cannot create node devices" in note and "virsh nodedev-define" in note
    assert "<address uuid='" + str(other["uuid"]) + "'/>" in lab.ok("render", "other").stdout

    # Undefining the domain takes its device with it; where the driver cannot, it says so.
    res = lab.ok("vm", "undefine", "ready")
    assert res.stdout == "VM ready: placed\n"
    uri = lab.ok("host", "show", "lab", "--json").json()["uri"]
    assert res.stderr.splitlines() == [
        f"note: mediated device {ready['uuid']} (vGPU nvidia-1049 on {VF}) not removed: {uri} cannot remove node "
        "devices"
    ]
    res = lab.ok("vm", "release", "other", "--undefine")
    assert "note:" not in res.stderr  # its device never existed: nothing to remove


def test_a_vm_without_partitions_says_nothing(lab: Cli) -> None:
    lab.ok("place", "t", "--vcpus", "2", "--memory", "2GiB", "--name", "plain")
    res = lab.ok("apply", "plain")
    assert res.stderr == ""


def test_a_mig_instance_without_its_device_is_named_with_the_nvidia_steps(lab: Cli) -> None:
    lab.ok("gpu-profile", "import", str(REPO / "tests" / "data" / "gpu-profiles" / "demo-h100-pcie.json"))
    doc = lab.ok("place", "t", "--vcpus", "2", "--memory", "2GiB", "--mig", "3g.40gb", "--name", "m", "--json").json()
    (part,) = [d for d in doc["devices"] if d["kind"] == "mig"]
    res = lab.ok("apply", "m")
    (note,) = res.stderr.splitlines()
    assert note == (
        f"note: mediated device {part['uuid']} (MIG 3g.40gb@{part['start']} on GPU {part['gpu']}) does not exist "
        "on lab: create the MIG instance and its vGPU device with this UUID (nvidia-smi mig -cgi, mdevctl) before "
        "starting"
    )
    assert "note:" not in lab.ok("vm", "undefine", "m").stderr  # a MIG device is the operator's: never removed


def test_the_adapter_answers_exists_absent_and_unsupported_as_the_test_driver_allows(tmp_path: Path) -> None:
    from vnuma.hypervisor.base import MdevResult
    from vnuma.hypervisor.libvirt_driver import connect

    hv = connect(f"test://{_node_file(tmp_path)}")
    try:
        uuid = partition_uuid("ready", 0)
        assert hv.has_mdev(uuid) and hv.has_mdev(uuid.upper()) and not hv.has_mdev(partition_uuid("x", 0))
        assert hv.create_mdev(uuid, VF, "nvidia-1049") is MdevResult.EXISTS
        # another type (or parent) under that UUID would be replaced: the driver can remove nothing
        assert hv.create_mdev(uuid, VF, "nvidia-1047") is MdevResult.UNSUPPORTED
        assert hv.create_mdev(partition_uuid("x", 0), VF, "nvidia-1049") is MdevResult.UNSUPPORTED
        assert hv.remove_mdev(partition_uuid("x", 0)) is MdevResult.ABSENT
        assert hv.remove_mdev(uuid) is MdevResult.UNSUPPORTED
        assert hv.has_mdev(uuid)
    finally:
        hv.close()


def test_a_move_makes_the_devices_on_the_new_host_and_removes_them_from_the_old(lab: Cli, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    lab.ok("host", "add", "lab2", "--uri", f"test://{_node_file(other)}", "--capabilities",
           str(demo_capabilities_path()))
    ready = _vgpu(lab, "ready")
    lab.ok("apply", "ready")
    uris = {h["name"]: h["uri"] for h in lab.ok("host", "list", "--json").json()}
    res = lab.ok("vm", "migrate", "ready", "--to", "lab2", "--cold", "--json")
    moved = res.json()
    assert moved["run"]["status"] == "done"
    # lab2's node file holds a device under this UUID too (the same file): it is there, nothing to make;
    # lab's cannot be removed by the test driver, and the run says so, also in its JSON.
    note = (f"mediated device {ready['uuid']} (vGPU nvidia-1049 on {VF}) not removed: {uris['lab']} cannot "
            "remove node devices")
    assert res.stderr.count("note: ") == 1 and f"note: {note}" in res.stderr
    assert moved["run"]["notes"] == [note]
    assert lab.ok("vm", "show", "ready", "--json").json()["host"] == "lab2"
