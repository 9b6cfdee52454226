"""Render and apply use cases: domain XML, define/start/stop/undefine, release.

The inventory's VM state follows what libvirt did: placed -> defined ->
running -> stopped (and back to placed on undefine). A state is written only
after libvirt succeeded, so a libvirt failure leaves the previous state.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.inventory import open_inventory
from vnuma.inventory.repo import Inventory
from vnuma.placement.model import Placement
from vnuma.render.domain import render_domain
from vnuma.render.view import RenderOptions
from vnuma.services import Settings
from vnuma.services.cleaning import clean_left
from vnuma.services.hypervisors import open_hypervisor, require_libvirt
from vnuma.services.mdevs import create_mdevs, remove_mdevs
from vnuma.services.renderings import rendering_doc
from vnuma.topology import Host

PLACED, DEFINED, RUNNING, STOPPED = "placed", "defined", "running", "stopped"


def _load(inventory: Inventory, vm: str) -> tuple[Placement, str, Host]:
    placement, state = inventory.get_vm(vm)
    return placement, state, inventory.get_host(placement.host)


def render_options(
    settings: Settings, domain_type: str | None, memnode_mode: str | None, iothreads: int | None = None,
    topology: tuple[int | None, int | None, int | None] = (None, None, None), guest_hints: bool = False,
) -> RenderOptions:
    """The options ``render``/``apply`` take: the given ones checked as the configuration's are, the others
    the configured ones (``settings``).

    Raises:
        ConfigError: an unknown domain type or memory mode.
    """
    from vnuma.services.config import check_value

    if domain_type is not None:
        check_value("domain_type", domain_type, "--domain-type")
    if memnode_mode is not None:
        check_value("memnode_mode", memnode_mode, "--memnode-mode")
    sockets, cores, threads = topology
    return RenderOptions(
        domain_type=domain_type or settings.domain_type, memnode_mode=memnode_mode or settings.memnode_mode,
        iothreads=iothreads, sockets=sockets, cores=cores, threads=threads, guest_hints=guest_hints,
    )


def render_vm(settings: Settings, vm: str, options: RenderOptions, template: Path | None) -> str:
    """The validated domain XML of a placed VM."""
    with open_inventory(settings.db_url) as inventory:
        placement, _state, host = _load(inventory, vm)
    return render_domain(host, placement, options=options, template=template, templates_dir=settings.templates_dir)


def with_identity(options: RenderOptions, vm: str, *holders: Hypervisor) -> RenderOptions:
    """``options`` with the UUID of the domain ``vm`` as the first of ``holders`` that has it holds it.

    A domain keeps its identity: libvirt refuses to redefine a name under
    another UUID and migrates only onto the same UUID. A domain nobody holds
    gets the rendered default (:func:`vnuma.render.view.domain_uuid`).
    """
    for hv in holders:
        held = hv.domain_uuid(vm)
        if held is not None:
            return replace(options, uuid=held)
    return options


def hypervisor_of(inventory: Inventory, host: Host) -> Hypervisor:
    """A connection to the host's libvirt (:func:`vnuma.services.hypervisors.open_hypervisor`).

    Raises:
        InvalidInputError: the host was imported from files and has no URI.
        HypervisorError: libvirt cannot be reached.
    """
    if not host.uri:
        raise InvalidInputError(
            f"host {host.name!r} was imported from files and has no libvirt URI to apply to",
            hint=f"add it through libvirt: vnuma host add {host.name} --uri URI",
        )
    return open_hypervisor(inventory, host.name, host.uri)


@dataclass(frozen=True, slots=True)
class Applied:
    """What ``apply`` did: the XML, the new state, for --dry-run the diff, and notes on what it could not do
    (mediated devices the driver cannot create: :mod:`vnuma.services.mdevs`)."""

    xml: str
    state: str
    diff: str | None = None
    notes: tuple[str, ...] = ()


def apply_vm(
    settings: Settings, vm: str, options: RenderOptions, template: Path | None, *, start: bool, dry_run: bool
) -> Applied:
    """Define the VM's domain (libvirt validates it) and optionally start it.

    ``dry_run`` changes nothing: it returns a unified diff between the XML
    libvirt holds for the domain (inactive definition) and the rendered one.
    """
    with open_inventory(settings.db_url) as inventory:
        placement, state, host = _load(inventory, vm)
        hv = hypervisor_of(inventory, host)
        try:
            xml = render_domain(
                host, placement, options=with_identity(options, vm, hv), template=template,
                templates_dir=settings.templates_dir,
            )
            if dry_run:
                current = hv.domain_xml(vm, inactive=True) or ""
                diff = "".join(
                    difflib.unified_diff(
                        current.splitlines(True), xml.splitlines(True),
                        f"{host.uri} {vm} (libvirt)" if current else "(not defined)", f"{vm} (rendered)",
                    )
                )
                return Applied(xml, state, diff)
            if hv.domain_state(vm) is DomainState.RUNNING:
                raise ConflictError(
                    f"VM {vm!r} is running on {host.name}; its definition cannot be replaced while it runs",
                    hint=f"vnuma vm stop {vm} first",
                )
            require_libvirt(hv, xml, host.name, vm)
            notes = tuple(create_mdevs(hv, placement))
            hv.define(xml)
            inventory.record_defined(vm, rendering_doc(options, template))
            state = DEFINED
            if start:
                hv.start(vm)
                inventory.set_vm_state(vm, RUNNING)
                state = RUNNING
            return Applied(xml, state, notes=notes)
        finally:
            hv.close()


def start_vm(settings: Settings, vm: str) -> str:
    """Start the VM's defined domain; state becomes running (already running: nothing to do).

    Raises:
        HypervisorError: libvirt holds no domain for the VM (hint: apply it), or refuses to start it.
    """

    def start(hv: Hypervisor, _placement: Placement) -> None:
        if hv.domain_state(vm) is not DomainState.RUNNING:
            hv.start(vm)

    return _change_domain(settings, vm, start, RUNNING)


def stop_vm(settings: Settings, vm: str) -> str:
    """Power the VM off; state becomes stopped."""
    return _change_domain(settings, vm, lambda hv, _placement: hv.stop(vm), STOPPED)


def undefine_vm(settings: Settings, vm: str) -> tuple[str, list[str]]:
    """Stop and undefine the domain, and remove its vGPU devices; the VM keeps its claims (state placed).
    Returns the state and notes on devices the driver cannot remove."""
    notes: list[str] = []

    def undefine(hv: Hypervisor, placement: Placement) -> None:
        if hv.domain_state(vm) is not DomainState.MISSING:
            hv.undefine(vm)
        notes.extend(remove_mdevs(hv, placement))

    return _change_domain(settings, vm, undefine, PLACED), notes


def _change_domain(settings: Settings, vm: str, change: Callable[[Hypervisor, Placement], None], state: str) -> str:
    """``change`` the VM's domain on its host's libvirt, then record ``state`` (returned)."""
    with open_inventory(settings.db_url) as inventory:
        placement, _state, host = _load(inventory, vm)
        hv = hypervisor_of(inventory, host)
        try:
            change(hv, placement)
        finally:
            hv.close()
        inventory.set_vm_state(vm, state)
    return state


def release_vm(settings: Settings, vm: str, *, undefine: bool) -> list[str]:
    """Free the VM's claims; refused while libvirt still holds its domain unless ``undefine`` (then it is
    undefined and its vGPU devices removed first); then the configured cleaning command runs for the devices it
    left cleaning (:func:`.cleaning.clean_left`). Returns notes on devices the driver cannot remove and on what
    the cleaning command did."""
    with open_inventory(settings.db_url) as inventory:
        placement, state, host = _load(inventory, vm)
        notes: list[str] = []
        if state != PLACED and host.uri:
            hv = hypervisor_of(inventory, host)
            try:
                if hv.domain_state(vm) is not DomainState.MISSING:
                    if not undefine:
                        raise ConflictError(
                            f"VM {vm!r} is still defined on {host.name}",
                            hint=f"vnuma vm release {vm} --undefine (stops and undefines it first)",
                        )
                    hv.undefine(vm)
                notes = remove_mdevs(hv, placement)
            finally:
                hv.close()
        inventory.release(vm)
    return notes + clean_left(settings, placement)
