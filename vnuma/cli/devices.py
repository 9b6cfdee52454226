"""``vnuma device``: taint, untaint, clean, set, list (device states: :mod:`vnuma.services.devices`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import HostArg
from vnuma.cli.rebalancing import AllowMigrateOpt, AllowRestartOpt, ApplyOpt, YesOpt

app = typer.Typer(no_args_is_help=True, add_completion=False)

DeviceArg = Annotated[
    str, typer.Argument(help="The device's PCI address (0000:3b:00.0; the domain may be left out).",
                        show_default=False)
]


def _said(doc: dict[str, Any], as_json: bool, done: str) -> None:
    if as_json:
        output.echo_json(doc)
        return
    state = doc["state"] or "free"
    extra = f" ({doc['reason']})" if doc["reason"] else ""
    typer.echo(f"host {doc['host']}: device {doc['address']} {'' if doc['changed'] else 'already '}{done}: "
               f"{state}{extra}")


@app.command("taint")
def taint(
    ctx: typer.Context,
    host: HostArg,
    device: DeviceArg,
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="What is wrong with it (kept, shown).")],
    effect: Annotated[
        str, typer.Option("--effect", help="no-schedule: no new claim takes it, its VMs stay; drain: the same, "
                          "and plan (with --apply carry out) moving its VMs off it.")
    ] = "no-schedule",
    partial: Annotated[
        bool, typer.Option("--partial", help="--effect drain: move what can move even if some VMs must stay.")
    ] = False,
    as_json: output.JsonOpt = False,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    allow_restart: AllowRestartOpt = False,
    allow_migrate: AllowMigrateOpt = False,
) -> None:
    """Taint a GPU, NIC or VF: admission refuses any new claim of it (placements, moves into it, partitions
    on it); the VMs holding it stay.

    --effect drain also plans moving every VM holding the device off it:
    each VM's stored request is placed again with the device excluded (the
    rest of its host stays usable). A VM that fits nowhere stays, named;
    then the command exits 5 and nothing is moved, unless --partial. --apply
    runs the plan as a journaled rebalance run (`vnuma rebalance --resume`
    or `--abort` finishes or rolls back an interrupted one; an abort puts
    the VMs back onto the device, which stays tainted).

    JSON: {"host", "address", "state": "tainted", "reason", "by", "since", "effect", "after_release",
    "cleaning_s", "changed"}; with --effect drain the rebalance plan document with the taint as "taint"
    (and "run" with --apply).

    Example: vnuma device taint gpu-node-1 0000:3b:00.0 --reason "Xid 79: fell off the bus" --effect drain
    """
    from vnuma.services.devices import changed_doc
    from vnuma.services.devices import taint as do_taint
    from vnuma.topology.devstates import TaintEffect

    try:
        chosen = TaintEffect(effect)
    except ValueError:
        from vnuma.errors import InvalidInputError

        raise InvalidInputError(f"unknown --effect {effect!r}", hint="one of no-schedule, drain") from None
    if (allow_restart or allow_migrate or yes or apply or partial) and chosen is not TaintEffect.DRAIN:
        raise typer.BadParameter("--partial, --apply, --yes, --allow-restart and --allow-migrate go with "
                                 "--effect drain")
    if (allow_restart or allow_migrate or yes) and not apply:
        raise typer.BadParameter("--yes, --allow-restart and --allow-migrate go with --apply")
    client = remote(ctx)
    if chosen is TaintEffect.DRAIN:
        _drain(ctx, host, device, reason, partial, as_json, apply, yes, (allow_restart, allow_migrate))
        return
    doc = (client.device_change("taint", host, device, reason=reason, effect=chosen.value) if client
           else changed_doc(do_taint(settings(ctx), host, device, reason, chosen)))
    _said(doc, as_json, "tainted")


def _drain(ctx: typer.Context, host: str, device: str, reason: str, partial: bool, as_json: bool, apply: bool,
           yes: bool, allowed: tuple[bool, bool]) -> None:
    """Taint with effect drain, print the plan and, with --apply, carry it out as a journaled run (here, or
    through --server by the service, as `host drain` does)."""
    from vnuma.cli.rebalancing import carry_out, confirm_apply, print_plan, show_carried
    from vnuma.documents import plan_doc
    from vnuma.errors import NoRoomError
    from vnuma.services.permits import granted

    client = remote(ctx)
    if client:
        body: dict[str, Any] = {"reason": reason, "partial": partial}
        carried = {"apply": True, "allow_restart": allowed[0], "allow_migrate": allowed[1]}
        try:
            doc = client.device_drain(host, device, {**body, **carried} if apply and yes else body)
        except NoRoomError as err:
            if err.plan is not None:
                _print_drain(err.plan, as_json, print_plan)
            raise
        if "run" in doc:
            if not as_json:
                _said(doc["taint"], False, "tainted")
            show_carried(doc, as_json)
            return
        if apply and doc["moves"]:  # shown before the confirmation a service cannot ask for
            _print_drain(doc, as_json, print_plan)
            confirm_apply(yes, len(doc["moves"]), ask=False)
        _print_drain(doc, as_json, print_plan)
        return
    from vnuma.services.devicedrain import device_drain_refusal, drain_device
    from vnuma.services.devices import changed_doc

    changed, plan = drain_device(settings(ctx), host, device, reason, for_apply=apply)
    doc = {**plan_doc(plan), "taint": changed_doc(changed)}
    refusal = device_drain_refusal(host, changed.address, plan, partial, doc)
    if refusal is not None:
        _print_drain(doc, as_json, print_plan)
        raise refusal
    if not apply or not plan.moves:
        _print_drain(doc, as_json, print_plan)
        return
    if not as_json:
        _said(doc["taint"], False, "tainted")
    carry_out(ctx, plan, doc, as_json, granted(*allowed), confirm=lambda: confirm_apply(yes, len(plan.moves)))


def _print_drain(doc: dict[str, Any], as_json: bool, print_plan: Any) -> None:
    """A device drain's taint line and plan (or its JSON document)."""
    if as_json:
        output.echo_json(doc)
        return
    _said(doc["taint"], False, "tainted")
    if doc["before"] == 0:
        output.echo_lines([f"device {doc['taint']['address']}: no VM holds it, nothing to move"])
    else:
        print_plan(doc)


