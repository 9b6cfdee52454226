"""The audit the race and SIGKILL tests rely on finds each kind of inconsistency it looks for."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.builders import make_host
from tests.concurrency.consistency import inconsistencies
from tests.inventory.conftest import placement
from vnuma.inventory import open_inventory
from vnuma.placement.model import Isolation


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.db"
    with open_inventory(f"sqlite:///{path}") as inv:
        inv.add_host(make_host("host-a", gpus_per_cell=1))
        inv.claim(placement("vm1", (2, 3), gpus=("0000:10:00.0",)), Isolation.CORE)
        inv.claim(placement("vm2", (4, 5), memory_gib=2), Isolation.CORE)
    return path


def _moved_vm2_onto_vm1(conn: sqlite3.Connection) -> None:
    doc = json.loads(conn.execute("SELECT placement FROM vms WHERE name = 'vm2'").fetchone()[0])
    doc["cells"][0]["pcpus"] = [2, 3]
    conn.execute("UPDATE vms SET placement = ? WHERE name = 'vm2'", (json.dumps(doc),))


CORRUPTIONS = [
    ("missing-cpu-claim", "DELETE FROM cpu_claims WHERE cpu_id = 2", "VM vm1: cpu claims"),
    ("missing-device-claim", "DELETE FROM device_claims", "VM vm1: device claims"),
    ("orphan-claim", "INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (99, 1, 9, 1)",
     "without a VM row"),
    ("shared-on-pinned", "INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) "
     "SELECT id, host_id, 2, 0 FROM vms WHERE name = 'vm2'", "pCPU 2 of host host-a held exclusively"),
    ("pages-over-capacity", "UPDATE page_claims SET count = 40", "pages of 1048576 KiB > 32"),
    ("vm-row-gone", "DELETE FROM vms WHERE name = 'vm2'", "without a VM row"),
    ("placements-overlap", _moved_vm2_onto_vm1, "host host-a: pCPU 2 in vm1 and vm2"),
]


def test_a_consistent_inventory_has_no_findings(db: Path) -> None:
    assert inconsistencies(f"sqlite:///{db}") == []


@pytest.mark.parametrize(("change", "finding"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_each_corruption_is_found(db: Path, change: object, finding: str) -> None:
    conn = sqlite3.connect(db)  # the stdlib connection leaves foreign keys off, so rows can be orphaned
    try:
        if callable(change):
            change(conn)
        else:
            conn.execute(str(change))
        conn.commit()
    finally:
        conn.close()
    found = inconsistencies(f"sqlite:///{db}")
    assert any(finding in f for f in found), found
