"""``vm guest-view --nccl-topo`` checked from inside a booted guest, by a script that reads the guest's sysfs.

The guest boots as in ``test_guest_view.py`` (Debian's kernel, a busybox
initramfs, QEMU TCG, each ``<hostdev>`` an emulated virtio-rng at its guest
address), here under libvirt's embedded QEMU driver (the ``embedded`` fixture:
the driver in this process, no daemon). The initramfs carries the topology file;
its init script walks it and, for every ``<pci busid>``, checks in sysfs that
the function exists, that a device's ``numa_node`` is its ``<cpu numaid>``,
and that the device hangs where NCCL reads it: two levels below the
``<pci>`` switch it nests in (the mirrored switch's upstream port), or two
levels below the guest's host bridge (``pci0000:BB``) when it sits directly
in its ``<cpu>``. It prints what it checked and every disagreement.

The VM: 4 GPUs and a NIC beside each on the DGX-like host (with its saved
``nvidia-smi topo -m``), over two guest nodes, so the file has two nodes, two
mirrored switches and NVLinks.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tests.cli.conftest import REPO, Cli
from tests.integration.test_guest_view import DATA, KERNEL, _bootable, _initramfs

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

NODEDEV = REPO / "tests" / "data" / "nodedev" / "dgx-like.xml"
TOPO_M = REPO / "tests" / "data" / "nvidia-smi" / "dgx-like-topo-m.txt"
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo VNUMA-BEGIN
for n in /sys/devices/system/node/node[0-9]*; do
  echo "node ${n##*/node} cpumap $(cat $n/cpumap)"
done
awk '
/<cpu / { match($0, /numaid="[^"]*"/); numa = substr($0, RSTART + 8, RLENGTH - 9); sw = ""; next }
/<pci / {
  match($0, /busid="[^"]*"/); bus = substr($0, RSTART + 7, RLENGTH - 8); depth = index($0, "<")
  if ($0 ~ /class="0x0604/) { sw = bus; swdepth = depth; print "switch", numa, bus, "-"; next }
  print "dev", numa, bus, (sw != "" && depth > swdepth) ? sw : "-"
}
/<\/pci>/ { if (index($0, "<") == swdepth) sw = "" }
' /nccl-topo.xml > /tmp/busids
while read kind numa bus parent; do
  d=/sys/bus/pci/devices/$bus
  echo "checked $kind $bus"
  if [ ! -e $d ]; then echo "bad $bus: no such PCI function"; continue; fi
  [ "$kind" = dev ] || continue
  node=$(cat $d/numa_node)
  [ "$node" = "$numa" ] || echo "bad $bus: numa_node $node, numaid $numa"
  up2=$(basename $(dirname $(dirname $(readlink -f $d))))
  if [ "$parent" = "-" ]; then
    case $up2 in pci*) ;; *) echo "bad $bus: two levels up is $up2, not a host bridge";; esac
  elif [ "$up2" != "$parent" ]; then
    echo "bad $bus: two levels up is $up2, not $parent"
  fi
done < /tmp/busids
echo VNUMA-END
poweroff -f
"""


def _embeddable(xml: str) -> str:
    """The bootable domain without host bindings (the embedded driver, like this machine, has no host cells
    to bind to; they are checked elsewhere)."""
    root = etree.fromstring(xml.encode())
    for tag in ("numatune", "memoryBacking", "cputune"):
        found = root.find(tag)
        if found is not None:
            root.remove(found)
    return etree.tostring(root, encoding="unicode")


def boot_embedded(embedded: Any, xml: str, tmp_path: Path, init: str, extra: Path) -> list[str]:
    """Boot the rendered domain ``xml`` under the embedded driver with Debian's kernel and an initramfs running
    ``init`` (the files of ``extra`` beside it); the non-empty lines it printed between VNUMA-BEGIN and
    VNUMA-END, once it powered off (at most 300 s)."""
    boot = tmp_path / "boot"
    boot.mkdir()
    shutil.copy(KERNEL, boot / "vmlinuz")
    shutil.copy(_initramfs(tmp_path, init, extra), boot / "initrd.cpio")
    console = boot / "console.log"
    dom = embedded.createXML(_embeddable(_bootable(xml, boot, console)), 0)
    try:
        deadline = time.monotonic() + 300
        while "VNUMA-END" not in (console.read_text(errors="replace") if console.exists() else ""):
            if time.monotonic() > deadline:
                pytest.fail("the guest did not finish within 300 s:\n" + console.read_text(errors="replace")[-3000:])
            time.sleep(1)
    finally:
        with contextlib.suppress(pytest.importorskip("libvirt").libvirtError):  # gone once it powered off
            dom.destroy()
    body = console.read_text(errors="replace").split("VNUMA-BEGIN", 1)[1].split("VNUMA-END", 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_every_busid_and_numaid_of_the_topology_is_the_guests(embedded: Any, tmp_path: Path) -> None:
    if not KERNEL.is_file():
        pytest.fail(f"no guest kernel at {KERNEL}: scripts/setup --test fetches Debian's kernel package")
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "dgx", "--capabilities", str(DATA / "capabilities.xml"), "--nodedev", str(NODEDEV),
           "--nvidia-smi-topo", str(TOPO_M))
    cli.ok("tenant", "create", "boot")
    cli.ok("place", "boot", "--vcpus", "2", "--numa-nodes", "2", "--memory", "256MiB", "--gpus", "4",
           "--nics", "per-gpu", "--page-size", "4K", "--name", "nccl")
    topo = cli.ok("vm", "guest-view", "nccl", "--nccl-topo").stdout
    xml = cli.ok("render", "nccl", "--domain-type", "qemu").stdout
    busids = re.findall(r'busid="([^"]+)"', topo)
    assert len(busids) == 10 and "<nvlink" in topo  # 2 switches, 4 GPUs, 4 NICs

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "nccl-topo.xml").write_text(topo)
    lines = boot_embedded(embedded, xml, tmp_path, INIT, extra)
    assert [line for line in lines if line.startswith("bad ")] == []
    checked = [line.split()[2] for line in lines if line.startswith("checked ")]
    assert checked == busids  # every busid of the file, in its order
    cpumaps = {m[1]: int(m[2].replace(",", ""), 16) for line in lines if (m := re.fullmatch(r"node (\d+) cpumap (\S+)",
                                                                                             line))}
    affinity = {m[1]: int(m[2].replace(",", ""), 16) for m in re.finditer(r'numaid="(\d+)" affinity="([^"]+)"', topo)}
    assert affinity == cpumaps
