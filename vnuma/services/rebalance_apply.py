"""``vnuma rebalance --apply | --resume | --abort``: carry a plan out through libvirt, one journaled step at a time.

Every move gets a *kind* before anything changes, from where the VM's
domain is and what it is doing (libvirt is asked, not the inventory) and the
permits the run was given (:mod:`.permits`): see :mod:`.movekinds`.

A plan with a move that needs a permit not given (:mod:`.permits`) is refused
whole and nothing changes. Then the run is journaled (every step pending) and each
step runs as: one transaction moves the VM's claims to the new placement
and marks the step started; libvirt is changed; one transaction records
the VM's domain state and marks the step done. Each libvirt action is
idempotent, so ``--resume`` simply runs a started step again; ``--abort``
walks the started and done steps backwards (claims back first, then the
same kind of action towards the old placement). After a step completes,
the inventory and libvirt agree; a failed step leaves the run failed with
the error recorded, for ``--resume`` or ``--abort``, and so does a Ctrl-C
(error ``interrupted``). A run that stops before any of its steps began
(a step's claims refused: a racer took them first; a Ctrl-C) changed
nothing and closes itself, as aborted (:func:`vnuma.inventory.journal.stop_run`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from vnuma.errors import ConflictError, InvalidInputError, NotFoundError, VnumaError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.inventory import open_inventory
from vnuma.inventory.journal import NewStep, RunRecord, StepRecord, run_unfinished
from vnuma.inventory.repo import Inventory
from vnuma.inventory.schema import RunStatus, StepStatus, VmState
from vnuma.placement.model import Placement
from vnuma.placement.pins import emulator_pins, vcpu_pins
from vnuma.placement.rebalance import Plan
from vnuma.render.domain import render_domain
from vnuma.services import Settings, failpoints
from vnuma.services.applying import hypervisor_of, with_identity
from vnuma.services.cleaning import clean_left
from vnuma.services.hypervisors import is_embedded, require_libvirt, same_hypervisor
from vnuma.services.mdevs import create_mdevs, remove_mdevs
from vnuma.services.movekinds import CLAIMS, LIVE, MIGRATE, MOVE, MOVE_RESTART, REDEFINE, RESTART, move_kind, observed
from vnuma.services.permits import Permits
from vnuma.services.renderings import rendering_of
from vnuma.topology import Host

INTERRUPTED = "interrupted"
"""The error a step records when Ctrl-C stopped its run there."""
_RESUME_HINT = "fix the cause, then `vnuma rebalance --resume` (retry) or `vnuma rebalance --abort` (roll back)"

Progress = Callable[[StepRecord, str], None]


@dataclass(frozen=True, slots=True)
class RunReport:
    """Where a run ended: its id, status, each step's status, and notes on what the steps could not do
    (mediated devices the driver cannot create or remove: :mod:`vnuma.services.mdevs`)."""

    run_id: int
    status: RunStatus
    steps: tuple[StepRecord, ...]
    notes: tuple[str, ...] = ()


@dataclass
class _Conns:
    """libvirt connections by host, opened on first use and closed together."""

    inventory: Inventory
    hosts: dict[str, Host]
    open: dict[str, Hypervisor] = field(default_factory=dict)

    def __call__(self, host: str) -> Hypervisor:
        if host not in self.open:
            self.open[host] = hypervisor_of(self.inventory, self.hosts[host])
        return self.open[host]

    def close(self) -> None:
        for hv in self.open.values():
            hv.close()


@contextmanager
def _connections(inventory: Inventory) -> Iterator[_Conns]:
    conns = _Conns(inventory, {h.name: h for h in inventory.list_hosts()})
    try:
        yield conns
    finally:
        conns.close()


def _new_steps(inventory: Inventory, conns: _Conns, plan: Plan, may: Permits) -> list[NewStep]:
    current: dict[str, Placement] = {}
    states: dict[str, VmState] = {}
    steps: list[NewStep] = []
    for move in plan.moves:
        if move.vm not in current:
            placement, recorded = inventory.get_vm(move.vm)
            host = conns.hosts[placement.host]
            domain = conns(host.name).domain_state(move.vm) if host.uri else DomainState.MISSING
            if domain is DomainState.MISSING and recorded is not VmState.PLACED:
                raise ConflictError(
                    f"VM {move.vm!r} is {recorded} in the inventory but {host.name} has no such domain",
                    hint=f"bring the inventory and libvirt into agreement first: vnuma reconcile {host.name}",
                )
            current[move.vm] = placement
            states[move.vm] = VmState.PLACED if domain is DomainState.MISSING else observed(recorded, domain)
        before = current[move.vm]
        options, _template = rendering_of(inventory.get_rendering(move.vm))
        kind = move_kind(move.vm, before, move.placement, states[move.vm], options.memnode_mode, may,
                         conns.hosts[move.to_host].base_page_kib)
        if kind is not CLAIMS and not conns.hosts[move.to_host].uri:
            raise InvalidInputError(f"host {move.to_host!r} has no libvirt URI to define VM {move.vm!r} on")
        steps.append(NewStep(move.vm, kind, move.reason, before, move.placement, states[move.vm]))
        current[move.vm] = move.placement
    return steps


class _Executor:
    """Runs steps' libvirt actions towards a placement (every action is idempotent), then the cleaning command
    for the devices the step's VM left (:func:`vnuma.services.cleaning.clean_left`, its outcome a note)."""

    def __init__(self, settings: Settings, inventory: Inventory, conns: _Conns) -> None:
        self.settings = settings
        self.inventory = inventory
        self.conns = conns
        self.notes: list[str] = []

    def xml(self, vm: str, old: Placement, new: Placement) -> str:
        """The domain XML of ``new``, keeping the UUID of the domain where it is (the new host, else the old)."""
        options, template = rendering_of(self.inventory.get_rendering(vm))
        holders = (self.conns(new.host),) if new.host == old.host else (self.conns(new.host), self.conns(old.host))
        return render_domain(
            self.conns.hosts[new.host], new, options=with_identity(options, vm, *holders), template=template,
            templates_dir=self.settings.templates_dir,
        )

    def towards(self, kind: str, vm: str, old: Placement, new: Placement) -> None:
        """Make libvirt hold ``vm`` as ``new`` (coming from ``old``) the way ``kind`` says."""
        if kind == CLAIMS:
            return
        xml = self.xml(vm, old, new)
        dst = self.conns(new.host)
        require_libvirt(dst, xml, new.host, vm)
        self._libvirt(kind, vm, old, new, xml, dst)
        if old.partitions and self._separate(old.host, new.host):
            self.notes += remove_mdevs(self.conns(old.host), old)

    def cleaned(self, old: Placement, new: Placement) -> None:
        """Once a step is done (the VM off ``old``), clean the devices it left: their notes join the run's."""
        self.notes += clean_left(self.settings, old, new)

    def _define(self, dst: Hypervisor, xml: str, old: Placement, new: Placement) -> None:
        """Define ``new``'s domain on ``dst``, its mediated devices made there first when they change (the
        domain is not running on ``dst`` here, or its partitions did not change)."""
        if new.partitions and (new.partitions != old.partitions or self._separate(old.host, new.host)):
            self.notes += create_mdevs(dst, new)
        dst.define(xml)

    def _libvirt(self, kind: str, vm: str, old: Placement, new: Placement, xml: str, dst: Hypervisor) -> None:
        if kind == REDEFINE:
            self._define(dst, xml, old, new)
        elif kind == LIVE:
            dst.pin_live(vm, vcpu_pins(new), emulator_pins(new))
            if set(old.host_cells) != set(new.host_cells):
                dst.set_memory_nodeset(vm, frozenset(new.host_cells))
            self._define(dst, xml, old, new)
        elif kind == RESTART:
            dst.stop(vm)
            self._define(dst, xml, old, new)
            dst.start(vm)
        elif kind in (MOVE, MOVE_RESTART) or (kind == MIGRATE and self._embedded(old.host, new.host)):
            # libvirt's test driver migrates nothing: between embedded hosts a migration is a stop and start.
            if self._separate(old.host, new.host):
                # Defined there before it goes from here: at every step the domain exists somewhere.
                src = self.conns(old.host)
                self._define(dst, xml, old, new)
                failpoints.reached("defined-there")
                if src.domain_state(vm) is not DomainState.MISSING:
                    src.undefine(vm)  # stopped first when it runs
                if kind != MOVE and dst.domain_state(vm) is not DomainState.RUNNING:
                    dst.start(vm)
            else:  # two host names, one libvirt: a restart applies the new pins
                if dst.domain_state(vm) is DomainState.RUNNING:
                    dst.stop(vm)
                self._define(dst, xml, old, new)
                if kind != MOVE:
                    dst.start(vm)
        elif kind == MIGRATE:
            # Already there (a resumed step), or both host names reach one libvirt: only redefine.
            if not self._separate(old.host, new.host) or dst.domain_state(vm) is DomainState.RUNNING:
                self._define(dst, xml, old, new)
            else:
                self.conns(old.host).migrate(vm, self.conns.hosts[new.host].uri or "", xml)
        else:  # pragma: no cover - kinds come from _kind
            raise AssertionError(kind)

    def _embedded(self, a: str, b: str) -> bool:
        """Both hosts on the embedded hypervisor (see :mod:`vnuma.services.hypervisors`)."""
        return all(is_embedded(self.conns.hosts[h].uri or "") for h in (a, b))

    def _separate(self, a: str, b: str) -> bool:
        """False when two host names reach the same libvirt (then there is nothing to undefine)."""
        return not same_hypervisor(a, self.conns.hosts[a].uri, b, self.conns.hosts[b].uri)


