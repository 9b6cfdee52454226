"""Classes of service (CLOS ids) are a host-wide budget, read from libvirt's own capabilities files.

The files are libvirt 9.0.0's ``tests/vircaps2xmldata/vircaps-x86_64-resctrl*.xml``, copied unchanged to
``tests/data/libvirt/vircaps2xmldata`` (libvirt, LGPL-2.1-or-later). libvirt writes each control's
``maxAllocs`` from the kernel's ``info/<resource>/num_closids`` (its ``linux-resctrl`` sysfs data: 4 for L3
and MB; ``linux-resctrl-cdp``: 8 for L3CODE and for L3DATA, the halved count). A resctrl group takes one
CLOS id on the whole host (its ``schemata`` holds a mask for every cache id), so a host takes as many VMs
with slices or caps as its smallest count less the default group's one, whichever sockets they use.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

VIRCAPS = REPO / "tests" / "data" / "libvirt" / "vircaps2xmldata"
FILES = sorted(p.name for p in VIRCAPS.glob("vircaps-x86_64-resctrl*.xml"))


def _without_hugepages(path: Path, into: Path) -> Path:
    """The file with its hugepage counts set to 0, all else as libvirt wrote it: its pools are larger than its
    cells (6144 x 1 GiB pages on a 1 GiB cell), which the import caps keeping the largest pages first, so no
    4 KiB page would be left for VMs that take those (the class count is what these tests read)."""
    text = re.sub(r"(<pages unit='KiB' size='(?:2048|1048576)'>)\d+(</pages>)", r"\g<1>0\g<2>", path.read_text())
    out = into / path.name
    out.write_text(text)
    return out


def _smallest_max_allocs(path: Path) -> int | None:
    """The file's smallest ``maxAllocs`` (any control), read on its own; None where it has none."""
    counts = [int(el.get("maxAllocs", "")) for el in ElementTree.parse(path).iter("control")]
    return min(counts, default=None)


def test_libvirts_resctrl_files_are_all_here() -> None:
    assert FILES == [
        "vircaps-x86_64-resctrl-cdp.xml", "vircaps-x86_64-resctrl-cmt.xml", "vircaps-x86_64-resctrl-fake-feature.xml",
        "vircaps-x86_64-resctrl-skx-twocaches.xml", "vircaps-x86_64-resctrl-skx.xml", "vircaps-x86_64-resctrl.xml",
    ]
    assert _smallest_max_allocs(VIRCAPS / "vircaps-x86_64-resctrl.xml") == 4  # linux-resctrl: L3 and MB 4
    assert _smallest_max_allocs(VIRCAPS / "vircaps-x86_64-resctrl-cdp.xml") == 8  # L3CODE and L3DATA: 8 each


@pytest.mark.parametrize("name", FILES)
def test_host_show_counts_the_classes_libvirt_reports(tmp_path: Path, name: str) -> None:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "h", "--capabilities", str(VIRCAPS / name))
    smallest = _smallest_max_allocs(VIRCAPS / name)
    shown = cli.ok("host", "show", "h", "--json").json()["resctrl"]
    text = cli.ok("host", "show", "h").stdout
    if smallest is None:  # monitoring only (CMT): no class count, no VM holds a group here
        assert shown["classes"] is None and "classes of service" not in text
        return
    assert shown["classes"] == {"used": 0, "total": smallest - 1}
    assert f"resctrl classes of service: {smallest - 1} of {smallest - 1} left (host-wide: the host has " \
           f"{smallest}, its default group holds one" in text


@pytest.mark.parametrize(
    ("name", "memory", "ways"),
    [("vircaps-x86_64-resctrl.xml", "4MiB", "2"), ("vircaps-x86_64-resctrl-cdp.xml", "2MiB", "1")],
    ids=["cat-mba", "cdp"],
)
def test_vms_with_slices_on_both_sockets_share_the_hosts_classes(
    tmp_path: Path, name: str, memory: str, ways: str
) -> None:
    """Two sockets, one L3 each: VMs with slices fill socket 0's 4K pages, then go to socket 1; the host
    takes its smallest maxAllocs less one of them (the default group holds a class), not that many per
    socket, though socket 1 has CPUs, pages and ways left. The refusal names the host-wide count."""
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "h", "--capabilities", str(_without_hugepages(VIRCAPS / name, tmp_path)))
    cli.ok("host", "reserve", "h", "--llc-ways", "2")
    cli.ok("tenant", "create", "t")
    total = _smallest_max_allocs(VIRCAPS / name)
    assert total is not None
    ask = ["place", "t", "--vcpus", "1", "--memory", memory, "--page-size", "4K", "--llc-ways", ways, "--json"]
    caches = [cli.ok(*ask, "--name", f"v{i}").json()["llc"][0]["cache"] for i in range(total - 1)]
    assert set(caches) == {0, 1}  # slices on both sockets
    before = dump(cli.db)
    refused = cli(*ask, "--name", "late")
    assert refused.exit_code == 5
    assert (f"resctrl: host 'h' has no free class of service ({total} of {total} in use: the default group and "
            f"{total - 1} VMs)") in refused.stderr
    assert dump(cli.db) == before
    assert cli("place", "t", "--vcpus", "1", "--memory", memory, "--page-size", "4K", "--name", "plain").exit_code == 0
    assert cli.ok("host", "show", "h", "--json").json()["resctrl"]["classes"] == {"used": total - 1, "total": total - 1}
    assert f"resctrl classes of service: 0 of {total - 1} left" in cli.ok("host", "show", "h").stdout
    cli.ok("vm", "release", "v0")
    assert f"resctrl classes of service: 1 of {total - 1} left" in cli.ok("host", "show", "h").stdout
    cli.ok(*ask, "--name", "late")
