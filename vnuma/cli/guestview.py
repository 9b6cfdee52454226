"""``vnuma vm guest-view``: what the guest sees of its placement, and how to launch on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import VmArg
from vnuma.cli.placing import vm_app

NcclTopoOpt = Annotated[
    bool,
    typer.Option("--nccl-topo", help="Print the guest's NCCL topology file (NCCL_TOPO_FILE) instead: guest bus ids, "
                 "the host's links, nodes and NVLinks."),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", metavar="FILE", help="With --nccl-topo or --cloud-init: write the file here, not to stdout."),
]
LaunchOpt = Annotated[
    str | None,
    typer.Option("--launch", metavar="FRAMEWORK", help="Print what to run per guest NUMA node for vllm, sglang, "
                 "llama.cpp or torchrun: environment, numactl binding and command."),
]
CloudInitOpt = Annotated[
    bool,
    typer.Option("--cloud-init", help="Print a cloud-init user-data document writing the NCCL topology file and "
                 "the launch environment into the guest (with --launch: that framework's)."),
]


@vm_app.command("guest-view")
def guest_view(
    ctx: typer.Context, vm: VmArg, as_json: output.JsonOpt = False, nccl_topo: NcclTopoOpt = False,
    out: OutOpt = None, launch: LaunchOpt = None, cloud_init: CloudInitOpt = False,
) -> None:
    """Show the VM's guest NUMA nodes, where its devices sit in the guest, and a launch line per device.

    Node and CPU numbers are the guest's own (`/sys/devices/system/node`);
    a launch line binds a process to the device's node with numactl and,
    for a GPU, makes it the visible one (CUDA_DEVICE_ORDER=PCI_BUS_ID, so
    the index is the GPU's rank by guest PCI address). `apply --guest-hints`
    also hands this view to the guest as an SMBIOS OEM string.
    JSON: {"vm", "tenant", "host", "nodes": [{"id", "vcpus", "memory_kib",
    "page_size_kib", "distances", "devices", "launch"}], "devices":
    [{"address", "kind", "node", "guest_address", "cuda_index", "launch"}]};
    a VM of cpu policy mixed adds "cpu_policy", "dedicated_vcpus" (and per node).
    A GPU whose memory is a host NUMA node of its own (Grace Hopper,
    Grace Blackwell) has guest nodes of its own without vCPUs or memory
    (the driver in the guest brings the GPU's memory online there): such
    a node adds "gpu" (the GPU's guest address) and the GPU
    "memory_nodes".

    --nccl-topo prints the NCCL topology file of the guest instead (a VM
    without GPUs: exit 4); hand it to NCCL inside the guest with
    NCCL_TOPO_FILE=PATH.

    --launch FRAMEWORK prints one process per guest node holding GPUs (per
    node with vCPUs for a VM without GPUs): its environment and command.
    JSON: {"vm", "framework", "nodes": [{"node", "cpus", "gpus",
    "gpu_addresses", "nics", "env", "command", "line"}]}. --cloud-init
    prints a #cloud-config document writing /etc/vnuma/nccl-topo.xml and
    /etc/profile.d/vnuma.sh.

    Example: vnuma vm guest-view tenant-a-vm1 --json
    """
    if cloud_init or launch is not None:
        _launch(ctx, vm, launch, cloud_init, nccl_topo, as_json, out)
        return
    if nccl_topo or out is not None:
        _nccl_topo(ctx, vm, nccl_topo, as_json, out)
        return
    from vnuma.render.guestview import as_dict
    from vnuma.services.guestfiles import guest_view_of
    from vnuma.topology import format_size_kib

    client = remote(ctx)
    view = client.guest_view(vm) if client else as_dict(guest_view_of(settings(ctx), vm))
    if as_json:
        output.echo_json(view)
        return
    output.echo_lines([f"VM {view['vm']} (tenant {view['tenant']}) on host {view['host']}: what the guest sees"])
    if view.get("dedicated_vcpus"):
        output.echo_lines([
            f"cpu policy mixed: vCPUs {_cpulist(view['dedicated_vcpus'])} dedicated (one host pCPU each), "
            "the others float"
        ])
    output.echo_table(
        None,
        ["NODE", "VCPUS", "MEMORY", "BACKED BY", "DISTANCES", "DEVICES"],
        [
            (
                n["id"],
                _cpulist(n["vcpus"]),
                "-" if "gpu" in n else format_size_kib(n["memory_kib"]),
                f"GPU {n['gpu']}'s memory" if "gpu" in n else f"{format_size_kib(n['page_size_kib'])} pages",
                " ".join(map(str, n["distances"].values())) or "-",
                " ".join(n["devices"]) or "-",
            )
            for n in view["nodes"]
        ],
    )
    if view["devices"]:
        output.echo_table(
            None,
            ["DEVICE", "KIND", "NODE", "GUEST ADDRESS", "LAUNCH"],
            [
                (d["address"], d["kind"], "-" if d["node"] is None else d["node"], d["guest_address"],
                 f"{d['launch']} COMMAND".strip())
                for d in view["devices"]
            ],
        )


def _nccl_topo(ctx: typer.Context, vm: str, nccl_topo: bool, as_json: bool, out: Path | None) -> None:
    if not nccl_topo:
        raise typer.BadParameter("--out goes with --nccl-topo")
    if as_json:
        raise typer.BadParameter("--nccl-topo prints XML; drop --json")
    client = remote(ctx)
    if client:
        text = client.nccl_topology(vm)
    else:
        from vnuma.services.guestfiles import nccl_topology_of

        text = nccl_topology_of(settings(ctx), vm)
    if out is None:
        typer.echo(text, nl=False)
        return
    from vnuma.services.files import write_output

    write_output(out, text, "NCCL topology")
    typer.echo(f"NCCL topology of VM {vm} written to {out}", err=True)


def _launch(ctx: typer.Context, vm: str, framework: str | None, cloud_init: bool, nccl_topo: bool, as_json: bool,
            out: Path | None) -> None:
    if nccl_topo:
        raise typer.BadParameter("--nccl-topo prints the topology alone; drop --launch/--cloud-init")
    if out is not None and not cloud_init:
        raise typer.BadParameter("--out goes with --nccl-topo or --cloud-init")
    if cloud_init and as_json:
        raise typer.BadParameter("--cloud-init prints YAML; drop --json")
    client = remote(ctx)
    if cloud_init:
        if client:
            text = client.cloud_init(vm, framework)
        else:
            from vnuma.services import guestfiles

            text = guestfiles.cloud_init_of(settings(ctx), vm, framework)
        if out is None:
            typer.echo(text, nl=False)
            return
        from vnuma.services.files import write_output

        write_output(out, text, "cloud-init user-data")
        typer.echo(f"cloud-init user-data of VM {vm} written to {out}", err=True)
        return
    assert framework is not None
    from vnuma.render.launch import launch_text

    if client:
        doc = client.launch(vm, framework)
    else:
        from vnuma.render.launch import as_launch_dict
        from vnuma.services import guestfiles

        view, lines = guestfiles.launch_of(settings(ctx), vm, framework)
        doc = as_launch_dict(view, framework, lines)
    if as_json:
        output.echo_json(doc)
        return
    output.echo_lines(launch_text(doc))


def _cpulist(cpus: list[int]) -> str:
    from vnuma.topology import format_cpuset

    return format_cpuset(cpus) or "-"
