"""The rebalance journal: a run's moves, recorded before and after each one runs.

Functions take an open ``Session`` inside the caller's transaction. A step
moves the VM's claims when it starts (``start_step``, the same transaction
that marks it started), so the inventory holds the destination while
libvirt is being changed and nobody else can take it; ``finish_step``
records the VM's new domain state. Undoing walks the same way back
(``begin_undo`` moves the claims back, ``finish_undo``). An interrupted
run is found again by :func:`unfinished_run`. A run that stops before any
of its steps began changed nothing (:func:`stop_run`): it closes itself, as
aborted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import ConflictError, InventoryError, NotFoundError
from vnuma.inventory import placing
from vnuma.inventory.executor import AlchemyExecutor
from vnuma.inventory.models import RebalanceRun, RebalanceStep, VmRow
from vnuma.inventory.schema import RunStatus, StepStatus, VmState
from vnuma.placement.model import Placement

_OPEN_HINT = "finish it with `vnuma rebalance --resume` or roll it back with `vnuma rebalance --abort`"


def run_unfinished(run_id: int, status: RunStatus) -> ConflictError:
    """The refusal of a new run (or of a plan to apply) while run ``run_id`` is unfinished: one at a time. A
    run still ``running`` may be another command's at work right now (or one that was killed)."""
    hint = _OPEN_HINT
    if status is RunStatus.RUNNING:
        hint = (f"another vnuma command may be carrying it out right now: try again when it is done; if that "
                f"command was killed, {_OPEN_HINT}")
    return ConflictError(f"rebalance run {run_id} is unfinished ({status})", hint=hint)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One journaled move: ``kind`` is how libvirt is changed (see services.rebalance_apply)."""

    seq: int
    vm: str
    kind: str
    status: StepStatus
    reason: str
    before: Placement
    after: Placement
    before_state: VmState
    error: str | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A rebalance run and its steps in order."""

    id: int
    status: RunStatus
    objective: str
    options: dict[str, Any]
    steps: tuple[StepRecord, ...]


@dataclass(frozen=True, slots=True)
class NewStep:
    """A move to journal when a run opens."""

    vm: str
    kind: str
    reason: str
    before: Placement
    after: Placement
    before_state: VmState


def _doc(p: Placement) -> str:
    return json.dumps(placement_to_dict(p), separators=(",", ":"))


def _placement(run_id: int, seq: int, doc: str) -> Placement:
    try:
        return placement_from_dict(json.loads(doc))
    except (ValueError, TypeError) as err:
        raise InventoryError(f"inventory: rebalance run {run_id} step {seq} is unreadable: {err}") from err


def _unfinished_row(session: Session) -> RebalanceRun | None:
    return session.scalars(select(RebalanceRun).where(RebalanceRun.unfinished.is_(True))).one_or_none()


def open_run(session: Session, objective: str, options: dict[str, Any], steps: Sequence[NewStep]) -> int:
    """Journal a new run with every step pending; its id.

    Raises:
        ConflictError: another run is unfinished (only one at a time).
    """
    current = _unfinished_row(session)
    if current is not None:
        raise run_unfinished(current.id, RunStatus(current.status))
    run = RebalanceRun(
        status=RunStatus.RUNNING.value, unfinished=True, objective=objective,
        options=json.dumps(options, sort_keys=True),
    )
    try:
        with session.begin_nested():  # another command may open its run between the check above and here
            session.add(run)
            session.flush()
    except IntegrityError:
        winner = _unfinished_row(session)
        if winner is None:
            raise ConflictError("another rebalance run was opened at the same moment",
                                hint="run the command again") from None
        raise run_unfinished(winner.id, RunStatus(winner.status)) from None
    session.add_all(
        RebalanceStep(
            run_id=run.id, seq=i, vm=s.vm, kind=s.kind, status=StepStatus.PENDING.value, reason=s.reason,
            before=_doc(s.before), after=_doc(s.after), before_state=s.before_state.value,
        )
        for i, s in enumerate(steps, 1)
    )
    session.flush()
    return run.id


def unfinished_run(session: Session) -> RunRecord | None:
    """The run that is running or failed, None when every run finished."""
    row = _unfinished_row(session)
    return None if row is None else _record(session, row)


def get_run(session: Session, run_id: int) -> RunRecord:
    """One run by id (NotFoundError if unknown)."""
    row = session.get(RebalanceRun, run_id)
    if row is None:
        raise NotFoundError(f"no rebalance run {run_id}")
    return _record(session, row)


def _record(session: Session, row: RebalanceRun) -> RunRecord:
    steps = session.scalars(
        select(RebalanceStep).where(RebalanceStep.run_id == row.id).order_by(RebalanceStep.seq)
    ).all()
    return RunRecord(
        row.id, RunStatus(row.status), row.objective, json.loads(row.options),
        tuple(
            StepRecord(
                s.seq, s.vm, s.kind, StepStatus(s.status), s.reason, _placement(row.id, s.seq, s.before),
                _placement(row.id, s.seq, s.after), VmState(s.before_state), s.error,
            )
            for s in steps
        ),
    )


