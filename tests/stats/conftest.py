"""Reuse the CLI fixtures (a runner on a fresh inventory, a database dump), and a VM running on libvirt's test
driver."""

from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_host
from tests.cli.conftest import REPO, Cli, cli, dumped  # noqa: F401
from tests.sources.capswriter import capabilities_xml


@pytest.fixture
def running(cli: Cli, conn: Any, tmp_path: Path) -> Cli:  # noqa: F811
    """``cli`` with host h on ``test:///default`` (2 cells x 4 cores), tenant a and its VM v applied and running."""
    caps = tmp_path / "caps.xml"
    caps.write_text(capabilities_xml(make_host(cells=2, cores_per_cell=4, smt=1, hugepages_1g_gib=0)))
    cli.ok("host", "add", "h", "--uri", "test:///default", "--capabilities", str(caps))
    cli.ok("tenant", "create", "a")
    cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "v")
    cli.ok("apply", "v", "--start")
    return cli


RESCTRL_CAPS = REPO / "tests" / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"


def resctrl_vms(cli: Cli) -> Cli:  # noqa: F811
    """Host rdt (2 sockets, CAT/MBA/MBM) with the recordings' four VMs: a1 (capped at 30 %), a2 of tenant-a and b1
    on L3 domain 0, b2 of tenant-b on domain 1, as recorded."""
    cli.ok("host", "import", "rdt", "--capabilities", str(RESCTRL_CAPS))
    cli.ok("host", "reserve", "rdt", "--llc-ways", "2")
    for tenant in ("tenant-a", "tenant-b"):
        cli.ok("tenant", "create", tenant)
    for name, tenant, vcpus, extra in (
        ("a1", "tenant-a", "2", ("--mem-bw", "30")), ("a2", "tenant-a", "2", ()), ("b1", "tenant-b", "2", ()),
        ("b2", "tenant-b", "4", ()),
    ):
        doc = cli.ok("place", tenant, "--vcpus", vcpus, "--memory", "2GiB", "--page-size", "2M", "--name", name,
                     "--llc-ways", "2", *extra, "--json").json()
        assert [c["host_cell"] for c in doc["cells"]] == ([1] if name == "b2" else [0])  # as recorded
    return cli
