"""``vnuma render``, ``vnuma apply`` and ``vnuma vm stop|undefine|release``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import VmArg
from vnuma.cli.output import JsonOpt
from vnuma.cli.placing import vm_app
from vnuma.documents import released_doc, vm_doc

TemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--template",
        help="Operator template; may {% extends \"domain.xml.j2\" %} [env VNUMA_TEMPLATES: a directory].",
    ),
]
DomainTypeOpt = Annotated[
    str | None,
    typer.Option(
        "--domain-type",
        help="kvm, or qemu for software emulation (TCG) [default: config domain_type, VNUMA_DOMAIN_TYPE, else kvm].",
    ),
]
MemnodeOpt = Annotated[
    str | None,
    typer.Option(
        "--memnode-mode",
        help="Override every guest cell's memory mode: strict, restrictive (re-pinnable live) or preferred "
        "[default: config memnode_mode, VNUMA_MEMNODE_MODE, else the modes chosen at place].",
    ),
]


IoThreadsOpt = Annotated[
    int | None,
    typer.Option("--iothreads", help="Override the I/O thread count chosen at place (pinned as placed)."),
]


GuestHintsOpt = Annotated[
    bool,
    typer.Option(
        "--guest-hints",
        help="Give the guest its view (vm guest-view) as an SMBIOS OEM string it can read at boot (dmidecode -t 11).",
    ),
]
SocketsOpt = Annotated[int | None, typer.Option("--sockets", help="Guest CPU sockets (default: follow the host).")]
CoresOpt = Annotated[int | None, typer.Option("--cores", help="Guest cores per socket (default: what is left).")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", help="Guest threads per core (default: as placed).")]


def _options(
    ctx: typer.Context, domain_type: str | None, memnode_mode: str | None, iothreads: int | None = None,
    topology: tuple[int | None, int | None, int | None] = (None, None, None), guest_hints: bool = False,
) -> Any:
    """The render options: given ones checked as the configuration's are, the others configured."""
    from vnuma.services.applying import render_options

    return render_options(settings(ctx), domain_type, memnode_mode, iothreads, topology, guest_hints)


