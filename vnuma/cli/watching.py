"""``vnuma watch`` and ``vnuma events``: the closed loop's measuring and what it detected."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vnuma.cli import output, settings
from vnuma.cli.completion import vms
from vnuma.errors import OptionsError

ACTS = ("off",)
"""The ``--act`` modes built so far (``propose`` and ``apply`` are not)."""


def watch(
    ctx: typer.Context,
    interval: Annotated[str, typer.Option("--interval", metavar="TIME", help="Time between rounds (10s, 1m).")] = "10s",
    hosts: Annotated[
        str | None, typer.Option("--hosts", metavar="H1,H2", help="Only these hosts (default: every host).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="One round, then exit.")] = False,
    act: Annotated[str, typer.Option("--act", help="What to do with events: only 'off' (measure) is built.")] = "off",
    domstats_dir: Annotated[
        Path | None,
        typer.Option("--domstats-dir", metavar="DIR",
                     help="Replay recorded rounds (HOST@UNIXSECONDS.txt: `virsh domstats --memory --cpu-total`; "
                          "HOST@UNIXSECONDS.freepages.txt: `virsh freepages --all`) instead of reading libvirt."),
    ] = None,
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

    --act: only off (measure and detect) is built; proposals and acting are not.

    Example: vnuma watch --interval 10s

    Example: vnuma watch --domstats-dir recorded/ --act off
    """
    from vnuma.services.bandwidth import parse_interval
    from vnuma.services.watchconfig import thresholds
    from vnuma.services.watchloop import live, replay

    if act not in ACTS:
        raise OptionsError(f"--act {act} is not built: only --act off (measure and detect)",
                           hint="vnuma watch --act off; see docs/watch.md")
    seconds = parse_interval(interval)
    names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
    from vnuma.cli import config

    t = thresholds(config(ctx))

    def warn(line: str) -> None:
        typer.echo(f"warning: {line}", err=True)

    if domstats_dir is not None:
        summary = replay(settings(ctx), t, domstats_dir, names, seconds, typer.echo, warn)
    else:
        summary = live(settings(ctx), t, names, seconds, once, typer.echo, warn)
    typer.echo(summary.line())


def events(
    ctx: typer.Context,
    since: Annotated[
        str | None, typer.Option("--since", help="Open at or after this time: 2026-12-01T08:00 (UTC), or 2h, 7d.")
    ] = None,
    vm: Annotated[str | None, typer.Option("--vm", help="Only this VM's events.", autocompletion=vms)] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """List what `vnuma watch` detected: each event's rule, subject, when it opened and cleared, and evidence.

    An event is open (CLEARED "-") until its rule has been quiet for m
    samples. Its evidence is the samples that opened it (the last n).

    JSON: [{"id", "rule", "host", "vm" (null for a cell), "cell" (null for a
    VM), "opened_at", "closed_at" (null: open), "evidence": [{"at",
    "local_mb_s", "remote_mb_s", "remote_share", "llc_bytes", "cpu", "rules"}
    or, for a cell, {"at", "host_free_kib", "drift_kib", "rules"}]}].

    Example: vnuma events --since 1h --vm tenant-a-llm
    """
    from vnuma.services.watchevents import list_events

    found = list_events(settings(ctx), since, vm)
    if as_json:
        output.echo_json(found)
        return
    output.echo_table(
        None,
        ["ID", "RULE", "HOST", "SUBJECT", "OPENED", "CLEARED", "EVIDENCE"],
        [(e["id"], e["rule"], e["host"], f"VM {e['vm']}" if e["vm"] else f"cell {e['cell']}",
          e["opened_at"], e["closed_at"] or "-", _evidence(e["evidence"])) for e in found],
    )


def _evidence(samples: list[dict[str, object]]) -> str:
    last = samples[-1] if samples else {}
    if "drift_kib" in last:
        return f"{len(samples)} samples; drift {int(last['drift_kib'] or 0) // 1024} MiB"
    return f"{len(samples)} samples; remote {last.get('remote_mb_s')} MB/s, local {last.get('local_mb_s')} MB/s"
