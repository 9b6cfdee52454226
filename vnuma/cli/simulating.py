"""``vnuma simulate``: place a workload trace on an in-memory fleet and report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vnuma.cli import output, settings
from vnuma.cli.options import StrategyOpt, strategy_of
from vnuma.cli.progress import bar
from vnuma.placement.model import Isolation
from vnuma.services.files import MAX_TRACE_SIZE
from vnuma.topology import format_size_kib


def simulate(
    ctx: typer.Context,
    trace: Annotated[Path, typer.Argument(help="Trace JSON (format: docs/traces.md).")],
    strategy: StrategyOpt = None,
    isolation: Annotated[Isolation, typer.Option("--isolation", help="Isolation of every tenant.")] = Isolation.CORE,
    placements: Annotated[
        Path | None, typer.Option("--placements", help="Write each request's placement (JSON list) here.")
    ] = None,
    from_inventory: Annotated[
        bool,
        typer.Option("--from-inventory", help="Replay on the inventory's hosts and VMs (the trace's hosts ignored)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    max_input_size: Annotated[
        str,
        typer.Option("--max-input-size", metavar="SIZE", help="Refuse a larger trace file (exit 15), e.g. 2GiB."),
    ] = MAX_TRACE_SIZE,
) -> None:
    """Place a trace's requests in arrival order with the same engine as `place` (no libvirt, no inventory).

    With --from-inventory the requests are placed on top of the inventory as
    it is (its hosts and the VMs they hold; the trace's hosts are ignored);
    nothing is written. Trace tenants that exist there keep their isolation
    and quotas (a request over a quota counts as rejected by "quota").

    Example: vnuma simulate examples/traces/epyc-nps4-8cell.json --from-inventory --json
    """
    from vnuma.services.simulating import simulate_file

    with bar("placing requests", as_json=as_json) as progress:
        report = simulate_file(
            trace, strategy_of(ctx, strategy), isolation, placements, settings(ctx) if from_inventory else None,
            progress, max_input_size,
        )
    if as_json:
        output.echo_json(report)
        return
    d = report["decision_us"]
    rows = [
        ("scenario", report["scenario"]),
        ("placed / requests", f"{report['placed']} / {report['requests']}"),
        ("pCPUs used", f"{report['pcpus_used']} / {report['pcpus_total']}"),
        ("GPUs used", f"{report['gpus_used']} / {report['gpus_total']}"),
        ("multi-node VMs (non-adjacent)", f"{report['multi_node']} ({report['multi_node_non_adjacent']})"),
        *([("cold tiers placed / asked, memory",
            f"{report['cold_placed']} / {report['cold_requests']}, "
            f"{format_size_kib(report['cold_memory_mib'] * 1024)}")]
          if report["cold_requests"] else []),
        *([("NIC requests placed / asked", f"{report['nic_placed']} / {report['nic_requests']}"),
           ("NICs used (VFs held)", f"{report['nics_used']} / {report['nics_total']} ({report['nic_vfs_used']})"),
           ("GPU-NIC levels", "  ".join(f"{k} {n}" for k, n in report["gpu_nic_levels"].items())
            + (f"  ({report['gpu_nic_worse']} worse than asked)" if report["gpu_nic_worse"] else ""))]
          if report["nic_requests"] else []),
        *([("partition requests placed / asked", f"{report['partition_placed']} / {report['partition_requests']}"),
           ("GPUs whole / partitioned (stranded)",
            f"{report['gpus_whole']} / {report['gpus_partitioned']} ({report['gpus_stranded']})")]
          if report["partition_requests"] else []),
        ("decision mean / p50 / p99 / max", f"{d['mean']:.0f} / {d['p50']:.0f} / {d['p99']:.0f} / {d['max']:.0f} us"),
        ("wall, requests/s", f"{report['wall_s']:.2f} s, {report['requests_per_s']:.0f}/s"),
    ]
    output.echo_table(None, ["", ""], rows)
    if report["rejections_by_reason"]:
        output.echo_table(
            "rejected requests by reason", ["COUNT", "REASON"],
            sorted(((n, r) for r, n in report["rejections_by_reason"].items()), reverse=True),
        )
    if report["invalid_requests"]:
        output.echo_table("requests invalid on this fleet", ["NAME", "REASON"],
                          [(r["name"], r["reason"]) for r in report["invalid_requests"]])
