"""``vnuma reconcile``: report where the inventory and libvirt disagree, and settle what may be settled."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, settings

if TYPE_CHECKING:
    from vnuma.services.reconciling import Report


def reconcile(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Argument(help="Only this host (default: every host with a libvirt URI).")] = None,
    adopt: Annotated[
        bool, typer.Option("--adopt", help="Record unknown domains' real pinning as claims (conflicts refused).")
    ] = False,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Owner of adopted domains without vnuma metadata naming one."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Carry the actions out without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Compare the inventory with the domains libvirt holds on each host; report drift and settle it.

    Drift: missing (a defined VM's domain is gone: its claims are freed),
    state (running/stopped differ: libvirt's is recorded), pins (live or
    persistent vcpupin/emulatorpin/numatune/memnode differ from the
    placement), shape (vCPUs, memory, guest cells, hugepages, hostdevs
    differ), metadata (the domain's vnuma metadata names another
    VM/tenant/host), unknown (a domain no VM explains: --adopt records it,
    owned by the tenant its metadata names, else --tenant), unreadable.
    Only the inventory changes, never libvirt; pins, shape and metadata are
    reported for the operator to settle (`vnuma apply VM`, or release and
    adopt). Actions run with --yes, or after a confirmation on a terminal;
    otherwise nothing changes. Hosts imported from files are skipped. A VM
    an unfinished rebalance run is moving is found where the inventory
    records it; its findings name the run and propose nothing.

    Exit: 0 in agreement (or every finding settled); 9 drift remains (an
    action not confirmed, an adoption refused, drift reconcile leaves to
    the operator); 8 a host's libvirt could not be read.

    JSON: {"in_agreement", "changed", "hosts": [{"host", "uri", "status"
    (checked|skipped|unreachable), "reason", "findings": [{"name", "drift",
    "detail", "differences": [{"kind", "where", "what", "expected",
    "actual"}], "action" (none|release|set-state|adopt), "outcome"
    (null|proposed|done|refused|skipped), "note"}]}]}.

    Example: vnuma reconcile gpu-node-1 --adopt --tenant tenant-a --yes
    """
    from vnuma.errors import ConflictError, HypervisorError
    from vnuma.services.reconcile_apply import carry_out
    from vnuma.services.reconciling import check

    resolved = settings(ctx)
    report = check(resolved, host, adopt=adopt, tenant=tenant)
    shown = False
    if report.proposed and not yes and not as_json and sys.stdin.isatty():
        _print(report)
        shown = True
        yes = typer.confirm(f"carry out {report.proposed} action(s)?", default=False)
    if report.proposed and yes:
        report = carry_out(resolved, report)
        shown = False
    if as_json:
        output.echo_json(report_to_dict(report))
    elif not shown:
        _print(report)
    if report.unreachable:
        names = ", ".join(h.host for h in report.unreachable)
        raise HypervisorError(f"could not read libvirt on {names}", hint=report.unreachable[0].reason)
    if report.unresolved:
        pending = report.proposed
        raise ConflictError(
            f"{report.unresolved} finding(s) left unsettled" + (f", {pending} action(s) not carried out" if pending
                                                                 else ""),
            hint="pass --yes to carry the proposed actions out" if pending else "see the NOTE column above",
        )


def _print(report: Report) -> None:
    for h in report.hosts:
        if h.status != "checked":
            output.echo_lines([f"host {h.host}: {h.status}: {h.reason}"])
            continue
        if not h.findings:
            output.echo_lines([f"host {h.host} ({h.uri}): in agreement"])
            continue
        output.echo_table(
            f"host {h.host} ({h.uri})",
            ["NAME", "DRIFT", "DETAIL", "NOTE"],
            [(f.name, str(f.drift), f.detail, f.note or None) for f in h.findings],
        )


def report_to_dict(report: Report) -> dict[str, Any]:
    """The ``reconcile --json`` document."""
    return {
        "in_agreement": report.unresolved == 0 and not report.unreachable,
        "changed": any(f.settled for f in report.findings),
        "hosts": [
            {
                "host": h.host,
                "uri": h.uri,
                "status": h.status,
                "reason": h.reason,
                "findings": [
                    {
                        "name": f.name,
                        "drift": str(f.drift),
                        "detail": f.detail,
                        "differences": [
                            {"kind": d.kind, "where": d.where, "what": d.what, "expected": d.expected,
                             "actual": d.actual}
                            for d in f.differences
                        ],
                        "action": str(f.action),
                        "outcome": None if f.outcome is None else str(f.outcome),
                        "note": f.note,
                    }
                    for f in h.findings
                ],
            }
            for h in report.hosts
        ],
    }