def _annotated(err: VnumaError, context: str, hint: str) -> VnumaError:
    """The same error (same class and exit code) with the run and step in front and a new hint."""
    new = copy.copy(err)
    new.args = (f"{context}: {err}",)
    new.hint = hint
    return new


def apply_plan(
    settings: Settings, plan: Plan, may: Permits, *, progress: Progress | None = None,
    origin: Mapping[str, Any] | None = None,
) -> RunReport:
    """Journal ``plan`` as a run and carry it out; ``may``: what it may do to running VMs (a move needing
    more is refused, with the carrying command's way to allow it as the hint); ``origin``: kept in the run's
    options, in the same transaction as the run (``{"proposal": ID}``: the watch's proposal it carries out).

    Raises:
        ConflictError: another run is unfinished, a move needs a permission
            not given, or a step's claims no longer fit (the run closed as aborted when no step had begun,
            else left failed).
        HypervisorError: libvirt failed a step (run left failed, see --resume/--abort).
        RenderError: a template cannot render a new placement (nothing changed).
    """
    if not plan.moves:
        raise InvalidInputError("the plan has no moves: nothing to apply")
    with open_inventory(settings.db_url) as inventory, _connections(inventory) as conns:
        run = inventory.unfinished_run()
        if run is not None:
            raise run_unfinished(run.id, run.status)
        steps = _new_steps(inventory, conns, plan, may)
        executor = _Executor(settings, inventory, conns)
        for s in steps:  # a template or placement that cannot render stops the run before it starts
            if s.kind != CLAIMS:
                executor.xml(s.vm, s.before, s.after)
        options = {"allow_restart": may.restart, "allow_migrate": may.migrate, **(origin or {})}
        failpoints.reached("run-planned")
        run_id = inventory.open_run(str(plan.objective), options, steps)
        with _stopped_by_interrupt(inventory, run_id, 1):
            failpoints.reached("run-opened")
        return _forward(inventory, executor, run_id, progress)


