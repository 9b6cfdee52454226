"""``vnuma place`` (``vm list``/``show``: :mod:`.vmview`), and the ``vnuma vm`` group."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from vnuma.cli import config, output, remote, settings
from vnuma.cli.asking import request_options
from vnuma.cli.options import StrategyOpt, strategy_of
from vnuma.documents import plan_doc
from vnuma.placement.model import (
    VmRequest,
)
from vnuma.placement.result import PlacementResult

vm_app = typer.Typer(no_args_is_help=True, add_completion=False)


@request_options
def place(
    ctx: typer.Context,
    asked: dict[str, Any],
    strategy: StrategyOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide, but claim nothing.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show every host's rejection and score.")] = False,
    as_json: output.JsonOpt = False,
    rebalance: Annotated[
        bool, typer.Option("--rebalance", help="When nothing fits, show moves after which the VM would fit.")
    ] = False,
    max_moves: Annotated[int, typer.Option("--max-moves", help="Most moves for --rebalance.")] = 3,
    apply: Annotated[
        bool, typer.Option("--apply", help="With --rebalance: carry the moves out, then place the VM.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask before --apply changes domains.")] = False,
    allow_restart: Annotated[bool, typer.Option("--allow-restart", help="As for `vnuma rebalance`.")] = False,
    allow_migrate: Annotated[bool, typer.Option("--allow-migrate", help="As for `vnuma rebalance`.")] = False,
) -> None:
    """Place a tenant's VM: host, cells, pCPUs, hugepages and GPUs; claim them.

    The options are explained in the manual (docs/place.md). The VM keeps
    them as asked ("request" in its JSON) and every later move asks them
    again. A VM no host takes is exit 5 with one line: the causes with how
    many hosts refused for each, and the host that came closest. Each --or
    is an alternative, taken only when none before it fits on any host. With
    --rebalance such a VM gets a plan of at most --max-moves moves after
    which it fits (exit 5), carried out and the VM placed with --apply.

    Example: vnuma place tenant-a --gpus 2 --group pair-1 --affinity host

    Example: vnuma place tenant-a --vcpus 4 --memory 8GiB --mig 3g.40gb:2

    Example: vnuma place tenant-a --gpus 2 --or mig=3g.40gb:2 --or gpus=1
    """
    from vnuma.services.placing import place_vm
    from vnuma.services.requests import place_request

    if (apply or yes or allow_restart or allow_migrate) and not rebalance:
        raise typer.BadParameter("--apply, --yes, --allow-restart and --allow-migrate go with --rebalance")
    if apply and dry_run:
        raise typer.BadParameter("--apply and --dry-run contradict each other")
    request = place_request(asked, page_size_default=config(ctx)["page_size"])
    client = remote(ctx)
    if client:
        if rebalance:
            raise typer.BadParameter("--rebalance runs where the inventory is, not through --server")
        body = {**asked, "strategy": strategy.value if strategy else None, "dry_run": dry_run, "explain": explain}
        placed_name, result = client.place(body)
        request = replace(request, name=placed_name)
    else:
        request, result = place_vm(settings(ctx), request, strategy_of(ctx, strategy), dry_run=dry_run,
                                   explain=explain)
    moved: dict[str, Any] | None = None
    if result.chosen is None and rebalance:
        moved = _make_room(ctx, request, max_moves, apply, yes, allow_restart, allow_migrate, as_json)
        if "run" in moved:
            request, result = place_vm(settings(ctx), request, strategy_of(ctx, strategy), dry_run=False)
    _print_placed(request, result, dry_run, explain, as_json, moved)


def _print_placed(
    request: VmRequest, result: PlacementResult, dry_run: bool, explain: bool, as_json: bool,
    moved: dict[str, Any] | None,
) -> None:
    """``place``'s answer: the placement (or the refusal, exit 5), with --explain and --rebalance's parts."""
    from vnuma.services.placing import require_chosen

    if result.chosen is None and as_json:
        from vnuma.documents import no_fit_doc

        output.echo_json({**no_fit_doc(request, result), **({"rebalance": moved} if moved is not None else {})})
    if explain and not as_json:
        _print_explain(result)
    chosen = require_chosen(request, result)
    if as_json:
        from vnuma.codec import placement_to_dict
        from vnuma.documents import explain_doc

        output.echo_json({
            **placement_to_dict(chosen),
            **({"explain": explain_doc(result)} if explain else {}),
            **({"rebalance": moved} if moved is not None else {}),
        })
    else:
        verb = "would place" if dry_run else "placed"
        from vnuma.cli.placementtable import print_placement

        print_placement(chosen, f"{verb} VM {chosen.vm} (tenant {chosen.tenant}) on host {chosen.host}")


def _make_room(
    ctx: typer.Context, request: VmRequest, max_moves: int, apply: bool, yes: bool,
    allow_restart: bool, allow_migrate: bool, as_json: bool,
) -> dict[str, Any]:
    """The room plan for a VM that fits nowhere, applied with --apply; without a plan, why none was found
    (``"found": false`` and the ``"reason"``). With ``--host`` the plan moves VMs on that host only, and says so."""
    from vnuma.cli.rebalancing import confirm_apply, print_plan, step_progress
    from vnuma.documents import run_doc
    from vnuma.services.rebalancing import plan_room_for, room_words

    plan = plan_room_for(settings(ctx), request, max_moves=max_moves, for_apply=apply)
    doc = plan_doc(plan)
    doc["host"] = request.host
    if not plan.moves:
        reason = room_words(max_moves, request.host, f"VM {request.name!r}")
        if not as_json:
            output.echo_lines([reason])
        return {**doc, "found": False, "reason": reason}
    doc["found"] = True
    if not as_json:
        where = f" on host {request.host} (--host: moves there only)" if request.host is not None else ""
        output.echo_lines([f"VM {request.name} fits after {len(plan.moves)} move(s){where}:"])
        print_plan(doc)
    if apply:
        from vnuma.services.permits import granted
        from vnuma.services.rebalance_apply import apply_plan

        confirm_apply(yes, len(plan.moves))
        with step_progress(as_json, len(plan.moves)) as progress:
            report = apply_plan(settings(ctx), plan, granted(allow_restart, allow_migrate), progress=progress)
        doc["run"] = run_doc(report)
        output.echo_notes(report.notes)
    return doc


def _print_explain(result: PlacementResult) -> None:
    from vnuma.placement.alternatives import unfit_label

    for u in result.unfit:
        output.echo_lines([f"{unfit_label(u)}: fits on no host" + (f": {u.refused}" if u.refused else "")])
        if u.rejections:
            output.echo_table(None, ["HOST", "CHECK", "REASON"], [(r.host, r.check, r.reason) for r in u.rejections])
    if result.unfit and result.chosen is not None:
        output.echo_lines([f"alternative {result.chosen.alternative}: placed"])
    if result.scores:
        output.echo_table("scores", ["HOST", "SCORE"], result.scores)
    if result.rejections and (result.chosen is not None or not result.unfit):  # else: alternative 0's, above
        rows = [(r.host, r.check, r.reason) for r in result.rejections]
        output.echo_table("rejections", ["HOST", "CHECK", "REASON"], rows)
    chosen = result.chosen
    if chosen is not None and result.cells_decided_by is not None:
        cells = ",".join(str(c) for c in chosen.host_cells)
        output.echo_lines([f"cells {cells} on {chosen.host}: {_DECIDED[result.cells_decided_by]}"])


_DECIDED = {
    "only-choice": "the only cell set that fits there",
    "hmat-bandwidth": "chosen by HMAT bandwidth (the best lowest bandwidth between its cells)",
    "hmat-latency": "chosen by HMAT latency (the lowest highest latency between its cells)",
    "hmat-local-bandwidth": "chosen by HMAT bandwidth of each cell's own memory",
    "hmat-local-latency": "chosen by HMAT latency of each cell's own memory",
    "slit-distance": "chosen by SLIT distance (the closest cells)",
    "slit-sum": "chosen by the sum of SLIT distances",
    "cell-preference": "chosen by the strategy's cell preference",
    "cell-ids": "chosen by the lowest cell ids (a tie otherwise)",
}
"""``place --explain``'s words for :data:`vnuma.placement.order.SET_CRITERIA`."""
