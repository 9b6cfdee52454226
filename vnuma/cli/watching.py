"""``vnuma watch`` and ``vnuma events``: the closed loop's measuring and what it detected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import output, settings
from vnuma.cli.completion import vms
from vnuma.errors import OptionsError
from vnuma.watch.budget import ACTS

AllowMigrate = Annotated[
    bool, typer.Option("--allow-migrate", help="A move may migrate a VM to another host (else re-pins only).")
]
AllowRestart = Annotated[
    bool, typer.Option("--allow-restart", help="A move may stop and start a running VM (else live moves only).")
]


def watch(
    ctx: typer.Context,
    interval: Annotated[str, typer.Option("--interval", metavar="TIME", help="Time between rounds (10s, 1m).")] = "10s",
    hosts: Annotated[
        str | None, typer.Option("--hosts", metavar="H1,H2", help="Only these hosts (default: every host).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="One round, then exit.")] = False,
    act: Annotated[
        str, typer.Option("--act", metavar="off|propose|apply",
                          help="What to do with events: measure only, propose moves, or carry them out.")
    ] = "propose",
    domstats_dir: Annotated[
        Path | None,
        typer.Option("--domstats-dir", metavar="DIR",
                     help="Replay recorded rounds (HOST@UNIXSECONDS.txt: `virsh domstats --memory --cpu-total`, "
                          "`--balloon` too for the VMs' memory; "
                          "HOST@UNIXSECONDS.freepages.txt: `virsh freepages --all`) instead of reading libvirt."),
    ] = None,
    health_dir: Annotated[
        Path | None,
        typer.Option("--health-dir", metavar="DIR",
                     help="After each round, taint GPUs as each host's newest saved health files say "
                          "(HOST@UNIXSECONDS.xml: `nvidia-smi -q -x`; HOST@UNIXSECONDS.log: its kernel log), as "
                          "`vnuma device health` does; each taint is a device-health event."),
    ] = None,
    allow_migrate: AllowMigrate = False,
    allow_restart: AllowRestart = False,
) -> None:
    """Measure every VM's memory traffic, locality and CPU use, and each cell's free memory, round after round;
    keep the history and detect what persists.

    Each round reads each host once (its running domains' stats in one
    libvirt call, its cells' free pages in another), hosts concurrently: one
    that fails or does not answer within the interval is stale, with the
    reason, and delays no other. Per VM: local and remote MB/s (remote =
    total - local), remote share, LLC occupancy and CPU use, from counter
    differences over the real time between two readings (a counter that
    went down, a restarted domain, gives no rate). Per L3 domain: its load
    and heaviest VMs; per cell: the free memory and pages the inventory
    holds versus what the host reports.

    The rules noisy, remote, capped and cell-drift open an event when true
    in k of the last n samples and clear it after m quiet samples
    (thresholds: the [watch] table of the configuration file, see
    docs/watch.md). Events are listed by `vnuma events` and written to the
    audit log. Each round is one transaction (a replayed file is one host's
    round): raw samples for the history window (1h), one-minute means for 7
    days; each VM's last sample also feeds `vnuma rebalance --objective
    bandwidth`.

    --domstats-dir replays recorded rounds without libvirt, one round per
    file in time order, rates over the recorded times; every file is checked
    first and a malformed one refuses the replay (nothing written). Hosts
    and domains the inventory does not hold are reported and skipped.

    --act propose (the default; it was off before proposals were built)
    turns each event of a VM into one move planned by the rebalance
    objectives (noisy, capped: bandwidth; remote: locality, then
    bandwidth), a re-pin on its host first, and keeps it as a proposal for
    `vnuma events apply ID`; --act apply carries it out at once as a
    journaled rebalance run (`vnuma rebalance --resume|--abort` after a
    failure); --act off only measures and detects. Within the budget of the
    [watch] table (moves per host and per fleet in an hour, a per-VM
    cooldown), never on a cordoned host or for a tenant that opted out,
    migrating only with --allow-migrate and restarting only with
    --allow-restart. Every move withheld is kept with its reason
    (`vnuma events`).

    One watch per inventory: a watch holds the inventory's lease while it
    runs, and another is refused (exit 13); a killed watch's lease expires
    (docs/watch.md).

    --health-dir DIR reads, after each round, each watched host's newest
    HOST@UNIXSECONDS.xml and .log (again only when a newer one arrives) and
    taints its GPUs as `vnuma device health` does; each GPU tainted is a
    device-health event (`vnuma events`). A bad file is a warning and the
    watch goes on (docs/watch.md).

    Example: vnuma watch --interval 10s

    Example: vnuma watch --domstats-dir recorded/ --act off

    Example: vnuma watch --act apply --allow-migrate
    """
    from vnuma.services.bandwidth import parse_interval
    from vnuma.services.watchconfig import thresholds
    from vnuma.services.watchloop import live, replay

    if act not in ACTS:
        raise OptionsError(f"--act {act}: expected one of {', '.join(ACTS)}", hint="see docs/watch.md")
    seconds = parse_interval(interval)
    names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
    from vnuma.cli import config

    t = thresholds(config(ctx))

    def warn(line: str) -> None:
        typer.echo(f"warning: {line}", err=True)

    health = None
    if health_dir is not None:
        from vnuma.services.healthconfig import health_effects
        from vnuma.services.watchhealth import HealthWatch

        health = HealthWatch(settings(ctx), health_dir, health_effects(config(ctx)), typer.echo, warn)
    actor = None
    if act != "off":
        from vnuma.services.watchact import Actor, with_permits

        actor = Actor(settings(ctx), with_permits(t.budget, allow_migrate, allow_restart), act, typer.echo, warn)
    after = _after(actor and actor.after_round, health and health.after_round)
    try:
        if domstats_dir is not None:
            summary = replay(settings(ctx), t, domstats_dir, names, seconds, typer.echo, warn, actor, after=after)
        else:
            summary = live(settings(ctx), t, names, seconds, once, typer.echo, warn, actor=actor, after=after)
    finally:
        if actor is not None:
            actor.close()
    health_line = "" if health is None else f"; {health.events} GPUs tainted from health files"
    typer.echo(summary.line() + health_line)


def _after(*steps: Callable[[Any, float], None] | None) -> Callable[[Any, float], None] | None:
    """What runs after each round: the given steps in order (None when there is none)."""
    given = [s for s in steps if s is not None]
    if not given:
        return None

    def run(watch: Any, at: float) -> None:
        for step in given:
            step(watch, at)

    return run


events_app = typer.Typer(add_completion=False)


@events_app.callback(invoke_without_command=True)
def events(
    ctx: typer.Context,
    since: Annotated[
        str | None, typer.Option("--since", help="Open at or after this time: 2026-12-01T08:00 (UTC), or 2h, 7d.")
    ] = None,
    vm: Annotated[str | None, typer.Option("--vm", help="Only this VM's events.", autocompletion=vms)] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """List what `vnuma watch` detected: each event's rule, subject, when it opened and cleared, evidence, and
    what the watch did about it; `vnuma events apply ID` carries a proposal out.

    An event is open (CLEARED "-") until its rule has been quiet for m
    samples. Its evidence is the samples that opened it (the last n). Its
    actions: each move proposed (ID, for `vnuma events apply ID`), carried
    out (applied, aborted, or unfinished: `vnuma rebalance --resume|--abort`),
    or withheld, with the reason (the budget of the [watch] table, a
    cordoned host, a tenant that opted out, a permit not given, no move that
    helps). The table ends with the budget of the [watch] table and what
    of it the last hour used.

    JSON: [{"id", "rule", "host", "vm" (null for a cell or GPU), "cell" (null for a VM or
    GPU), "opened_at", "closed_at" (null: open), "evidence": [{"at",
    "local_mb_s", "remote_mb_s", "remote_share", "llc_bytes", "cpu", "rss_kib",
    "balloon_kib", "rules"} or, for a cell, {"at", "host_free_kib", "drift_kib", "rules"} or, for a
    device-health event, {"at", "address", "effect", "reason", "conditions"}],
    "actions": [{"id", "status" (proposed|withheld|refused|applied|aborted|unfinished),
    "at", "vm", "host", "to_host", "objective", "reason", "move" ({"from_cells",
    "to_host", "to_cells"} or null), "run" (the rebalance run or null)}]}].

    Example: vnuma events --since 1h --vm tenant-a-llm

    Example: vnuma events apply 3 --allow-migrate
    """
    if ctx.invoked_subcommand is not None:
        return
    from vnuma.services.watchevents import list_events

    found = list_events(settings(ctx), since, vm)
    if as_json:
        output.echo_json(found)
        return
    import time

    from vnuma.cli import config
    from vnuma.services.watchact import spent
    from vnuma.services.watchconfig import thresholds

    budget = spent(settings(ctx), thresholds(config(ctx)).budget, time.time())
    output.echo_table(
        None,
        ["ID", "RULE", "HOST", "SUBJECT", "OPENED", "CLEARED", "EVIDENCE"],
        [(e["id"], e["rule"], e["host"], _subject(e),
          e["opened_at"], e["closed_at"] or "-", _evidence(e["evidence"])) for e in found],
    )
    acted = [(e["id"], a) for e in found for a in e["actions"]]
    if acted:
        typer.echo("")
        output.echo_table(
            None, ["ACTION", "EVENT", "AT", "STATUS", "VM", "MOVE", "REASON"],
            [(a["id"], event, a["at"], a["status"] + (f" (run {a['run']})" if a["run"] else ""), a["vm"] or "-",
              _move(a), a["reason"]) for event, a in acted],
        )
    typer.echo(budget)


@events_app.command("apply")
def apply(
    ctx: typer.Context,
    proposal: Annotated[int, typer.Argument(metavar="ID", help="The proposal to carry out (its ACTION in "
                                            "`vnuma events`).", show_default=False)],
    allow_migrate: AllowMigrate = False,
    allow_restart: AllowRestart = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Carry a proposal of `vnuma watch` out as a journaled rebalance run, within the budget as it stands now.

    A proposal the budget now withholds is refused, and the reason kept
    (`vnuma events`); --allow-migrate and --allow-restart as for `vnuma
    watch`. A run that fails or is killed is finished with `vnuma rebalance
    --resume` or `--abort`, as any run. A proposal that is not in the
    inventory: exit 3; withheld, already carried out, or withheld now: exit 9.

    JSON: {"proposal", "run": {"id", "status", "steps": [{"seq", "vm",
    "kind", "status", "error"}]}}, the "run" of `vnuma rebalance --apply
    --json`.

    Example: vnuma events apply 3

    Example: vnuma events apply 3 --allow-migrate --allow-restart
    """
    import time

    from vnuma.cli import config
    from vnuma.services.watchact import carry_out, with_permits
    from vnuma.services.watchconfig import thresholds

    budget = with_permits(thresholds(config(ctx)).budget, allow_migrate, allow_restart)
    report = carry_out(settings(ctx), proposal, budget, time.time())
    if as_json:
        from vnuma.documents import run_doc

        output.echo_json({"proposal": proposal, "run": run_doc(report)})
        return
    for s in report.steps:
        typer.echo(f"step {s.seq}: {s.vm} ({s.kind}) {s.status}")
    typer.echo(f"proposal {proposal}: rebalance run {report.run_id} {report.status}")
    output.echo_notes(report.notes)


def _move(a: dict[str, object]) -> str:
    move = a["move"]
    if not isinstance(move, dict):
        return "-"
    return f"{a['host']}:{','.join(map(str, move['from_cells']))} -> {move['to_host']}:" \
        f"{','.join(map(str, move['to_cells']))}"


def _subject(e: dict[str, Any]) -> str:
    if e["vm"]:
        return f"VM {e['vm']}"
    if e["cell"] is not None:
        return f"cell {e['cell']}"
    address = next((s.get("address") for s in e["evidence"] if "address" in s), None)
    return f"GPU {address}" if address else "host"


def _evidence(samples: list[dict[str, object]]) -> str:
    last = samples[-1] if samples else {}
    if "address" in last:
        return f"tainted {last['effect']}: {last['reason']}"
    if "drift_kib" in last:
        return f"{len(samples)} samples; drift {int(last['drift_kib'] or 0) // 1024} MiB"
    return f"{len(samples)} samples; remote {last.get('remote_mb_s')} MB/s, local {last.get('local_mb_s')} MB/s"
