"""``vnuma vm list`` and ``vnuma vm show`` (its table: :mod:`.placementtable`)."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import VmArg
from vnuma.cli.placementtable import print_placement
from vnuma.cli.placing import vm_app
from vnuma.topology import format_size_kib


@vm_app.command("list")
def vm_list(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option("--tenant")] = None,
    host: Annotated[str | None, typer.Option("--host")] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """List VMs (optionally of one tenant or on one host).

    Example: vnuma vm list --tenant tenant-a --json
    """
    from vnuma.services.queries import list_vms

    client = remote(ctx)
    vms = client.list_vms(tenant, host) if client else list_vms(settings(ctx), tenant, host)
    if as_json:
        from vnuma.documents import vm_doc

        output.echo_json([vm_doc(p, s) for p, s in vms])
        return
    output.echo_table(
        None,
        ["VM", "TENANT", "HOST", "STATE", "VCPUS", "MEMORY", "CELLS", "GPUS"],
        [
            (p.vm, p.tenant, p.host, s, p.vcpus, format_size_kib(p.memory_kib),
             ",".join(map(str, p.host_cells)), sum(1 for d in p.devices if d.kind == "gpu"))
            for p, s in vms
        ],
    )


@vm_app.command("show")
def vm_show(ctx: typer.Context, vm: VmArg, as_json: output.JsonOpt = False) -> None:
    """Show one VM's placement and state.

    Example: vnuma vm show tenant-a-vm1 --json
    """
    from vnuma.services.queries import get_vm

    client = remote(ctx)
    placement, state = client.get_vm(vm) if client else get_vm(settings(ctx), vm)
    if as_json:
        from vnuma.documents import vm_doc

        output.echo_json(vm_doc(placement, state))
    else:
        print_placement(placement, f"VM {placement.vm} (tenant {placement.tenant}) on host {placement.host}", state)
