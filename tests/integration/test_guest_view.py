"""``vm guest-view`` checked from inside a booted guest on the real libvirtd.

A small Linux boots under QEMU (TCG) by direct kernel boot: Debian's own
kernel (``scripts/setup --test`` fetches the package and keeps its vmlinuz in
``.cache/guest/``) and a busybox initramfs this test builds. Its init prints
what the guest kernel found — each node's CPUs, distances and present memory
(``/proc/zoneinfo``), each PCI function's NUMA node, and the SMBIOS OEM
string ``--guest-hints`` wrote — to a serial console file, then powers off.

The domain is ``vnuma render --guest-hints --domain-type qemu`` of a VM
placed with two guest cells and one GPU per cell, on an imported host whose
cells hold this machine's CPUs 0 and 1. Two substitutions make it bootable
here, and neither touches what the guest sees: this machine has one NUMA
node, so the host-side memory bindings point at node 0; it has no GPU, so
each ``<hostdev>`` becomes an emulated virtio-rng at the same guest
``<address>`` (same root port, same expander, same guest node).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from lxml import etree

from tests.cli.conftest import REPO, Cli
from tests.integration.conftest import remove_domain, virsh

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon]

KERNEL = REPO / ".cache" / "guest" / "vmlinuz"
DATA = REPO / "tests" / "data" / "guestboot"
BOOT_ROOT = Path("/var/lib/libvirt/boot")  # a directory the QEMU user can reach
VIRTIO_VENDOR = "0x1af4"
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo VNUMA-BEGIN
for n in /sys/devices/system/node/node[0-9]*; do
  echo "node ${n##*/node} cpus $(cat $n/cpulist) distance $(cat $n/distance)"
done
awk '$1 == "Node" {node = $2 + 0} $1 == "present" {p[node] += $2}
     END {for (n in p) print "present " n " " p[n] * 4}' /proc/zoneinfo
for d in /sys/bus/pci/devices/*; do
  echo "pci ${d##*/} node $(cat $d/numa_node) vendor $(cat $d/vendor)"
done
strings -n 8 /sys/firmware/dmi/tables/DMI | grep -o 'vnuma-guest-view:.*' | sed 's/^/hint /'
echo VNUMA-END
poweroff -f
"""


def _initramfs(where: Path, init: str = INIT, files: Path | None = None) -> Path:
    """A busybox initramfs whose ``/init`` is ``init``, with the files of directory ``files`` at its root."""
    root = where / "initramfs"
    (root / "bin").mkdir(parents=True)
    for d in ("proc", "sys", "dev", "tmp"):
        (root / d).mkdir()
    busybox = shutil.which("busybox")
    assert busybox, "busybox-static is not installed (scripts/setup --test installs it)"
    shutil.copy(busybox, root / "bin" / "busybox")
    for f in files.iterdir() if files is not None else ():
        shutil.copy(f, root / f.name)
    (root / "init").write_text(init)
    (root / "init").chmod(0o755)
    names = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    archive = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names, capture_output=True, check=True
    )
    out = where / "initrd.cpio"
    out.write_bytes(archive.stdout)
    return out


def _bootable(xml: str, boot: Path, console: Path) -> str:
    """The rendered domain with kernel, initrd, a console file and this machine's two substitutions."""
    root = etree.fromstring(xml.encode())
    os_el = root.find("os")
    for tag, text in (
        ("kernel", str(boot / "vmlinuz")),
        ("initrd", str(boot / "initrd.cpio")),
        ("cmdline", "console=ttyS0 quiet loglevel=1 panic=-1"),
    ):
        etree.SubElement(os_el, tag).text = text
    for node in root.iterfind("numatune/*"):
        node.set("nodeset", "0")
    devices = root.find("devices")
    for hostdev in devices.findall("hostdev"):
        rng = etree.Element("rng", model="virtio")
        etree.SubElement(rng, "backend", model="random").text = "/dev/urandom"
        rng.append(hostdev.find("address"))
        devices.replace(hostdev, rng)
    for console_el in devices.findall("console"):
        devices.remove(console_el)
    serial = etree.SubElement(devices, "serial", type="file")
    etree.SubElement(serial, "source", path=str(console))
    return etree.tostring(root, encoding="unicode")