def render(
    ctx: typer.Context,
    vm: VmArg,
    template: TemplateOpt = None,
    domain_type: DomainTypeOpt = None,
    memnode_mode: MemnodeOpt = None,
    iothreads: IoThreadsOpt = None,
    sockets: SocketsOpt = None,
    cores: CoresOpt = None,
    threads: ThreadsOpt = None,
    guest_hints: GuestHintsOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the VM's libvirt domain XML (validated against libvirt's schema and the placement).

    The guest CPU topology follows the host (one socket per host socket the
    VM's cells span, threads as placed); --sockets/--cores/--threads replace
    it (their product must be the vCPU count; cores, when not given, is what
    the others leave). JSON: {"vm", "xml"}.

    Example: vnuma render tenant-a-vm1 --threads 1
    """
    from vnuma.services.applying import render_vm

    client = remote(ctx)
    if client:
        _no_template(template)
        xml = client.render(vm, _remote_options(domain_type, memnode_mode, iothreads, (sockets, cores, threads),
                                                guest_hints))
    else:
        options = _options(ctx, domain_type, memnode_mode, iothreads, (sockets, cores, threads), guest_hints)
        xml = render_vm(settings(ctx), vm, options, template)
    if as_json:
        output.echo_json({"vm": vm, "xml": xml})
        return
    typer.echo(xml, nl=False)


def apply(
    ctx: typer.Context,
    vm: VmArg,
    start: Annotated[bool, typer.Option("--start/--no-start", help="Start the domain after defining it.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show a diff against libvirt's current definition; change nothing.")
    ] = False,
    template: TemplateOpt = None,
    domain_type: DomainTypeOpt = None,
    memnode_mode: MemnodeOpt = None,
    iothreads: IoThreadsOpt = None,
    sockets: SocketsOpt = None,
    cores: CoresOpt = None,
    threads: ThreadsOpt = None,
    guest_hints: GuestHintsOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Define the VM's domain on its host through libvirt, and optionally start it.

    The options are recorded with the VM: a later move re-renders it with
    them (--memnode-mode, --iothreads, --sockets/--cores/--threads, --guest-hints, --template).
    JSON: the VM as `vm show --json` prints it, after the change (with
    --dry-run: {"vm", "diff"}). A domain the host's libvirt is too old for
    (a Grace GPU's memory nodes need libvirt 11.8.0) is refused before
    anything changes, naming the version needed (exit 8).

    Example: vnuma apply tenant-a-vm1 --start
    """
    from vnuma.services.applying import apply_vm

    client = remote(ctx)
    if client:
        _no_template(template)
        doc = client.apply(vm, {**_remote_options(domain_type, memnode_mode, iothreads, (sockets, cores, threads),
                                                   guest_hints), "start": start, "dry_run": dry_run})
        diff, state, notes = doc.get("diff"), doc.get("state", ""), doc.get("notes", [])
    else:
        options = _options(ctx, domain_type, memnode_mode, iothreads, (sockets, cores, threads), guest_hints)
        result = apply_vm(settings(ctx), vm, options, template, start=start, dry_run=dry_run)
        diff, state, notes = result.diff, result.state, result.notes
    output.echo_notes(notes)
    if dry_run:
        if as_json:
            output.echo_json({"vm": vm, "diff": diff})
            return
        typer.echo(diff or f"VM {vm}: libvirt already holds this definition", nl=not diff)
    else:
        _done(ctx, vm, state, as_json)


def _no_template(template: Path | None) -> None:
    if template is not None:
        raise typer.BadParameter("--template is read where the inventory is, not through --server")


def _remote_options(
    domain_type: str | None, memnode_mode: str | None, iothreads: int | None,
    topology: tuple[int | None, int | None, int | None], guest_hints: bool,
) -> dict[str, Any]:
    sockets, cores, threads = topology
    return {"domain_type": domain_type, "memnode_mode": memnode_mode, "iothreads": iothreads, "sockets": sockets,
            "cores": cores, "threads": threads, "guest_hints": guest_hints}


def _done(ctx: typer.Context, vm: str, state: str, as_json: bool) -> None:
    """What a command that changed a VM's domain prints: its state, or (JSON) the VM as `vm show` prints it."""
    if not as_json:
        typer.echo(f"VM {vm}: {state}")
        return
    from vnuma.services.queries import get_vm

    client = remote(ctx)
    placement, recorded = client.get_vm(vm) if client else get_vm(settings(ctx), vm)
    output.echo_json(vm_doc(placement, recorded))


@vm_app.command("start")
def start(ctx: typer.Context, vm: VmArg, as_json: JsonOpt = False) -> None:
    """Start the VM's defined domain (`vnuma apply VM` defines it). JSON: the VM as `vm show --json` prints it.

    Example: vnuma vm start tenant-a-vm1
    """
    from vnuma.services.applying import start_vm

    client = remote(ctx)
    state = client.start_vm(vm)[1] if client else start_vm(settings(ctx), vm)
    _done(ctx, vm, state, as_json)


@vm_app.command("stop")
def stop(ctx: typer.Context, vm: VmArg, as_json: JsonOpt = False) -> None:
    """Power the VM's domain off (its claims stay). JSON: the VM as `vm show --json` prints it.

    Example: vnuma vm stop tenant-a-vm1
    """
    from vnuma.services.applying import stop_vm

    client = remote(ctx)
    state = client.stop_vm(vm)[1] if client else stop_vm(settings(ctx), vm)
    _done(ctx, vm, state, as_json)


@vm_app.command("undefine")
def undefine(ctx: typer.Context, vm: VmArg, as_json: JsonOpt = False) -> None:
    """Stop and undefine the VM's domain (its claims stay: state placed). JSON: the VM as `vm show --json` prints it.

    Example: vnuma vm undefine tenant-a-vm1
    """
    from vnuma.services.applying import undefine_vm

    state, notes = undefine_vm(settings(ctx), vm)
    output.echo_notes(notes)
    _done(ctx, vm, state, as_json)


@vm_app.command("release")
def release(
    ctx: typer.Context,
    vm: VmArg,
    undefine: Annotated[
        bool, typer.Option("--undefine", help="Stop and undefine the domain first if libvirt still holds it.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Free the VM's pCPUs, pages and devices and forget it. JSON: the VM as it was, with "released": true.

    Example: vnuma vm release tenant-a-vm1 --undefine
    """
    from vnuma.services.applying import release_vm
    from vnuma.services.queries import get_vm

    client = remote(ctx)
    if client:
        placement, state = client.release_vm(vm, undefine)
    else:
        placement, state = get_vm(settings(ctx), vm)
        output.echo_notes(release_vm(settings(ctx), vm, undefine=undefine))
    if as_json:
        output.echo_json(released_doc(placement, state))
        return
    typer.echo(f"released VM {vm}")