def _forward(inventory: Inventory, executor: _Executor, run_id: int, progress: Progress | None) -> RunReport:
    run = inventory.get_run(run_id)
    for step in run.steps:
        if step.status is not StepStatus.DONE:
            with _stopped_by_interrupt(inventory, run_id, step.seq):
                _step_forward(inventory, executor, run_id, step, progress)
    inventory.close_run(run_id, RunStatus.DONE)
    run = inventory.get_run(run_id)
    return RunReport(run.id, run.status, run.steps, tuple(executor.notes))


def _step_forward(
    inventory: Inventory, executor: _Executor, run_id: int, step: StepRecord, progress: Progress | None
) -> None:
    if step.status is StepStatus.PENDING:
        try:
            inventory.start_step(run_id, step.seq)
        except VnumaError as err:
            raise _refused(inventory, run_id, step, err) from err
        failpoints.reached("step-started")
    try:
        if progress is not None:
            progress(step, "started")
        executor.towards(step.kind, step.vm, step.before, step.after)
    except VnumaError as err:
        inventory.stop_run(run_id, step.seq, str(err))
        raise _annotated(err, f"rebalance run {run_id} step {step.seq} ({step.vm})", _RESUME_HINT) from err
    failpoints.reached("libvirt-done")
    # Every kind leaves the domain as it found it: running stays running, defined stays defined.
    inventory.finish_step(run_id, step.seq, step.before_state)
    executor.cleaned(step.before, step.after)
    if progress is not None:
        progress(step, "done")


