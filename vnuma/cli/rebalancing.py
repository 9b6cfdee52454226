"""``vnuma rebalance``: print a plan of moves (plan only)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.progress import bar
from vnuma.documents import plan_doc, run_doc, verdict
from vnuma.placement.objectives import SEARCHED, Objective
from vnuma.topology import format_size_kib

if TYPE_CHECKING:
    from vnuma.placement.rebalance import Plan
    from vnuma.services.permits import Permits

ApplyOpt = Annotated[bool, typer.Option("--apply", help="Carry the plan out through libvirt (journaled).")]
YesOpt = Annotated[bool, typer.Option("--yes", help="Do not ask before --apply changes domains.")]
AllowRestartOpt = Annotated[
    bool, typer.Option("--allow-restart", help="Let --apply stop and start running VMs that cannot move live.")
]
AllowMigrateOpt = Annotated[
    bool, typer.Option("--allow-migrate", help="Let --apply live-migrate running VMs to another host.")
]
"""The options of every command that carries a plan out (rebalance, host drain)."""

RebalanceObjective = StrEnum("RebalanceObjective", [(o.name, o.value) for o in SEARCHED])  # type: ignore[misc]
"""The choices of ``--objective``: the objectives the planner searches."""


def rebalance(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option("--host", help="Only plan moves on this host.")] = None,
    objective: Annotated[
        RebalanceObjective, typer.Option("--objective", help="What the plan improves.")
    ] = RebalanceObjective.LOCALITY,  # type: ignore[attr-defined]
    make_room_for: Annotated[
        str | None,
        typer.Option(
            "--make-room-for",
            metavar="SHAPE",
            help='VM shape to open room for, e.g. "vcpus=32,memory=256GiB,gpus=2".',
        ),
    ] = None,
    max_moves: Annotated[int, typer.Option("--max-moves", help="Most moves in the plan.")] = 3,
    time_limit: Annotated[float, typer.Option("--time-limit", metavar="S", help="Seconds to search.")] = 10.0,
    solver: Annotated[
        str | None,
        typer.Option("--solver", help="search (written here) or cp-sat (OR-Tools: all moves at once); default: "
                     "cp-sat for locality and room, search for the others."),
    ] = None,
    as_json: output.JsonOpt = False,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    allow_restart: AllowRestartOpt = False,
    allow_migrate: AllowMigrateOpt = False,
    resume: Annotated[bool, typer.Option("--resume", help="Carry an interrupted or failed --apply on.")] = False,
    abort: Annotated[bool, typer.Option("--abort", help="Roll an interrupted or failed --apply back.")] = False,
) -> None:
    """Plan moves that improve locality, make room for a VM shape, spread tenants, defragment or spread measured
    memory bandwidth; --apply runs them.

    A move re-places one VM (new cells and pCPUs on its host, or another
    host); each move is an engine placement on the state the earlier moves
    leave, so every step is valid. --make-room-for implies --objective room.

    --objective bandwidth plans on the samples `vnuma stats --bandwidth`
    kept: it moves the heaviest VMs apart so that no L3 domain carries more
    than its share (the measured total over the L3 domains of the hosts
    with resctrl); the plan's value is the MB/s carried beyond the share,
    and each move's reason names the measured figure it answers. Without
    any sample it is refused (exit 4).

    JSON: {"objective", "before", "after", "optimal", "moves": [{"vm",
    "from": {"host", "cells"}, "to": {"host", "cells"}, "reason",
    "cost_kib"}], "solver", "gap"}; "optimal": no plan does better (the
    objective's lowest value, every shallower depth searched, or CP-SAT's
    answer proven), as the header line says once ("gap": null with the search).

    --solver cp-sat (objectives locality, room, fragmentation, spread-tenants;
    the default for locality and room, measured never worse there) chooses
    all the moves together with OR-Tools CP-SAT: each VM's
    candidates are the engine's own placements (stay, re-pin on its host,
    its best other hosts), capacities are the admission rule's counts, the
    goal comes first, then fewer moves, then less memory to migrate; the
    moves are then replayed through the engine in order, each admitted. The
    search runs first (half of --time-limit) and is the solver's first
    answer: when it does better, its plan comes back ("solver": "search");
    else "solver": "cp-sat" and "gap" (0.0: proven optimal for its model,
    else the distance to its best bound). No plan within --time-limit: exit
    5, nothing moved (room: the search's plan). For room the shape's cells
    on its best few hosts are candidates too, chosen with the moves that
    free them. bandwidth is not offered.

    --make-room-for says what it found: "already fits, nothing to do" (exit
    0), the moves after which the shape fits, or "no plan of at most N moves
    makes room" (exit 5; JSON is printed first, with "moves": []).

    --apply journals the plan in the inventory and runs it step by step
    (claims moved, then libvirt changed: live re-pin of running VMs where
    possible, redefinition of stopped ones); running VMs that would need a
    restart or a migration are refused unless --allow-restart or
    --allow-migrate is given. An interrupted or failed run is carried on by
    --resume or rolled back by --abort. With --apply/--resume/--abort, JSON
    adds "run": {"id", "status", "steps": [{"seq", "vm", "kind", "status",
    "error"}]}; a failed step exits with its error's code (8 for libvirt).

    Example: vnuma rebalance --objective locality --max-moves 4 --apply --yes

    Example: vnuma rebalance --objective fragmentation --solver cp-sat --time-limit 5 --json
    """
    if resume or abort:
        _finish_run(ctx, resume=resume, abort=abort, as_json=as_json, busy=apply)
        return
    from vnuma.services.rebalancing import parse_shape, plan_rebalance

    if (allow_restart or allow_migrate or yes) and not apply:
        raise typer.BadParameter("--yes, --allow-restart and --allow-migrate go with --apply")
    shape = parse_shape(make_room_for) if make_room_for is not None else None
    client = remote(ctx)
    if client:
        body = {"host": host, "objective": objective.value, "make_room_for": make_room_for,
                "max_moves": max_moves, "time_limit": time_limit, "solver": solver}
        carried = {"apply": True, "allow_restart": allow_restart, "allow_migrate": allow_migrate}
        doc = client.rebalance({**body, **carried} if apply and yes else body)
        moves = bool(doc["moves"])
        if apply and moves:
            if "run" not in doc:  # the plan alone, to show before the confirmation a service cannot ask for
                if not as_json:
                    print_plan(doc)
                confirm_apply(yes, len(doc["moves"]), ask=False)
            show_carried(doc, as_json)
            return
    else:
        goal = Objective.ROOM if shape is not None else Objective(objective.value)
        plan = plan_rebalance(
            settings(ctx), goal, host=host, max_moves=max_moves, make_room_for=shape,
            time_limit_s=time_limit, for_apply=apply, solver=solver,
        )
        doc = plan_doc(plan)
        moves = bool(plan.moves)
    if shape is not None and not moves:
        _no_room_moves(doc, max_moves, host, as_json)
        return
    if apply and moves:
        from vnuma.services.permits import granted

        may = granted(allow_restart, allow_migrate)
        carry_out(ctx, plan, doc, as_json, may, confirm=partial(confirm_apply, yes, len(plan.moves)))
        return
    if as_json:
        output.echo_json(doc)
        return
    print_plan(doc)


def _no_room_moves(doc: dict[str, Any], max_moves: int, host: str | None, as_json: bool) -> None:
    """--make-room-for without moves: the shape already fits (exit 0), or no plan makes room (exit 5)."""
    from vnuma.services.rebalancing import no_room

    if as_json:
        output.echo_json(doc)
    refusal = no_room(doc, max_moves, host)
    if refusal is not None:
        raise refusal
    if not as_json:
        output.echo_lines(["the shape already fits: nothing to do"])


def print_plan(doc: dict[str, Any]) -> None:
    """A plan as its objective line and a table of moves."""
    solver = doc.get("solver", "search")
    output.echo_lines([
        f"objective {doc['objective']}: {doc['before']} -> {doc['after']} (solver {solver}: "
        f"{verdict(doc['optimal'], solver, doc.get('gap'))})"
    ])
    if doc.get("left"):
        output.echo_table(None, ["STAYS", "WHY"], [(x["vm"], x["reason"]) for x in doc["left"]])
    if not doc["moves"]:
        output.echo_lines(["no moves"])
        return
    output.echo_table(
        None,
        ["#", "VM", "FROM", "TO", "MIGRATES", "REASON"],
        [
            (i, m["vm"], _where(m["from"]), _where(m["to"]), format_size_kib(m["cost_kib"]), m["reason"])
            for i, m in enumerate(doc["moves"], 1)
        ],
    )


def carry_out(
    ctx: typer.Context, plan: Plan, doc: dict[str, Any], as_json: bool, may: Permits, *,
    confirm: Callable[[], None] | None = None,
) -> None:
    """Print the plan, confirm (``confirm``: the command's --yes check, see :func:`confirm_apply`; None: the
    command itself is the confirmation), run it journaled with the permits ``may``
    (:func:`vnuma.services.rebalance_apply.apply_plan`), then print the run: the plan document with
    ``"run"`` as JSON, else one line per step on stderr and the run's status."""
    from vnuma.services.rebalance_apply import apply_plan

    if not as_json:
        print_plan(doc)
    if confirm is not None:
        confirm()
    with step_progress(as_json, len(plan.moves)) as progress:
        report = apply_plan(settings(ctx), plan, may, progress=progress)
    doc["run"] = run_doc(report)
    output.echo_notes(report.notes)
    if as_json:
        output.echo_json(doc)
    else:
        output.echo_lines([f"run {report.run_id}: {report.status}"])


def confirm_apply(yes: bool, moves: int, *, ask: bool = True) -> None:
    """Ask on a terminal; without one (or ``ask`` False: through --server, where the service carries the
    plan out as one request), --yes is required (exit 4 otherwise)."""
    import sys

    if yes:
        return
    if not ask or not sys.stdin.isatty():
        from vnuma.errors import InvalidInputError

        raise InvalidInputError("--apply changes libvirt domains; nothing was changed", hint="confirm with --yes")
    if not typer.confirm(f"apply {moves} move(s)?", err=True):
        raise typer.Exit(1)


@contextmanager
def step_progress(as_json: bool, total: int | None) -> Iterator[Callable[[Any, str], None] | None]:
    """The step reporter of a journaled run: one stderr line per step as it starts and finishes, and a
    progress bar over the steps while someone watches (:mod:`vnuma.cli.progress`); None under --json."""
    if as_json:
        yield None
        return
    with bar("applying", as_json=as_json) as reporter:
        reporter.start(total)

        def report(step: Any, status: str) -> None:
            reporter.note(f"step {step.seq} {step.vm} ({step.kind}): {status}")
            if status in ("done", "undone"):
                reporter.advance(step.vm)

        yield report


def show_carried(doc: dict[str, Any], as_json: bool) -> None:
    """A plan a service carried out (its document with ``"run"``), printed as :func:`carry_out` prints it
    here: the plan, each step's lines on stderr as they went, the run's status."""
    output.echo_notes(doc["run"].get("notes", ()))
    if as_json:
        output.echo_json(doc)
        return
    print_plan(doc)
    show_steps(doc["run"])
    output.echo_lines([f"run {doc['run']['id']}: {doc['run']['status']}"])


def show_steps(run: dict[str, Any]) -> None:
    """A finished run's steps as :func:`step_progress` reports them while they run (stderr)."""
    said = {"done": ("started", "done"), "undone": ("undoing", "undone"), "failed": ("started",)}
    for step in run["steps"]:
        for status in said.get(step["status"], ()):
            typer.echo(f"step {step['seq']} {step['vm']} ({step['kind']}): {status}", err=True)


def _finish_run(ctx: typer.Context, *, resume: bool, abort: bool, as_json: bool, busy: bool) -> None:
    if resume == abort or busy:
        raise typer.BadParameter("give one of --apply, --resume or --abort")
    client = remote(ctx)
    if client:
        doc = client.finish_run(resume)
        if as_json:
            output.echo_json(doc)
        else:
            output.echo_notes(doc["run"].get("notes", ()))
            show_steps(doc["run"])
            output.echo_lines([f"run {doc['run']['id']}: {doc['run']['status']}"])
        return
    from vnuma.services.rebalance_apply import abort as abort_run
    from vnuma.services.rebalance_apply import resume as resume_run

    act = resume_run if resume else abort_run
    with step_progress(as_json, None) as progress:
        report = act(settings(ctx), progress=progress)
    output.echo_notes(report.notes)
    if as_json:
        output.echo_json({"run": run_doc(report)})
    else:
        output.echo_lines([f"run {report.run_id}: {report.status}"])


def _where(w: dict[str, Any]) -> str:
    cells = w["cells"]
    return f"{w['host']} cell{'s' if len(cells) != 1 else ''} {','.join(map(str, cells))}"


