"""``vnuma capacity``: how many more VMs of a shape (or of a mix of shapes) fit on the inventory as it is.

The fleet is read in one transaction (hosts *and* their current claims) into
the engine's in-memory ledger; copies of the shapes are placed on it one
after another, round-robin, with the same engine and admission rule as
``vnuma place``, until the next one fits nowhere or ``count`` are placed.
Nothing is written. The copies are VMs of one new tenant with ``core``
isolation, or of ``--tenant T`` (its isolation and quotas apply). What
stops the next copy is each host's rejection, grouped by the check that
refused it and its cause (:func:`vnuma.placement.refusal.summarize`, as
``place`` counts a refusal: how many hosts, and the closest of them with its
reason as the example), or the tenant's quota (check ``quota``, every host).

One sized shape for a tenant without quotas (the common question) is
answered host by host (:func:`vnuma.placement.fill.fill`: each group of
alike hosts is filled once and the hosts' copies merged in the engine's
order), which gives the same copies as placing them one after another
without a fleet-wide decision per copy; a mix of shapes, a GPU-only shape
(sized per host) or a tenant with quotas is placed one copy after another.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vnuma.errors import ConflictError, InvalidInputError, NotFoundError
from vnuma.inventory.reading import open_reader
from vnuma.placement.engine import place
from vnuma.placement.fill import fill
from vnuma.placement.kept import for_tenant
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement
from vnuma.placement.objectives import Strategy
from vnuma.placement.refusal import summarize
from vnuma.placement.request import validate_request
from vnuma.placement.result import Rejection
from vnuma.services import Settings
from vnuma.services.progress import SILENT, Progress
from vnuma.services.rebalancing import parse_shape

PROBE_TENANT = "(capacity)"
"""The new tenant the copies belong to without ``--tenant``: not a valid tenant name, so never a real one."""


@dataclass(frozen=True, slots=True)
class Stop:
    """Hosts one cause (a check, and its words for every host: ``gist``) refused the next copy on, with the one
    of them that came closest and its reason as the example."""

    check: str
    hosts: int
    example_host: str | None
    example: str
    gist: str | None = None


@dataclass(frozen=True, slots=True)
class CapacityReport:
    """The shapes as given, each copy placed (its shape text and placement), and what stopped the next."""

    shapes: tuple[str, ...]
    placements: tuple[tuple[str, Placement], ...]
    stopped_by: tuple[Stop, ...]
    stopped: bool
    """False when ``count`` copies were placed before any refusal."""


def capacity(
    settings: Settings, shapes: list[str], *, count: int | None = None, host: str | None = None,
    strategy: Strategy = Strategy.PACK, tenant: str | None = None, progress: Progress = SILENT,
) -> CapacityReport:
    """Place copies of ``shapes`` round-robin on an in-memory copy of the inventory (see the module doc).

    Raises:
        InvalidInputError: a shape that cannot be read, or a request no host could ever take by its own
            numbers (the engine's request check), a count below 1.
        NotFoundError: an unknown ``host`` or ``tenant``.
    """
    if count is not None and count < 1:
        raise InvalidInputError(f"--count must be 1 or more, got {count}")
    requests = [parse_shape(text, "SHAPE") for text in shapes]
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    if host is not None and host not in {h.name for h in snap.hosts}:
        raise NotFoundError(f"host {host!r} is not in the inventory", hint="see `vnuma host list`")
    if tenant is not None and tenant not in snap.tenants:
        raise NotFoundError(f"tenant {tenant!r} is not in the inventory", hint="see `vnuma tenant list`")
    owner = tenant or PROBE_TENANT
    isolation = snap.tenants[tenant].isolation if tenant is not None else Isolation.CORE
    fleet = Fleet(snap.hosts, snap.placements, snap.tenants.values())
    fleet.set_isolation(owner, isolation)
    placed: list[tuple[str, Placement]] = []
    progress.start(count)
    quotas = owner in snap.tenants and (snap.tenants[owner].max_vcpus is not None
                                        or snap.tenants[owner].max_gpus is not None)
    one = requests[0]
    if len(requests) == 1 and one.vcpus is not None and one.memory_kib is not None and not quotas:
        req = for_tenant(replace(one, tenant=owner, host=host), fleet.tenant(owner))
        validate_request(req, fleet)
        hosts = [fleet.state(host)] if host is not None else list(fleet.states)
        filled = fill(req, fleet, strategy, hosts, count, name="capacity-{}")
        for p in filled.placements:
            placed.append((shapes[0], p))
            progress.advance(p.host)
        stopped = count is None or len(placed) < count
        return CapacityReport(tuple(shapes), tuple(placed), _stops(filled.stops), stopped)
    while count is None or len(placed) < count:
        i = len(placed)
        req = for_tenant(replace(requests[i % len(requests)], name=f"capacity-{i + 1}", tenant=owner, host=host),
                         fleet.tenant(owner))
        try:
            chosen = place(req, fleet, strategy, explain=False).chosen
        except ConflictError as err:  # the tenant's quota, refused before any host is looked at
            hosts = 1 if host is not None else len(snap.hosts)
            return CapacityReport(tuple(shapes), tuple(placed), (Stop("quota", hosts, None, str(err)),), True)
        if chosen is None:
            refused = place(req, fleet, strategy, explain=True)
            return CapacityReport(tuple(shapes), tuple(placed), _grouped(refused.rejections), True)
        fleet.record(chosen)  # the engine admitted it on exactly this ledger: no second admission
        placed.append((shapes[i % len(shapes)], chosen))
        progress.advance(chosen.host)
    return CapacityReport(tuple(shapes), tuple(placed), (), False)


def _stops(stops: tuple[tuple[Rejection, int], ...]) -> tuple[Stop, ...]:
    """:func:`_grouped` of a fill's groups of alike hosts (each its first host's rejection and its size)."""
    return _grouped(tuple(r for r, _n in stops), tuple(n for _r, n in stops))


def _grouped(rejections: tuple[Rejection, ...], hosts: tuple[int, ...] | None = None) -> tuple[Stop, ...]:
    """One :class:`Stop` per cause, most hosts first (:func:`vnuma.placement.refusal.summarize`)."""
    causes = summarize(rejections, hosts).causes
    return tuple(Stop(c.check, c.hosts, c.example.host, c.example.reason, c.gist) for c in causes)
