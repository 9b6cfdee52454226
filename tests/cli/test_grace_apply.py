"""Applying a VM with a Grace GPU's memory nodes: refused by a libvirt older than 11.8.0, before anything changes.

The hypervisor is libvirt's own test driver on a node file holding the GH200-like host's node devices (written
into the test's directory from ``tests/data/grace/gh200-numa-nodedevs.xml``), so ``vnuma host add --uri`` reads
the GPU from libvirt; its topology is ``gh200-mig-capabilities.xml`` (the GPU owns nodes 1-8). The test driver
reports the library's own version: this machine's libvirt 9.0.0, older than the 11.8.0 that brought
``<acpi nodeset>`` to ``<hostdev>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

pytestmark = pytest.mark.libvirt

GRACE = REPO / "tests" / "data" / "grace"


def _node_file(tmp_path: Path) -> Path:
    """A test-driver node file with the GH200-like host's PCI node devices (the driver serves its <device>s)."""
    devices = (GRACE / "gh200-numa-nodedevs.xml").read_text()
    body = devices[devices.index("<device>"):devices.rindex("</devices>")]
    node = tmp_path / "gh200-node.xml"
    node.write_text(
        "<node>\n  <cpu><mhz>3400</mhz><model>aarch64</model><active>72</active><nodes>1</nodes><sockets>1</sockets>"
        "<cores>72</cores><threads>1</threads></cpu>\n  <memory unit='KiB'>503316480</memory>\n  " + body + "</node>\n"
    )
    return node


@pytest.fixture
def gh(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    uri = f"test://{_node_file(tmp_path)}"
    cli.ok("host", "add", "gh", "--uri", uri, "--capabilities", str(GRACE / "gh200-mig-capabilities.xml"))
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "8", "--memory", "16GiB", "--gpus", "1", "--name", "g1")
    return cli


def test_apply_refuses_naming_the_libvirt_needed_and_changes_nothing(gh: Cli) -> None:
    import libvirt

    have = libvirt.getVersion()
    have_text = f"{have // 1_000_000}.{have // 1000 % 1000}.{have % 1000}"
    assert have < 11_008_000, "this test needs a libvirt older than 11.8.0, as Debian 12's 9.0.0"
    before = dump(gh.db)
    res = gh.process("apply", "g1", "--start")
    assert res.exit_code == 8, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == (f"error: host 'gh' runs libvirt {have_text}; VM 'g1' needs libvirt 11.8.0 or later for "
                        "<acpi nodeset> on a <hostdev> (a GPU's memory nodes in the guest)")
    assert len(lines) == 2 and lines[1].startswith("hint: upgrade libvirt on gh to 11.8.0 or later")
    assert "Traceback" not in res.stderr and res.stdout == ""
    # Nothing defined, nothing kept, the VM still only placed.
    assert dump(gh.db) == before
    assert gh.ok("vm", "list", "--json").json()[0]["state"] == "placed"
    assert "in agreement" in gh.ok("reconcile", "gh").stdout
    # --dry-run changes nothing either way and shows what would be defined.
    diff = gh.ok("apply", "g1", "--dry-run").stdout
    assert "+      <acpi nodeset='1-8'/>" in diff and dump(gh.db) == before


def test_the_same_host_still_takes_a_vm_without_the_gpu(gh: Cli) -> None:
    gh.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--name", "plain")
    assert "defined" in gh.ok("apply", "plain").stdout
    refused = gh.process("apply", "g1")
    assert refused.exit_code == 8 and "needs libvirt 11.8.0 or later" in refused.stderr


def test_without_the_check_libvirt_9_would_define_the_vm_without_its_gpu_tie(conn: Any) -> None:
    """Why the version is asked first: libvirt 9.0.0 drops the <acpi nodeset> it does not know when it defines
    without validation, leaving a guest whose GPU memory nodes are tied to nothing (and refuses with it)."""
    import libvirt

    from tests.render.scenarios import BY_NAME

    golden = BY_NAME["gh200-gpu-memory-nodes"].golden.read_text()
    with pytest.raises(libvirt.libvirtError):
        conn.defineXMLFlags(golden, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    dom = conn.defineXMLFlags(golden, 0)
    held = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    assert "<hostdev" in held and "<cell id='8'" in held and "nodeset='1-8'" not in held