@contextmanager
def _stopped_by_interrupt(inventory: Inventory, run_id: int, seq: int) -> Iterator[None]:
    """A Ctrl-C (KeyboardInterrupt) inside stops the run at step ``seq`` (:func:`.journal.stop_run`: closed as
    aborted when none of its steps began, else failed for --resume or --abort), then goes on up."""
    try:
        yield
    except KeyboardInterrupt:
        inventory.stop_run(run_id, seq, INTERRUPTED)
        raise


def _refused(inventory: Inventory, run_id: int, step: StepRecord, err: VnumaError) -> VnumaError:
    """The error of a step whose claims could not move (admission refused them: a racer took them first, or
    the VM changed since the plan): it changed nothing. A run none of whose steps began closes itself
    (aborted) and says so; else it stays failed for --resume or --abort (:func:`.journal.stop_run`)."""
    status = inventory.stop_run(run_id, step.seq, str(err))
    context = f"rebalance run {run_id} step {step.seq} ({step.vm})"
    if status is RunStatus.ABORTED:
        return _annotated(err, context, f"nothing was changed and run {run_id} is closed; plan again (the next "
                          "plan starts from the inventory as it is now)")
    return _annotated(err, context, _RESUME_HINT)


def _unfinished(inventory: Inventory) -> RunRecord:
    run = inventory.unfinished_run()
    if run is None:
        raise NotFoundError("no unfinished rebalance run", hint="`vnuma rebalance --apply` starts one")
    return run


def resume(settings: Settings, progress: Progress | None = None) -> RunReport:
    """Carry the unfinished run on from its first step not done.

    Raises:
        NotFoundError: no unfinished run.
        ConflictError: the run is being rolled back (use --abort), or claims conflict.
        HypervisorError: libvirt failed a step again.
    """
    with open_inventory(settings.db_url) as inventory, _connections(inventory) as conns:
        run = _unfinished(inventory)
        if any(s.status in (StepStatus.UNDOING, StepStatus.UNDONE) for s in run.steps):
            raise ConflictError(
                f"rebalance run {run.id} is being rolled back", hint="finish it with `vnuma rebalance --abort`"
            )
        inventory.resume_run(run.id)
        return _forward(inventory, _Executor(settings, inventory, conns), run.id, progress)


def abort(settings: Settings, progress: Progress | None = None) -> RunReport:
    """Undo the unfinished run's started and done steps, last first; pending steps are dropped.

    Raises:
        NotFoundError: no unfinished run.
        ConflictError: a VM's old resources were taken meanwhile.
        HypervisorError: libvirt failed to undo a step (run stays failed; --abort again).
    """
    with open_inventory(settings.db_url) as inventory, _connections(inventory) as conns:
        run = _unfinished(inventory)
        executor = _Executor(settings, inventory, conns)
        for step in reversed(run.steps):
            if step.status in (StepStatus.PENDING, StepStatus.UNDONE):
                continue
            try:
                if step.status is not StepStatus.UNDOING:
                    inventory.begin_undo(run.id, step.seq)
                if progress is not None:
                    progress(step, "undoing")
                executor.towards(step.kind, step.vm, step.after, step.before)
            except VnumaError as err:
                inventory.stop_run(run.id, step.seq, f"undo: {err}")
                context = f"rebalance run {run.id}: undoing step {step.seq} ({step.vm})"
                raise _annotated(err, context, "fix the cause, then `vnuma rebalance --abort` again") from err
            inventory.finish_undo(run.id, step.seq)
            executor.cleaned(step.after, step.before)
            if progress is not None:
                progress(step, "undone")
        inventory.close_run(run.id, RunStatus.ABORTED)
        done = inventory.get_run(run.id)
        return RunReport(done.id, done.status, done.steps, tuple(executor.notes))

