"""``vnuma place`` and ``vnuma vm``: place, list, show, release VMs."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vnuma.cli import output, settings
from vnuma.placement.model import (
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    Placement,
    PlacementResult,
    Strategy,
    ThreadPolicy,
    VmRequest,
)

vm_app = typer.Typer(no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def parse_numa_nodes(text: str) -> int | None:
    """``auto`` -> None, else a positive integer."""
    from vnuma.errors import InvalidInputError

    if text.strip().lower() == "auto":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise InvalidInputError(f"bad --numa-nodes {text!r}: use a positive number or auto")
    return int(text)


def place(
    ctx: typer.Context,
    tenant: str,
    vcpus: Annotated[int | None, typer.Option("--vcpus", help="Guest vCPUs (default: GPUs' share).")] = None,
    memory: Annotated[
        str | None, typer.Option("--memory", help="Guest memory, e.g. 64GiB (default: GPUs' share).")
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs to pass through.")] = 0,
    name: Annotated[str | None, typer.Option("--name", help="VM name (default TENANT-vmN).")] = None,
    numa_nodes: Annotated[str, typer.Option("--numa-nodes", help="Guest NUMA nodes: N or auto.")] = "auto",
    cpu_policy: Annotated[CpuPolicy, typer.Option("--cpu-policy")] = CpuPolicy.DEDICATED,
    thread_policy: Annotated[ThreadPolicy, typer.Option("--thread-policy")] = ThreadPolicy.PREFER,
    page_size: Annotated[str, typer.Option("--page-size", help="4K, 2M, 1G or large.")] = "large",
    gpu_affinity: Annotated[GpuAffinity, typer.Option("--gpu-affinity")] = GpuAffinity.REQUIRED,
    emulator_threads: Annotated[EmulatorThreads, typer.Option("--emulator-threads")] = EmulatorThreads.SHARE,
    host: Annotated[str | None, typer.Option("--host", help="Only consider this host.")] = None,
    strategy: Annotated[Strategy, typer.Option("--strategy")] = Strategy.PACK,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide, but claim nothing.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show every host's rejection and score.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Place a tenant's VM: host, cells, pCPUs, hugepages and GPUs; claim them."""
    from vnuma.services.placing import place_vm, require_chosen
    from vnuma.topology import parse_page_size, parse_size_kib

    request = VmRequest(
        name=name or "",
        tenant=tenant,
        vcpus=vcpus,
        memory_kib=parse_size_kib(memory) if memory is not None else None,
        gpus=gpus,
        numa_nodes=parse_numa_nodes(numa_nodes),
        cpu_policy=cpu_policy,
        thread_policy=thread_policy,
        page_size_kib=parse_page_size(page_size),
        gpu_affinity=gpu_affinity,
        emulator_threads=emulator_threads,
        host=host,
    )
    request, result = place_vm(settings(ctx), request, strategy, dry_run=dry_run)
    if result.chosen is None and as_json:
        from vnuma.placement.engine import best_reason

        output.echo_json(
            {
                "error": f"no host can take VM {request.name!r}: {best_reason(result)}",
                "rejections": [{"host": r.host, "reason": r.reason} for r in result.rejections],
            }
        )
    if explain:
        _print_explain(result)
    chosen = require_chosen(request, result)
    if as_json:
        from vnuma.codec import placement_to_dict

        output.echo_json(placement_to_dict(chosen))
    else:
        verb = "would place" if dry_run else "placed"
        print_placement(chosen, f"{verb} VM {chosen.vm} (tenant {chosen.tenant}) on host {chosen.host}")


def _print_explain(result: PlacementResult) -> None:
    if result.scores:
        output.echo_table("scores", ["HOST", "SCORE"], result.scores)
    if result.rejections:
        rows = [(r.host, r.check, r.reason) for r in result.rejections]
        output.echo_table("rejections", ["HOST", "CHECK", "REASON"], rows)


def print_placement(p: Placement, title: str, state: str | None = None) -> None:
    """A placement as a table of guest cells plus devices."""
    from vnuma.topology import format_cpuset, format_size_kib

    head = [title] + ([f"state: {state}"] if state else [])
    output.echo_lines(head)
    output.echo_table(
        None,
        ["GUEST CELL", "HOST CELL", "VCPUS", "PCPUS", "MEMORY", "PAGES"],
        [
            (c.guest_cell, c.host_cell, format_cpuset(c.vcpus), format_cpuset(c.pcpus),
             format_size_kib(c.memory_kib), f"{c.pages} x {format_size_kib(c.page_size_kib)}")
            for c in p.cells
        ],
    )
    extras = [f"emulator pCPUs: {format_cpuset(p.emulator_pcpus) or '-'}"]
    extras += [f"{d.kind} {d.address} -> guest cell {d.guest_cell} (host cell {d.host_cell})" for d in p.devices]
    output.echo_lines(extras)


@vm_app.command("list")
def vm_list(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option("--tenant")] = None,
    host: Annotated[str | None, typer.Option("--host")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List VMs (optionally of one tenant or on one host)."""
    from vnuma.services.queries import list_vms

    vms = list_vms(settings(ctx), tenant, host)
    if as_json:
        output.echo_json([_vm_dict(p, s) for p, s in vms])
        return
    output.echo_table(
        None,
        ["VM", "TENANT", "HOST", "STATE", "VCPUS", "MEMORY", "CELLS", "GPUS"],
        [
            (p.vm, p.tenant, p.host, s, p.vcpus, f"{p.memory_kib // 1048576} GiB",
             ",".join(map(str, p.host_cells)), sum(1 for d in p.devices if d.kind == "gpu"))
            for p, s in vms
        ],
    )


def _vm_dict(p: Placement, state: str) -> dict[str, Any]:
    from vnuma.codec import placement_to_dict

    return {**placement_to_dict(p), "state": state}


@vm_app.command("show")
def vm_show(ctx: typer.Context, vm: str, as_json: JsonOpt = False) -> None:
    """Show one VM's placement and state."""
    from vnuma.services.queries import get_vm

    placement, state = get_vm(settings(ctx), vm)
    if as_json:
        output.echo_json(_vm_dict(placement, state))
    else:
        print_placement(placement, f"VM {placement.vm} (tenant {placement.tenant}) on host {placement.host}", state)
