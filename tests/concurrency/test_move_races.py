"""Two ``vnuma vm migrate`` racing for one destination: the loser changes nothing and blocks nothing.

Both VMs run on host h1 of the embedded hypervisor and move to the empty h2
with ``--cold``; the engine re-fits both on the very same pCPUs of h2. The
loser's journaled run never began a step (its claims did not move): it exits
9 naming the VM that won, its run closes itself (aborted), and the next move
is not held up (before, the run stayed "unfinished (failed)" and every later
``vm migrate`` exited 9 until someone ran ``rebalance --abort``). Real
processes, on SQLite and on PostgreSQL: once with the loser halted at a
failpoint between its plan and its journal while the winner moves, so the
order is certain, then unforced, both at once.
"""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.stopping import finish, resume, run, start, wait_stopped
from vnuma.inventory import open_inventory, upgrade
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.applying import apply_vm, render_options
from vnuma.services.hosts import add_host
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

VMS = ("m1", "m2")


@pytest.fixture
def fleet(url: str) -> str:
    """Demo hosts h1 and h2; VMs m1 and m2 of one shape running on h1."""
    upgrade(url)
    settings = Settings(db_url=url)
    for host in ("h1", "h2"):
        add_host(settings, host, None, None, demo=True)
    with open_inventory(url) as inv:
        inv.add_tenant(Tenant("t", Isolation.CORE))
    for vm in VMS:
        request = VmRequest(vm, "t", 4, 4 * KIB_PER_GIB, page_size_kib=PAGE_1G, host="h1")
        assert place_vm(settings, request, Strategy.PACK, dry_run=False)[1].chosen is not None
        apply_vm(settings, vm, render_options(settings, None, None), None, start=True, dry_run=False)
    return url


def _runs(url: str) -> list[tuple[int, str, bool]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, status, unfinished FROM rebalance_runs ORDER BY id"))
            return [(int(i), str(s), bool(u)) for i, s, u in rows]
    finally:
        engine.dispose()


def _hosts(url: str) -> dict[str, tuple[str, str]]:
    with open_inventory(url) as inv:
        return {p.vm: (p.host, str(state)) for p, state in inv.list_vms()}


def _migrate(vm: str, to: str = "h2") -> list[str]:
    return ["vm", "migrate", vm, "--to", to, "--cold", "--json"]


def test_the_loser_of_two_moves_closes_its_run_and_blocks_no_later_move(fleet: str) -> None:
    loser = start(fleet, _migrate("m2"), failpoint="run-planned:stop")
    wait_stopped(loser)  # its plan takes the same pCPUs of h2 as m1's will
    won = run(fleet, *_migrate("m1"))
    assert won.code == 0, won.stderr
    assert json.loads(won.stdout)["run"]["status"] == "done"

    lost = resume(loser)
    assert lost.code == 9, lost.stderr
    (line, hint) = lost.stderr.splitlines()
    assert re.fullmatch(
        r"error: rebalance run 2 step 1 \(m2\): host 'h2': pCPU\(s\) \S+ are already held by VM 'm1'", line
    ), line
    assert hint == ("hint: nothing was changed and run 2 is closed; plan again (the next plan starts from the "
                    "inventory as it is now)")
    assert _runs(fleet) == [(1, "done", False), (2, "aborted", False)]
    assert _hosts(fleet) == {"m1": ("h2", "running"), "m2": ("h1", "running")}
    nothing = run(fleet, "rebalance", "--resume")
    assert nothing.code == 3 and nothing.stderr.startswith("error: no unfinished rebalance run"), nothing.stderr
    agreed = run(fleet, "reconcile")
    assert agreed.code == 0, agreed.stdout + agreed.stderr

    again = run(fleet, *_migrate("m2"))  # the journal is free: planned again, around m1
    assert again.code == 0, again.stderr
    assert _hosts(fleet) == {"m1": ("h2", "running"), "m2": ("h2", "running")}
    assert run(fleet, "reconcile").code == 0


def test_two_moves_at_once_end_with_no_run_unfinished(fleet: str) -> None:
    """Unforced: each move either wins or is refused (exit 9) because the other's run is in flight or took
    its pCPUs; no run is left unfinished, and the refused one moves when run again."""
    for to in ("h2", "h1", "h2"):
        procs = {vm: start(fleet, _migrate(vm, to)) for vm in VMS}
        ended = {vm: finish(p) for vm, p in procs.items()}
        for vm, e in ended.items():
            other = next(v for v in VMS if v != vm)
            assert e.code in (0, 9), e.stderr
            if e.code == 9:
                assert re.search(rf"is unfinished \(running\)|already held by VM '{other}'", e.stderr), e.stderr
        assert all(not unfinished for _id, _status, unfinished in _runs(fleet)), _runs(fleet)
        for vm, e in ended.items():
            if e.code == 9:
                again = run(fleet, *_migrate(vm, to))
                assert again.code == 0, again.stderr
        assert _hosts(fleet) == {vm: (to, "running") for vm in VMS}
    assert run(fleet, "reconcile").code == 0
