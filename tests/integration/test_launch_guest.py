"""``vm guest-view --launch`` checked from inside a booted guest: numactl takes each printed binding, and the nodes,
CPUs and GPUs the lines name are the guest's.

The guest boots as in ``test_nccl_guest.py`` (same VM: 4 GPUs and their NICs
over two guest nodes of the DGX-like host, virtio stand-ins at the rendered
addresses). The initramfs carries this machine's ``numactl`` with its
libraries, run through the dynamic loader; for each launch line the init
script runs the line's own ``numactl`` options around ``numactl --show`` (what
the kernel then applies: the policy, the CPU and memory nodes), prints the
node's ``cpulist`` and each named GPU's ``numa_node``.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.integration.test_guest_view import DATA, KERNEL
from tests.integration.test_nccl_guest import NODEDEV, TOPO_M, boot_embedded

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

LIBS = ("/lib/x86_64-linux-gnu/libnuma.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2")


def _init(doc: dict) -> str:
    """The guest's init: per launch line, its binding around ``numactl --show``, the node's CPUs, its GPUs' nodes."""
    numactl = "/ld-linux-x86-64.so.2 --library-path / /numactl"
    out = ["#!/bin/busybox sh", "/bin/busybox --install -s /bin", "mount -t proc proc /proc",
           "mount -t sysfs sysfs /sys", "echo VNUMA-BEGIN"]
    for n in doc["nodes"]:
        words = shlex.split(n["command"])
        options = words[1:next(i for i, w in enumerate(words) if i and not w.startswith("--"))]
        node = n["node"]
        out.append(f"{numactl} {shlex.join(options)} {numactl} --show 2>&1 | sed 's/^/show {node} /'")
        out.append(f"echo \"cpulist {node} $(cat /sys/devices/system/node/node{node}/cpulist)\"")
        out += [f"echo \"gpu {node} {a} $(cat /sys/bus/pci/devices/{a}/numa_node)\"" for a in n["gpu_addresses"]]
    out += ["echo VNUMA-END", "poweroff -f"]
    return "\n".join(out) + "\n"


def _cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def test_numactl_in_the_guest_takes_every_launch_line(embedded: Any, tmp_path: Path) -> None:
    if not KERNEL.is_file():
        pytest.fail(f"no guest kernel at {KERNEL}: scripts/setup --test fetches Debian's kernel package")
    if not all(Path(lib).is_file() for lib in LIBS) or shutil.which("numactl") is None:
        pytest.fail("the guest needs this machine's numactl and its libraries (apt-get install numactl)")
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "dgx", "--capabilities", str(DATA / "capabilities.xml"), "--nodedev", str(NODEDEV),
           "--nvidia-smi-topo", str(TOPO_M))
    cli.ok("tenant", "create", "boot")
    cli.ok("place", "boot", "--vcpus", "2", "--numa-nodes", "2", "--memory", "256MiB", "--gpus", "4",
           "--nics", "per-gpu", "--page-size", "4K", "--name", "launch")
    doc = cli.ok("vm", "guest-view", "launch", "--launch", "vllm", "--json").json()
    xml = cli.ok("render", "launch", "--domain-type", "qemu").stdout
    assert [n["node"] for n in doc["nodes"]] == [0, 1]

    extra = tmp_path / "extra"
    extra.mkdir()
    for f in (shutil.which("numactl"), *LIBS):
        shutil.copy(str(f), extra / Path(str(f)).name)
    lines = boot_embedded(embedded, xml, tmp_path, _init(doc), extra)
    for n in doc["nodes"]:
        node = n["node"]
        show = {k.strip(): v.strip() for line in lines if line.startswith(f"show {node} ")
                for k, _, v in [line.removeprefix(f"show {node} ").partition(":")]}
        assert show.get("policy") == "bind" and show.get("membind") == str(node), (node, lines)
        assert show.get("cpubind") == str(node) and show.get("nodebind") == str(node), (node, lines)
        cpulist = next(line.split()[2] for line in lines if line.startswith(f"cpulist {node} "))
        assert _cpulist(cpulist) == n["cpus"]
        gpus = [line.split() for line in lines if line.startswith(f"gpu {node} ")]
        assert [(g[2], g[3]) for g in gpus] == [(a, str(node)) for a in n["gpu_addresses"]]
