"""``vnuma trace``: list the example workload scenarios and generate their traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vnuma.cli import output

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """List the scenarios `vnuma trace generate` makes, with hosts, requests and a description.

    Example: vnuma trace list --json
    """
    from vnuma.services.traces import trace_scenarios

    rows = trace_scenarios()
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None,
        ["SCENARIO", "HOSTS", "REQUESTS", "DESCRIPTION"],
        [(r["name"], r["hosts"], r["requests"], r["description"]) for r in rows],
    )


@app.command("generate")
def generate(
    scenario: Annotated[str, typer.Option("--scenario", metavar="NAME", help="Scenario (see `vnuma trace list`).")],
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Random seed; the same seed gives the same bytes.")
    ] = 42,
    out: Annotated[str, typer.Option("--out", metavar="FILE", help="Write the trace here (`-`: stdout).")] = "-",
    hosts: Annotated[
        int | None, typer.Option("--hosts", metavar="N", help="How many hosts (default: the scenario's).")
    ] = None,
) -> None:
    """Generate an example workload trace (format: docs/traces.md) for `vnuma simulate`.

    Example: vnuma trace generate --scenario fleet --hosts 100000 --out fleet.json
    """
    from vnuma.services.traces import generate_trace, write_trace

    trace = generate_trace(scenario, seed, hosts)
    if out == "-":
        typer.echo(trace.text, nl=False)
        return
    write_trace(trace, Path(out))
    typer.echo(f"wrote {out}: {trace.scenario}, seed {trace.seed}, {trace.hosts} hosts, {trace.requests} requests")


@app.command("export")
def export(
    ctx: typer.Context,
    hosts: Annotated[
        str | None, typer.Option("--hosts", metavar="LIST", help="Only these hosts, comma-separated (default: all).")
    ] = None,
    with_vms: Annotated[
        bool, typer.Option("--with-vms", help="Whole hosts, and every VM as one of the first requests.")
    ] = False,
    out: Annotated[str, typer.Option("--out", metavar="FILE", help="Write the trace here (`-`: stdout).")] = "-",
) -> None:
    """Write the inventory's hosts as a workload trace (docs/traces.md), to share or replay a what-if.

    Hosts are written as they are now: the CPUs, pages and GPUs no VM holds
    (reserved CPUs left out). With --with-vms they are written whole and
    every VM becomes one of the first requests, so `vnuma simulate` re-places
    them before what follows. Nothing is changed.

    Example: vnuma trace export --with-vms --out fleet.json
    """
    from vnuma.cli import settings
    from vnuma.services.traces import export_trace, write_trace

    names = [h.strip() for h in hosts.split(",")] if hosts is not None else None
    trace = export_trace(settings(ctx), names, with_vms=with_vms)
    if out == "-":
        typer.echo(trace.text, nl=False)
        return
    write_trace(trace, Path(out))
    typer.echo(f"wrote {out}: {trace.hosts} hosts, {trace.requests} requests")