def _wait_off(name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = virsh("list", "--name")
        if name not in listed.split():
            return
        time.sleep(1)
    pytest.fail(f"guest {name} did not power off within {timeout:.0f} s")


def _parse(console: str) -> dict[str, object]:
    assert "VNUMA-BEGIN" in console and "VNUMA-END" in console, console[-3000:]
    body = console.split("VNUMA-BEGIN", 1)[1].split("VNUMA-END", 1)[0]
    nodes: dict[int, tuple[str, list[int]]] = {}
    present: dict[int, int] = {}
    pci: dict[str, tuple[int, str]] = {}
    hints: list[str] = []
    for line in body.splitlines():
        line = line.strip()
        if m := re.fullmatch(r"node (\d+) cpus (\S*) distance ([\d ]+)", line):
            nodes[int(m[1])] = (m[2], [int(v) for v in m[3].split()])
        elif m := re.fullmatch(r"present (\d+) (\d+)", line):
            present[int(m[1])] = int(m[2])
        elif m := re.fullmatch(r"pci (\S+) node (-?\d+) vendor (\S+)", line):
            pci[m[1]] = (int(m[2]), m[3])
        elif line.startswith("hint "):
            hints.append(line[len("hint ") :])
    return {"nodes": nodes, "present": present, "pci": pci, "hints": hints}


@pytest.mark.parametrize(
    ("nodedev", "shape"),
    [
        # One GPU per guest cell: an expander per cell, a root port per GPU.
        (DATA / "nodedev.xml", ("--vcpus", "2", "--numa-nodes", "2")),
        # Two GPUs under one host switch (and the first one's audio function, its IOMMU group): one expander
        # with a mirrored switch, the guest numbering its buses depth first.
        (REPO / "tests" / "data" / "nodedev" / "dgx-like.xml", ("--vcpus", "1", "--numa-nodes", "1")),
    ],
    ids=["cell-per-gpu", "mirrored-switch"],
)
def test_the_guest_sees_what_guest_view_says(
    libvirtd: str, tmp_path: Path, nodedev: Path, shape: tuple[str, ...]
) -> None:
    if not KERNEL.is_file():
        pytest.fail(f"no guest kernel at {KERNEL}: scripts/setup --test fetches Debian's kernel package")
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "twocell", "--capabilities", str(DATA / "capabilities.xml"), "--nodedev", str(nodedev))
    cli.ok("tenant", "create", "boot")
    name = f"vnuma-guestview-{os.getpid()}-{len(shape[1])}{shape[3]}"
    cli.ok("place", "boot", *shape, "--memory", "256MiB", "--gpus", "2", "--page-size", "4K", "--name", name)
    view = cli.ok("vm", "guest-view", name, "--json").json()
    xml = cli.ok("render", name, "--guest-hints", "--domain-type", "qemu").stdout

    boot = BOOT_ROOT / name
    boot.mkdir(parents=True)
    try:
        shutil.copy(KERNEL, boot / "vmlinuz")
        shutil.copy(_initramfs(tmp_path), boot / "initrd.cpio")
        console = boot / "console.log"
        domain = tmp_path / "domain.xml"
        domain.write_text(_bootable(xml, boot, console))
        virsh("create", str(domain))
        _wait_off(name, 300)
        seen = _parse(console.read_text(errors="replace"))
    finally:
        remove_domain(libvirtd, name)
        shutil.rmtree(boot, ignore_errors=True)

    nodes, present, pci = seen["nodes"], seen["present"], seen["pci"]
    assert isinstance(nodes, dict) and isinstance(present, dict) and isinstance(pci, dict)
    assert sorted(nodes) == [n["id"] for n in view["nodes"]]
    for node in view["nodes"]:
        cpulist, distances = nodes[node["id"]]
        assert cpulist == ",".join(map(str, node["vcpus"])), (node, cpulist)
        # One node has no <distances> (the guest kernel reports its own 10); more mirror the host's SLIT.
        assert distances == ([node["distances"][str(i)] for i in sorted(nodes)] if node["distances"] else [10])
        # The guest kernel counts the node's RAM less firmware holes (the first MiB, tables at the top).
        assert node["memory_kib"] - 2048 <= present[node["id"]] <= node["memory_kib"], (node, present)
    for dev in view["devices"]:
        assert pci.get(dev["guest_address"]) == (dev["node"], VIRTIO_VENDOR), (dev, pci)
    assert len(seen["hints"]) == 1
    hint = str(seen["hints"][0])  # type: ignore[index]
    assert json.loads(hint.split(":", 1)[1]) == view