def _step_row(session: Session, run_id: int, seq: int) -> RebalanceStep:
    row = session.scalars(
        select(RebalanceStep).where(RebalanceStep.run_id == run_id, RebalanceStep.seq == seq)
    ).one_or_none()
    if row is None:
        raise NotFoundError(f"rebalance run {run_id} has no step {seq}")
    return row


def _set_step(session: Session, run_id: int, seq: int, status: StepStatus, error: str | None = None) -> None:
    session.execute(
        update(RebalanceStep)
        .where(RebalanceStep.run_id == run_id, RebalanceStep.seq == seq)
        .values(status=status.value, error=error)
    )


def _set_vm_state(session: Session, name: str, state: VmState) -> None:
    session.execute(update(VmRow).where(VmRow.name == name).values(state=state.value))


def start_step(session: Session, run_id: int, seq: int) -> None:
    """Move the step's VM's claims to its new placement and mark the step started.

    Raises:
        ConflictError: the VM changed since the plan, or the destination is taken.
    """
    row = _step_row(session, run_id, seq)
    before, after = _placement(run_id, seq, row.before), _placement(run_id, seq, row.after)
    arriving = _arriving(session, run_id, row.vm, after, lambda s: s.after)
    placing.move(AlchemyExecutor(session.connection()), row.vm, before, after, arriving)
    _set_step(session, run_id, seq, StepStatus.STARTED)


def _arriving(
    session: Session, run_id: int, vm: str, target: Placement, end: Callable[[StepRecord], Placement]
) -> frozenset[str]:
    """The other VMs of ``target``'s replica group that run ``run_id`` takes to ``target``'s host as well (at
    the ``end`` of their steps: ``after`` going forward, ``before`` when undone): a drained affine group
    moves one step per VM, and each step is judged with the group as the run leaves it."""
    if target.group is None:
        return frozenset()
    steps = get_run(session, run_id).steps
    return frozenset(
        s.vm for s in steps if s.vm != vm and end(s).group == target.group and end(s).host == target.host
    )


def finish_step(session: Session, run_id: int, seq: int, state: VmState) -> None:
    """libvirt now matches the new placement: record the VM's domain state, mark the step done."""
    row = _step_row(session, run_id, seq)
    _set_vm_state(session, row.vm, state)
    _set_step(session, run_id, seq, StepStatus.DONE)


def begin_undo(session: Session, run_id: int, seq: int) -> None:
    """Move a started or done step's VM's claims back to where they were; mark it undoing."""
    row = _step_row(session, run_id, seq)
    before, after = _placement(run_id, seq, row.before), _placement(run_id, seq, row.after)
    arriving = _arriving(session, run_id, row.vm, before, lambda s: s.before)
    placing.move(AlchemyExecutor(session.connection()), row.vm, after, before, arriving, returning=True)
    _set_step(session, run_id, seq, StepStatus.UNDOING)


def finish_undo(session: Session, run_id: int, seq: int) -> None:
    """libvirt is back as before the step: restore the VM's recorded state, mark the step undone."""
    row = _step_row(session, run_id, seq)
    _set_vm_state(session, row.vm, VmState(row.before_state))
    _set_step(session, run_id, seq, StepStatus.UNDONE)


def stop_run(session: Session, run_id: int, seq: int, error: str) -> RunStatus:
    """The run stopped at step ``seq`` with ``error`` (libvirt failed it, its claims could not move, an
    interrupt): record the error on the step; the run's new status.

    A run none of whose steps began (each still pending: no claim moved, libvirt untouched) changed nothing:
    it is closed as aborted (nothing to undo), so the next run is not held up. Any other run stays failed
    (unfinished) for --resume or --abort: the state between its steps can hold only as the run leaves it (an
    affine group half moved).
    """
    begun = session.scalars(
        select(RebalanceStep.seq)
        .where(RebalanceStep.run_id == run_id, RebalanceStep.status != StepStatus.PENDING.value)
    ).first()
    status = RunStatus.FAILED if begun is not None else RunStatus.ABORTED
    session.execute(
        update(RebalanceStep).where(RebalanceStep.run_id == run_id, RebalanceStep.seq == seq).values(error=error)
    )
    session.execute(
        update(RebalanceRun).where(RebalanceRun.id == run_id)
        .values(status=status.value, unfinished=True if status is RunStatus.FAILED else None)
    )
    return status


def resume_run(session: Session, run_id: int) -> None:
    """Mark a failed run running again."""
    session.execute(update(RebalanceRun).where(RebalanceRun.id == run_id).values(status=RunStatus.RUNNING.value))


def close_run(session: Session, run_id: int, status: RunStatus) -> None:
    """Finish a run as done or aborted (it stops being the unfinished run)."""
    session.execute(
        update(RebalanceRun).where(RebalanceRun.id == run_id).values(status=status.value, unfinished=None)
    )
