"""Reuse the CLI fixtures (a runner on a fresh inventory, a database dump), and a VM running on libvirt's test
driver."""

from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_host
from tests.cli.conftest import Cli, cli, dumped  # noqa: F401
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
