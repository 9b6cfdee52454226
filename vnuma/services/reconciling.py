"""``vnuma reconcile``: compare the inventory with what libvirt holds on each host, and bring them together.

Two steps, so nothing changes without being reported first: :func:`check`
reads both sides and returns a :class:`Report` whose findings carry a
proposed action; :func:`vnuma.services.reconcile_apply.carry_out` performs
the proposed actions (the CLI calls it only with ``--yes`` or after a
confirmation), re-checking each one against the inventory and libvirt just
before it acts.

Drift kinds (stable JSON strings, :class:`Drift`):

``missing``    the inventory says defined/running/stopped, libvirt has no such
               domain; action: free the VM's claims (``placed`` with no domain is
               normal: claimed, never applied, and not drift)
``state``      libvirt's running/stopped differs from the recorded state (or a
               ``placed`` VM's domain exists); action: record libvirt's state
``pins``       live or persistent vcpupin/emulatorpin/numatune/memnode differ
               from the placement; reported only
``shape``      vCPUs, memory, guest cells, hugepages or hostdevs differ; reported only
``metadata``   the domain's vnuma metadata names another VM/tenant/host (or a
               ``placed`` VM's namesake domain has none); reported only
``unknown``    a domain no inventory VM explains; with ``adopt``: record its real
               pinning as a VM's claims (refused, with the reason, when it
               cannot be read as a placement or the claim check refuses it)
``unreadable`` the domain XML libvirt returned could not be parsed; reported only

Decisions: reconcile changes the inventory only, never libvirt; drift it
cannot settle (pins, shape, metadata) is left to the operator (``vnuma
apply VM`` rewrites a domain from its placement; ``vnuma vm release VM``
then ``reconcile --adopt`` records the domain as it is). libvirt's
"defined, not running" is ``defined`` or ``stopped`` in the inventory.
Actions are refused while a rebalance run is unfinished: its journal, not
reconcile, owns the moved VMs (``vnuma rebalance --resume``/``--abort``).
A VM whose move is in flight (claims moved, libvirt not yet changed, e.g.
after a crash) is found where the inventory records it, and its findings
name the run and propose nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from vnuma.errors import HypervisorError, InvalidInputError, NotFoundError
from vnuma.hypervisor.base import DomainState, Hypervisor
from vnuma.inventory.reading import FleetView, open_reader
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.adoption import Difference, differences, placement_from_domain
from vnuma.services.hypervisors import KeptDomains, open_hypervisor
from vnuma.sources.domainxml import Domain, parse_domain
from vnuma.topology import Host

PLACED, DEFINED, RUNNING, STOPPED = "placed", "defined", "running", "stopped"


class Drift(StrEnum):
    """How the inventory and libvirt disagree about one VM or domain."""

    MISSING = "missing"
    STATE = "state"
    PINS = "pins"
    SHAPE = "shape"
    METADATA = "metadata"
    UNKNOWN = "unknown"
    UNREADABLE = "unreadable"


class Action(StrEnum):
    """What reconcile does about a finding."""

    NONE = "none"
    RELEASE = "release"
    SET_STATE = "set-state"
    ADOPT = "adopt"


class Outcome(StrEnum):
    """Where an action stands: proposed (not carried out), done, refused, or skipped (changed meanwhile)."""

    PROPOSED = "proposed"
    DONE = "done"
    REFUSED = "refused"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement; ``note`` says what was (or would be) done, or why not."""

    name: str
    drift: Drift
    detail: str
    differences: tuple[Difference, ...] = ()
    action: Action = Action.NONE
    outcome: Outcome | None = None
    note: str = ""
    seen_state: str | None = None
    new_state: str | None = None
    placement: Placement | None = None

    @property
    def settled(self) -> bool:
        """True when an action resolved this finding."""
        return self.outcome is Outcome.DONE


