"""A journaled step whose claims cannot move changed nothing: what becomes of its run.

A racer takes the very pCPUs a step moves a VM to, after the plan was made.
When no step of the run had begun, the run closes itself as aborted (the
step's error recorded) and the next run is not held up. When an earlier step
is done, the run stays failed for ``--resume`` or ``--abort``: the state
between two steps is only valid as the run leaves it (an affine group half
moved), so it is not closed there. Claims-only moves (the VMs are placed, not
defined), in one process, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.racing import make_fleet
from vnuma.errors import ConflictError
from vnuma.inventory import open_inventory
from vnuma.placement.model import Placement, VmRequest
from vnuma.placement.objectives import Objective, Strategy
from vnuma.placement.rebalance import Plan
from vnuma.placement.rebalance.base import make_move
from vnuma.services import Settings
from vnuma.services.permits import granted
from vnuma.services.placing import place_vm
from vnuma.services.rebalance_apply import abort, apply_plan
from vnuma.topology import KIB_PER_GIB, PAGE_1G


def _placed(settings: Settings, names: tuple[str, ...]) -> list[Placement]:
    placed = []
    for name in names:
        request = VmRequest(name, "acme", 2, 2 * KIB_PER_GIB, host="host-0", page_size_kib=PAGE_1G)
        chosen = place_vm(settings, request, Strategy.PACK, dry_run=False)[1].chosen
        assert chosen is not None
        placed.append(chosen)
    return placed


def _plan(placements: list[Placement]) -> Plan:
    """Each VM to host-1 at the same pCPUs it holds on host-0 (the fleet's hosts are alike)."""
    moves = tuple(make_move(p, replace(p, host="host-1"), "to host-1") for p in placements)
    return Plan(Objective.DRAIN, len(moves), 0, True, moves)


def _journal(url: str) -> list[tuple[str, bool, list[str]]]:
    """Each run's status, whether it is unfinished, and its steps' statuses (read with plain SQLAlchemy)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            runs = conn.execute(text("SELECT id, status, unfinished FROM rebalance_runs ORDER BY id")).all()
            steps = text("SELECT status FROM rebalance_steps WHERE run_id = :run ORDER BY seq")
            return [
                (str(status), bool(unfinished), [str(s) for (s,) in conn.execute(steps, {"run": run})])
                for run, status, unfinished in runs
            ]
    finally:
        engine.dispose()


def _take(url: str, target: Placement) -> None:
    """A racer claims ``target``'s very pCPUs and pages, as another VM."""
    with open_inventory(url) as inv:
        inv.claim(replace(target, vm="racer"))


def test_a_run_whose_first_step_is_refused_closes_itself(url: str) -> None:
    make_fleet(url, hosts=2)
    settings = Settings(db_url=url)
    plan = _plan(_placed(settings, ("a", "b")))
    _take(url, plan.moves[0].placement)
    with pytest.raises(ConflictError, match=r"^rebalance run 1 step 1 \(a\): .*already held by VM 'racer'") as err:
        apply_plan(settings, plan, granted(False, False))
    assert err.value.hint is not None and "nothing was changed and run 1 is closed" in err.value.hint
    assert _journal(url) == [("aborted", False, ["pending", "pending"])]
    with open_inventory(url) as inv:
        assert inv.get_run(1).steps[0].error is not None
        assert {p.vm: p.host for p, _s in inv.list_vms()} == {"a": "host-0", "b": "host-0", "racer": "host-1"}
        inv.release("racer")
    assert str(apply_plan(settings, plan, granted(False, False)).status) == "done"  # nothing held the journal up


def test_a_run_refused_after_a_done_step_stays_failed_for_resume_or_abort(url: str) -> None:
    make_fleet(url, hosts=2)
    settings = Settings(db_url=url)
    plan = _plan(_placed(settings, ("a", "b")))

    def racer(step: object, status: str) -> None:
        if status == "done":
            _take(url, plan.moves[1].placement)

    with pytest.raises(ConflictError, match=r"^rebalance run 1 step 2 \(b\): ") as err:
        apply_plan(settings, plan, granted(False, False), progress=racer)
    assert err.value.hint is not None and "--resume" in err.value.hint and "--abort" in err.value.hint
    assert _journal(url) == [("failed", True, ["done", "pending"])]
    assert str(abort(settings).status) == "aborted"
    with open_inventory(url) as inv:
        assert {p.vm: p.host for p, _s in inv.list_vms()} == {"a": "host-0", "b": "host-0", "racer": "host-1"}
