"""``vnuma vm guest-view``: what the guest sees of its placement, and how to launch on it."""

from __future__ import annotations

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import VmArg
from vnuma.cli.placing import vm_app


@vm_app.command("guest-view")
def guest_view(ctx: typer.Context, vm: VmArg, as_json: output.JsonOpt = False) -> None:
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

    Example: vnuma vm guest-view tenant-a-vm1 --json
    """
    from vnuma.render.guestview import as_dict
    from vnuma.services.applying import guest_view_of
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
                format_size_kib(n["memory_kib"]),
                f"{format_size_kib(n['page_size_kib'])} pages",
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


def _cpulist(cpus: list[int]) -> str:
    from vnuma.topology import format_cpuset

    return format_cpuset(cpus) or "-"
