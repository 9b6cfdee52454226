"""`vnuma place --cold-memory`: the cold guest cell end to end: the JSON contract, the claims, release, bad
input, and a domain libvirt's test driver defines and `reconcile` finds in agreement.

The host is libvirt's HMAT capabilities shape: CPU cells 0 and 1, memory-only cells 2 and 3 (256 GiB each,
CXL-like by HMAT), cell 2 rated from cell 0 and cell 3 from cell 1.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

CAPS = REPO / "tests" / "data" / "capabilities"
HMAT = str(CAPS / "x86-hmat-memonly.xml")


@pytest.fixture
def hm(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "hm", "--capabilities", HMAT)
    cli.ok("tenant", "create", "t")
    return cli


def _pages(db: Path) -> list[tuple[str, int, int, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT v.name, c.cell_id, c.page_size_kib, c.count FROM page_claims c JOIN vms v ON v.id = c.vm_id "
            "ORDER BY v.name, c.cell_id"
        ).fetchall()


def test_the_cold_cell_is_placed_claimed_shown_and_released(hm: Cli) -> None:
    doc = hm.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--cold-memory", "16GiB", "--name", "v1",
                "--json").json()
    hot, cold = doc["cells"]
    assert "cold" not in hot and hot["host_cell"] == 0
    assert cold == {"guest_cell": 1, "host_cell": 2, "vcpus": [], "pcpus": [], "memory_mib": 16384,
                    "memory_kib": 16 * 1024 * 1024, "page_size_kib": 4, "memory_mode": "strict", "cold": True}
    assert doc["cold_tier"] == "any"
    assert hm.ok("vm", "show", "v1", "--json").json()["cells"][1] == cold
    assert "- (cold)" in hm.ok("vm", "show", "v1").stdout
    assert ("v1", 2, 4, 4 * 1024 * 1024) in _pages(hm.db)  # 16 GiB of 4 KiB pages on memory-only cell 2
    hm.ok("vm", "release", "v1")
    assert _pages(hm.db) == []


def test_cxl_tier_and_no_room_and_bad_sizes(hm: Cli) -> None:
    doc = hm.ok("place", "t", "--vcpus", "2", "--memory", "2GiB", "--cold-memory", "8GiB", "--cold-tier", "cxl",
                "--json").json()
    assert doc["cold_tier"] == "cxl" and doc["cells"][-1]["host_cell"] in (2, 3)  # CXL by HMAT
    before = dump(hm.db)
    full = hm("place", "t", "--vcpus", "2", "--memory", "2GiB", "--cold-memory", "1TiB")
    assert full.exit_code == 5 and "VM asks 1 TiB of cold memory" in full.stderr
    for bad, exit_code, words in (("lots", 4, "lots"), ("6KiB", 4, "whole number of 4 KiB pages")):
        res = hm("place", "t", "--vcpus", "2", "--memory", "2GiB", "--cold-memory", bad)
        assert res.exit_code == exit_code and words in res.stderr and "Traceback" not in res.stderr
    tier = hm("place", "t", "--vcpus", "2", "--memory", "2GiB", "--cold-memory", "1GiB", "--cold-tier", "hbm")
    assert tier.exit_code == 2
    assert dump(hm.db) == before


def test_a_host_without_memory_only_cells_takes_no_cold_tier(hm: Cli) -> None:
    hm.ok("host", "import", "plain", "--capabilities", str(CAPS / "epyc-8cell-nps4.xml"))
    res = hm("place", "t", "--vcpus", "2", "--memory", "2GiB", "--cold-memory", "1GiB", "--host", "plain")
    assert res.exit_code == 5 and "plain: no memory-only cell for 1 GiB of cold memory" in res.stderr


@pytest.mark.libvirt
def test_the_domain_is_defined_by_libvirt_and_reconcile_finds_it_in_agreement(cli: Cli, conn: Any) -> None:
    cli.ok("host", "add", "hm", "--uri", "test:///default", "--capabilities", HMAT)
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--cold-memory", "16GiB", "--name", "v1")
    cli.ok("apply", "v1")
    xml = conn.lookupByName("v1").XMLDesc(0)
    assert "<cell id='1' memory='16777216' unit='KiB'>" in xml
    assert "<memnode cellid='1' mode='strict' nodeset='2'/>" in xml
    assert "<interconnects>" in xml
    stock = conn.lookupByName("test")  # the driver's own domain, not vnuma's (the fixture restores it)
    stock.destroy()
    stock.undefine()
    res = cli("reconcile", "hm", "--json")
    assert res.exit_code == 0, res.stdout
    (host,) = res.json()["hosts"]
    assert res.json()["in_agreement"] and [f["drift"] for f in host["findings"] if f["name"] == "v1"] in ([], ["none"])