@app.command("untaint")
def untaint(ctx: typer.Context, host: HostArg, device: DeviceArg, as_json: output.JsonOpt = False) -> None:
    """Lift a device's taint: it takes claims again (or is cleaning, when a VM released it meanwhile on a host
    set to --after-release clean).

    JSON: as `device taint`.

    Example: vnuma device untaint gpu-node-1 0000:3b:00.0
    """
    from vnuma.services.devices import changed_doc
    from vnuma.services.devices import untaint as do_untaint

    client = remote(ctx)
    doc = client.device_change("untaint", host, device) if client else changed_doc(
        do_untaint(settings(ctx), host, device))
    _said(doc, as_json, "untainted")


@app.command("clean")
def clean(
    ctx: typer.Context,
    host: HostArg,
    device: DeviceArg,
    command: Annotated[
        bool, typer.Option("--command", help="Run the configured cleaning command ([devices] clean_command) "
                           "and mark it clean only if it exits 0.")
    ] = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Mark a cleaning device clean: it takes claims again; the time it spent cleaning is added to its total
    (cleaning_s). With --command, the configured cleaning command decides: a failure or timeout leaves it
    cleaning with the reason (exit 14).

    JSON: as `device taint`.

    Example: vnuma device clean gpu-node-1 0000:3b:00.0
    """
    from vnuma.services.devices import changed_doc
    from vnuma.services.devices import clean as do_clean

    if command:
        from vnuma.services.cleaning import clean_by_command

        doc = changed_doc(clean_by_command(settings(ctx), host, device))
    else:
        client = remote(ctx)
        doc = (client.device_change("clean", host, device) if client
               else changed_doc(do_clean(settings(ctx), host, device)))
    _said(doc, as_json, "cleaned")


@app.command("set")
def set_(
    ctx: typer.Context,
    host: HostArg,
    device: DeviceArg,
    after_release: Annotated[
        str, typer.Option("--after-release", help="clean: a device its VM releases is cleaning until cleaned; "
                          "free: free at once; host: as its host says (`vnuma host set`).")
    ],
    as_json: output.JsonOpt = False,
) -> None:
    """Set what one device becomes when its VM releases it.

    JSON: as `device taint`.

    Example: vnuma device set gpu-node-1 0000:3b:00.0 --after-release clean
    """
    from vnuma.services.devices import changed_doc, set_after_release

    client = remote(ctx)
    doc = (client.device_change("set", host, device, after_release=after_release) if client
           else changed_doc(set_after_release(settings(ctx), host, device, after_release)))
    _said(doc, as_json, f"set to --after-release {after_release}")


@app.command("list")
def list_(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option("--host", help="Only this host's devices.")] = None,
    state: Annotated[
        str | None, typer.Option("--state", help="Only devices in this state: free, claimed, tainted, cleaning.")
    ] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """List the GPUs, NICs and VFs VMs can be given, with their state: free, claimed (by which VM), tainted
    (reason, who, when, effect) or cleaning.

    JSON: [{"host", "address", "kind", "state", "vm", "reason", "by", "since", "effect", "after_release",
    "cleaning_s"}].

    Example: vnuma device list --state tainted
    """
    from vnuma.services.devices import list_devices

    client = remote(ctx)
    rows = client.device_list(host, state) if client else list_devices(settings(ctx), host, state)
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None, ["HOST", "DEVICE", "KIND", "STATE", "VM", "REASON", "BY", "SINCE", "EFFECT", "AFTER-RELEASE"],
        [(r["host"], r["address"], r["kind"], r["state"], r["vm"] or "-", r["reason"] or "-", r["by"] or "-",
          r["since"] or "-", r["effect"] or "-", r["after_release"]) for r in rows],
    )


@app.command("health")
def health(
    ctx: typer.Context,
    host: HostArg,
    nvidia_smi: Annotated[
        list[Path] | None, typer.Option("--nvidia-smi", metavar="FILE", help="A saved `nvidia-smi -q -x` document "
                                        "of the host (repeatable).")
    ] = None,
    kernel_log: Annotated[
        list[Path] | None, typer.Option("--kernel-log", metavar="FILE", help="The host's kernel log (dmesg, "
                                        "journalctl -k, syslog; repeatable).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be tainted; write nothing.")] = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Read a host's saved GPU health files and taint each GPU they show a known-bad condition on (Xid 48,
    63/64, 74, 79, 92, 94/95; uncorrectable ECC errors; row remapping failed or pending; page retirement
    pending), with the condition's effect and reason (docs/devices.md, "GPU health"; the effects can be
    changed in the [device_health] table of the configuration file).

    A GPU already tainted with the same reason and an effect at least as
    strong is left as it is (already); otherwise the health taint replaces
    its reason, keeping drain if it had it. GPUs the files name that are not
    the host's are reported, not refused; a file none of whose GPUs is the
    host's is refused (exit 4, nothing written). Health files never untaint
    and never move a VM: a GPU tainted drain is listed with the command that
    moves its VMs off (`vnuma device taint HOST DEVICE --reason ... --effect
    drain --apply`).

    JSON: {"host", "dry_run", "gpus": [{"address", "conditions", "effect", "reason", "status"
    (tainted|already|would-taint|report-only), "drain", "findings": [{"condition", "where", "detail"}]}],
    "unknown"}.

    Example: vnuma device health gpu-node-1 --nvidia-smi nvsmi.xml --kernel-log kern.log
    """
    from vnuma.cli import config
    from vnuma.services.devicehealth import device_health, outcome_doc, read_reports
    from vnuma.services.healthconfig import health_effects

    if not nvidia_smi and not kernel_log:
        raise typer.BadParameter("give --nvidia-smi FILE or --kernel-log FILE (or both)")
    effects = health_effects(config(ctx))
    reports = read_reports(nvidia_smi or (), kernel_log or ())
    doc = outcome_doc(device_health(settings(ctx), host, reports, effects, dry_run=dry_run))
    if as_json:
        output.echo_json(doc)
        return
    _health_table(doc)


def _health_table(doc: dict[str, Any]) -> None:
    status = {"tainted": "tainted now", "already": "already", "would-taint": "would taint (dry run)",
              "report-only": "report only"}
    if doc["gpus"]:
        output.echo_table(None, ["GPU", "CONDITION", "EFFECT", "STATUS", "REASON"],
                          [(g["address"], ",".join(g["conditions"]), g["effect"] or "none", status[g["status"]],
                            g["reason"]) for g in doc["gpus"]])
    else:
        typer.echo(f"host {doc['host']}: no known-bad condition on its GPUs")
    for g in doc["gpus"]:
        if g["drain"]:
            typer.echo(f"to move GPU {g['address']}'s VMs off it: {g['drain']}")
    if doc["unknown"]:
        typer.echo(f"warning: not GPUs of host {doc['host']} (reported, not tainted): {', '.join(doc['unknown'])}",
                   err=True)
