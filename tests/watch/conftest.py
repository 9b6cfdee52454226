"""The watch's fixtures: the CLI runner, and the inventory the recorded fleet (tests/data/watch/fleet) belongs to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, Cli, cli  # noqa: F401
from tests.stats.conftest import (
    resctrl_vms,
    running,  # noqa: F401
)

CAPS = REPO / "tests" / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"
FLEET = REPO / "tests" / "data" / "watch" / "fleet"
T0 = 1796601600
"""The first recorded round's time (tests/watch/recordings.py)."""


def make_fleet(cli: Cli) -> Cli:  # noqa: F811
    """Hosts rdt and rdt2 (2 sockets, CAT/MBA/MBM), tenants a and b, VMs a1 (capped at 30 %), a2, b1 on rdt's
    L3 domain 0, b2 on its domain 1 (:func:`tests.stats.conftest.resctrl_vms`), c1 on rdt2: what the
    recordings name."""
    resctrl_vms(cli)
    cli.ok("host", "import", "rdt2", "--capabilities", str(CAPS))
    cli.ok("host", "reserve", "rdt2", "--llc-ways", "2")
    doc = cli.ok("place", "tenant-b", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--name", "c1",
                 "--llc-ways", "2", "--host", "rdt2", "--json").json()
    assert [c["host_cell"] for c in doc["cells"]] == [0]  # as recorded
    return cli


@pytest.fixture
def fleet(cli: Cli) -> Cli:  # noqa: F811
    return make_fleet(cli)


def at(sample: int) -> str:
    """The ISO time of a recorded sample."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0 + 10 * sample, UTC).isoformat(timespec="seconds")


def copy_rounds(dest: Path, keep: Any) -> Path:
    """The recorded files whose sample number passes ``keep``, copied into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in FLEET.glob("*.txt"):
        sample = (int(path.name.split("@")[1].split(".")[0]) - T0) // 10
        if keep(sample):
            (dest / path.name).write_text(path.read_text())
    return dest


@pytest.fixture
def fleet_url(url: str) -> str:
    """The recorded fleet (:func:`make_fleet`) in an empty inventory at ``url`` (SQLite, then PostgreSQL)."""
    inventory = Cli(url)  # type: ignore[arg-type]
    if not url.startswith("sqlite"):
        inventory.ok("db", "upgrade")
    make_fleet(inventory)
    return url
