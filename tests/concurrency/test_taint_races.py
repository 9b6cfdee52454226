"""A tainted GPU is never claimed, with placements racing from separate processes (SQLite and PostgreSQL):
GPUs tainted before the race are held by no VM after it, and a GPU tainted during it is held only by VMs whose
claim committed before the taint (the audit log's order: both are written under the host's lock)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import make_fleet, recorded_vms, run_race
from vnuma.services import Settings
from vnuma.services.devices import taint

WORKERS = 4
OPERATIONS = 60


def _gpus(host: int) -> list[str]:
    from tests.builders import make_host

    return [d.address for d in make_host(gpus_per_cell=2).devices if d.kind == "gpu"]


def _order(url: str) -> list[tuple[str, dict[str, object]]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT changes FROM audit_log WHERE outcome = 'ok' ORDER BY id")).all()
    finally:
        engine.dispose()
    return [(c["op"], c) for (doc,) in rows for c in json.loads(doc)["changes"]]


@pytest.mark.slow
def test_tainted_gpus_are_never_claimed_by_racing_placements(url: str) -> None:
    make_fleet(url)
    settings = Settings(db_url=url)
    before = {(f"host-{i}", _gpus(i)[0]) for i in range(3)}
    during = {(f"host-{i}", _gpus(i)[3]) for i in range(3)}
    for host, gpu in sorted(before):
        taint(settings, host, gpu, "Xid 79", who="test")

    def tainter() -> None:
        time.sleep(0.5)  # the racers are under way
        for host, gpu in sorted(during):
            taint(settings, host, gpu, "uncorrectable ECC", who="test")

    thread = threading.Thread(target=tainter)
    thread.start()
    reports = run_race(url, WORKERS, OPERATIONS, seed=5)
    thread.join(timeout=300)

    assert [f for r in reports for f in r.failures] == []
    assert sum(r.outcomes["placed"] for r in reports) > 0
    assert inconsistencies(url) == []
    held = {(doc["host"], d["address"]): vm for vm, doc in recorded_vms(url).items() for d in doc["devices"]}
    assert not before & held.keys()
    tainted_at: dict[tuple[str, str], int] = {}
    claimed_at: dict[str, int] = {}
    for i, (op, change) in enumerate(_order(url)):
        if op == "device-taint":
            tainted_at[(str(change["host"]), str(change["device"]))] = i
        elif op == "claim":
            claimed_at[str(change["vm"])] = i
    assert during <= tainted_at.keys()
    for key in during & held.keys():
        assert claimed_at[held[key]] < tainted_at[key], (key, held[key])
