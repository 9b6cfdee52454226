"""Commands racing on one embedded-hypervisor host (libvirt's test driver on the demo node file) all stay kept.

Every ``vnuma`` process opens its own test-driver connection, restores the
host's kept domains into it, changes one domain and keeps that change
(:mod:`vnuma.services.hypervisors`). Eight ``vnuma apply`` and eight ``vnuma
vm stop`` of sixteen different VMs run at once as real processes, on SQLite
and on PostgreSQL; afterwards every applied domain is kept defined, every
stopped one kept stopped, and ``vnuma reconcile`` finds the host in agreement.
(When each process kept the whole host as it saw it, the last writer's view
won and most applied domains were "missing".)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from vnuma.inventory import open_inventory, upgrade
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.applying import apply_vm, render_options
from vnuma.services.hosts import add_host
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

RACERS = 8
EXIT_BUSY = 6


def _vnuma(url: str, *args: str, stderr: Path) -> subprocess.Popen[str]:
    with stderr.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "vnuma.cli", "--db", url, *args], stdout=subprocess.PIPE, stderr=err, text=True
        )


def _kept(url: str) -> dict[str, bool]:
    """The demo host's kept domains: name -> running (read with plain SQLAlchemy)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT d.name, d.running FROM embedded_domains d JOIN hosts h ON h.id = d.host_id "
                "WHERE h.name = 'lab'"
            ))
            return {str(name): bool(running) for name, running in rows}
    finally:
        engine.dispose()


def test_parallel_applies_and_stops_on_one_embedded_host_are_all_kept(url: str, tmp_path: Path) -> None:
    upgrade(url)
    settings = Settings(db_url=url)
    add_host(settings, "lab", None, None, demo=True)
    with open_inventory(url) as inv:
        inv.add_tenant(Tenant("t", Isolation.CORE))
    applied, stopped = [f"a{i}" for i in range(RACERS)], [f"s{i}" for i in range(RACERS)]
    for vm in applied + stopped:
        request = VmRequest(vm, "t", 2, 2 * KIB_PER_GIB, page_size_kib=PAGE_1G)
        assert place_vm(settings, request, Strategy.PACK, dry_run=False)[1].chosen is not None
    options = render_options(settings, None, None)
    for vm in stopped:
        apply_vm(settings, vm, options, None, start=True, dry_run=False)
    assert _kept(url) == dict.fromkeys(stopped, True)

    racers = {vm: ("apply", vm) for vm in applied} | {vm: ("vm", "stop", vm) for vm in stopped}
    procs = {vm: _vnuma(url, *args, stderr=tmp_path / f"{vm}.err") for vm, args in racers.items()}
    outputs = {vm: proc.communicate(timeout=600)[0] for vm, proc in procs.items()}
    busy = [vm for vm, proc in procs.items() if proc.returncode == EXIT_BUSY]
    for vm in busy:  # SQLite's 5 s busy timeout can run out on a loaded machine: the command says so
        assert "database is locked" in (tmp_path / f"{vm}.err").read_text()
        again = _vnuma(url, *racers[vm], stderr=tmp_path / f"{vm}.err")  # as its hint says: retry
        outputs[vm] = again.communicate(timeout=300)[0]
        procs[vm] = again
    print(f"\n{len(busy)} of {len(racers)} racing commands were refused as busy and run again")
    for vm, proc in procs.items():
        assert proc.returncode == 0, (vm, (tmp_path / f"{vm}.err").read_text())
    assert outputs == {
        **{vm: f"VM {vm}: defined\n" for vm in applied}, **{vm: f"VM {vm}: stopped\n" for vm in stopped}
    }

    assert _kept(url) == {**dict.fromkeys(applied, False), **dict.fromkeys(stopped, False)}
    check = _vnuma(url, "reconcile", stderr=tmp_path / "reconcile.err")
    out, _ = check.communicate(timeout=300)
    assert check.returncode == 0, out + (tmp_path / "reconcile.err").read_text()
    assert out == "host lab (test:///vnuma-demo): in agreement\n"
    with open_inventory(url) as inv:
        states = {p.vm: str(s) for p, s in inv.list_vms()}
    assert states == {**dict.fromkeys(applied, "defined"), **dict.fromkeys(stopped, "stopped")}