@dataclass(frozen=True, slots=True)
class HostReport:
    """One host: ``status`` is checked, skipped (no libvirt URI) or unreachable (``reason``)."""

    host: str
    uri: str | None
    status: str
    reason: str = ""
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    """Every host's findings, in host order."""

    hosts: tuple[HostReport, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        """All findings of all hosts."""
        return tuple(f for h in self.hosts for f in h.findings)

    @property
    def proposed(self) -> int:
        """Actions waiting for ``--yes`` or a confirmation."""
        return sum(1 for f in self.findings if f.outcome is Outcome.PROPOSED)

    @property
    def unresolved(self) -> int:
        """Findings no action settled."""
        return sum(1 for f in self.findings if not f.settled)

    @property
    def unreachable(self) -> tuple[HostReport, ...]:
        """Hosts whose libvirt could not be read."""
        return tuple(h for h in self.hosts if h.status == "unreachable")


def check(settings: Settings, host: str | None = None, *, adopt: bool = False, tenant: str | None = None) -> Report:
    """Compare the inventory with libvirt on ``host`` (every host with a URI when None); changes nothing.

    The inventory side is one read transaction (:meth:`Reader.fleet_view`), without the ORM.

    Raises:
        NotFoundError: an unknown host, or an unknown ``tenant``.
        InvalidInputError: the named host has no libvirt URI.
    """
    with open_reader(settings.db_url) as reader:
        view = reader.fleet_view()
        known = {h.name: h for h in view.snapshot.hosts}
        if host is not None and host not in known:
            raise NotFoundError(f"host {host!r} is not in the inventory", hint="see `vnuma host list`")
        hosts = [known[host]] if host is not None else list(known.values())
        if host is not None and not hosts[0].uri:
            raise InvalidInputError(
                f"host {host!r} was imported from files and has no libvirt URI to reconcile with",
                hint=f"add it through libvirt: vnuma host add {host} --uri URI",
            )
        if tenant is not None and tenant not in view.snapshot.tenants:
            raise NotFoundError(f"tenant {tenant!r} is not in the inventory", hint="see `vnuma tenant list`")
        found = Report(tuple(_check_host(reader, view, h, adopt, tenant) for h in hosts))
    found = Report(tuple(
        replace(h, findings=tuple(_advice(_moving(f, view)) for f in h.findings)) for h in found.hosts
    ))
    return _each(found, lambda f: replace(f, outcome=Outcome.PROPOSED, note=_would(f)))


def _check_host(keeper: KeptDomains, view: FleetView, host: Host, adopt: bool, tenant: str | None) -> HostReport:
    if not host.uri:
        return HostReport(host.name, None, "skipped", "imported from files: no libvirt URI")
    try:
        hv = open_hypervisor(keeper, host.name, host.uri)
    except HypervisorError as err:
        return HostReport(host.name, host.uri, "unreachable", str(err))
    try:
        findings = _compare(view, hv, host, adopt, tenant)
    except HypervisorError as err:
        return HostReport(host.name, host.uri, "unreachable", str(err))
    finally:
        hv.close()
    return HostReport(host.name, host.uri, "checked", "", tuple(findings))


def _read(hv: Hypervisor, name: str, *, inactive: bool) -> Domain | None:
    xml = hv.domain_xml(name, inactive=inactive)
    return None if xml is None else parse_domain(xml, what=f"{hv.uri} domain {name!r}")


def _compare(view: FleetView, hv: Hypervisor, host: Host, adopt: bool, tenant: str | None) -> list[Finding]:
    vms = [p for p in view.snapshot.placements if p.host == host.name]
    domains = set(hv.domain_names())
    findings: list[Finding] = []
    for placement in vms:
        findings += _check_vm(hv, host, placement, str(view.states[placement.vm]), placement.vm in domains)
    known = {p.vm for p in vms}
    for name in sorted(domains - known):
        findings.append(_check_unknown(view, hv, host, name, adopt, tenant))
    return findings


def _missing(p: Placement, state: str, uri: str) -> list[Finding]:
    if state == PLACED:
        return []
    detail = f"the inventory says {state}; {uri} has no such domain (its claims are still held)"
    return [Finding(p.vm, Drift.MISSING, detail, action=Action.RELEASE, seen_state=state)]


def _check_vm(hv: Hypervisor, host: Host, p: Placement, state: str, exists: bool) -> list[Finding]:
    actual = hv.domain_state(p.vm) if exists else DomainState.MISSING
    if actual is DomainState.MISSING:
        return _missing(p, state, hv.uri)
    try:
        persistent = _read(hv, p.vm, inactive=True)
        live = _read(hv, p.vm, inactive=False) if actual is DomainState.RUNNING else None
    except InvalidInputError as err:
        return [Finding(p.vm, Drift.UNREADABLE, str(err))]
    if persistent is None:
        return _missing(p, state, hv.uri)
    findings: list[Finding] = []
    mark = persistent.mark
    ours = mark is not None and (mark.vm, mark.tenant, mark.host) == (p.vm, p.tenant, p.host)
    if mark is not None and not ours:
        findings.append(Finding(p.vm, Drift.METADATA, f"its vnuma metadata names VM {mark.vm!r} of tenant "
                                f"{mark.tenant!r} on host {mark.host!r}, not tenant {p.tenant!r} on {p.host!r}"))
    elif mark is None and state == PLACED:
        findings.append(Finding(p.vm, Drift.METADATA, "a domain of this name exists but carries no vnuma metadata"))
    observed = _observed(state, actual)
    if observed != state and (ours or state != PLACED):
        findings.append(Finding(
            p.vm, Drift.STATE, f"the inventory says {state}, libvirt says {actual}",
            action=Action.SET_STATE, seen_state=state, new_state=observed,
        ))
    pins = differences(p, persistent, live, host)
    for drift, kinds in ((Drift.PINS, ("pins",)), (Drift.SHAPE, ("shape",))):
        found = tuple(d for d in pins if d.kind in kinds)
        if found:
            findings.append(Finding(p.vm, drift, "; ".join(d.text for d in found), differences=found))
    return findings


def _observed(state: str, actual: DomainState) -> str:
    """The inventory state that matches libvirt's: a stopped domain keeps defined/stopped as recorded."""
    if actual is DomainState.RUNNING:
        return RUNNING
    if state in (DEFINED, STOPPED):
        return state
    return DEFINED if state == PLACED else STOPPED


def _mark_detail(view: FleetView, host: Host, domain: Domain) -> str:
    mark = domain.mark
    if mark is None:
        return "no inventory VM; no vnuma metadata"
    text = f"no inventory VM; vnuma metadata names VM {mark.vm!r} of tenant {mark.tenant!r} on host {mark.host!r}"
    if mark.vm != domain.name or mark.host != host.name:
        p = next((p for p in view.snapshot.placements if p.vm == mark.vm), None)
        if p is None:
            text += f"; the inventory has no VM {mark.vm!r}"
        else:
            text += f"; the inventory has VM {mark.vm!r} on host {p.host!r} ({view.states[p.vm]})"
    return text


def _check_unknown(
    view: FleetView, hv: Hypervisor, host: Host, name: str, adopt: bool, tenant: str | None
) -> Finding:
    try:
        persistent = _read(hv, name, inactive=True)
        live = _read(hv, name, inactive=False) if hv.domain_state(name) is DomainState.RUNNING else None
    except InvalidInputError as err:
        return Finding(name, Drift.UNREADABLE, f"no inventory VM; {err}")
    if persistent is None:  # gone since it was listed
        return Finding(name, Drift.UNKNOWN, "no inventory VM; the domain vanished while being read")
    detail = _mark_detail(view, host, persistent)
    if not adopt:
        return Finding(name, Drift.UNKNOWN, detail)
    owner = persistent.mark.tenant if persistent.mark is not None else tenant
    try:
        if owner is None:
            raise InvalidInputError("it carries no vnuma metadata naming its tenant; pass --tenant TENANT")
        if owner not in view.snapshot.tenants:
            raise NotFoundError(f"tenant {owner!r} is not in the inventory", hint="see `vnuma tenant list`")
        placement = placement_from_domain(persistent, live, host, owner)
    except (InvalidInputError, NotFoundError) as err:
        return Finding(name, Drift.UNKNOWN, detail, action=Action.ADOPT, outcome=Outcome.REFUSED,
                       note=f"not adoptable: {err}")
    return Finding(name, Drift.UNKNOWN, detail, action=Action.ADOPT, placement=placement)


_LEFT = {
    Drift.PINS: "left to the operator: `vnuma apply {name}` rewrites the domain from its placement (stopped)",
    Drift.SHAPE: "left to the operator: `vnuma apply {name}` rewrites the domain from its placement (stopped)",
    Drift.METADATA: "left to the operator: the domain may not be this VM's",
    Drift.UNKNOWN: "pass --adopt to record it as a VM",
    Drift.UNREADABLE: "left to the operator",
}


def _moving(f: Finding, view: FleetView) -> Finding:
    """A finding about a VM an unfinished rebalance run is moving: the run owns it, reconcile proposes nothing."""
    if f.name not in view.in_flight:
        return f
    run, seq, status = view.in_flight[f.name]
    verb = "moving" if status == "started" else "moving back"
    return replace(
        f, action=Action.NONE, placement=None,
        note=f"rebalance run {run} step {seq} is {verb} it: `vnuma rebalance --resume` finishes the move, "
        "`vnuma rebalance --abort` rolls it back",
    )


def _advice(f: Finding) -> Finding:
    return f if f.note or f.action is not Action.NONE else replace(f, note=_LEFT[f.drift].format(name=f.name))


def _would(f: Finding) -> str:
    if f.action is Action.RELEASE:
        return "would free its claims"
    if f.action is Action.SET_STATE:
        return f"would record state {f.new_state}"
    assert f.placement is not None
    return f"would adopt it for tenant {f.placement.tenant!r} (the claim check decides)"


def _each(report: Report, fn: Callable[[Finding], Finding]) -> Report:
    def one(f: Finding) -> Finding:
        return fn(f) if f.action is not Action.NONE and f.outcome in (None, Outcome.PROPOSED) else f

    return Report(tuple(replace(h, findings=tuple(one(f) for f in h.findings)) for h in report.hosts))
