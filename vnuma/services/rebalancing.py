"""``vnuma rebalance``: plan moves on the inventory's current state (plan only, nothing changes)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from vnuma.errors import ConflictError, InvalidInputError, NoRoomError, NotFoundError
from vnuma.inventory.reading import open_reader
from vnuma.placement.model import Isolation, Placement, VmRequest
from vnuma.placement.rebalance import (
    Exclusion,
    FleetState,
    Objective,
    Plan,
    VmLoad,
    check_limits,
    check_solver,
    default_solver,
    plan_moves,
)
from vnuma.services import Settings, failpoints
from vnuma.topology import count_of, parse_page_size, parse_size_kib

_KEYS = ("vcpus", "memory", "gpus", "numa_nodes", "page_size")


def parse_shape(text: str, what: str = "--make-room-for") -> VmRequest:
    """Parse ``"vcpus=32,memory=256GiB,gpus=2"`` (``numa_nodes=N``, ``page_size=4K|2M|1G|large`` optional).

    Raises:
        InvalidInputError: an unknown key, a bad number or size, vCPUs or memory missing.
    """
    values: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or key not in _KEYS or key in values:
            raise InvalidInputError(
                f"bad {what} {text!r}: cannot read {part.strip()!r}",
                hint='use e.g. "vcpus=32,memory=256GiB,gpus=2" (keys: vcpus, memory, gpus, numa_nodes, page_size)',
            )
        values[key] = value.strip()
    # Bad values first, so that "vcpus=abc" is told about "abc", not about the missing memory.
    numbers = {}
    for key in ("vcpus", "gpus", "numa_nodes"):
        raw = values.get(key, "0")
        if not raw.isdecimal() or len(raw) > 6:
            raise InvalidInputError(
                f"bad {what} {text!r}: {key} must be a whole number, got {raw!r}"
            )
        numbers[key] = int(raw)
    memory_kib = parse_size_kib(values["memory"]) if "memory" in values else None
    missing = [key for key in ("vcpus", "memory") if key not in values]
    if missing:
        raise InvalidInputError(
            f"bad {what} {text!r}: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required",
            hint='use e.g. "vcpus=32,memory=256GiB,gpus=2"',
        )
    assert memory_kib is not None
    return VmRequest(
        name="room",
        tenant=None,
        vcpus=numbers["vcpus"],
        memory_kib=memory_kib,
        gpus=numbers["gpus"],
        numa_nodes=numbers["numa_nodes"] or None,
        page_size_kib=parse_page_size(values.get("page_size", "large")),
        isolation=Isolation.CORE,
    )


def plan_rebalance(
    settings: Settings,
    objective: Objective,
    *,
    host: str | None = None,
    max_moves: int = 3,
    make_room_for: VmRequest | None = None,
    time_limit_s: float = 10.0,
    for_apply: bool = False,
    solver: str | None = None,
    exclude: Exclusion | None = None,
) -> Plan:
    """Plan moves on every host (or ``host`` only); reads the inventory, writes nothing. ``exclude``: moves the
    plan must not make (the watch's budget withheld them), the next best tried instead.

    ``for_apply`` refuses to plan while a rebalance run is unfinished (its
    claims are half-way between two placements). ``solver``: ``search`` or
    ``cp-sat`` (:func:`~vnuma.placement.rebalance.check_solver` says for which objectives), None: the
    objective's default (:func:`~vnuma.placement.rebalance.default_solver`).

    Raises:
        ConflictError: ``for_apply`` and a run is unfinished.
        NotFoundError: unknown host, or the shape's tenant is unknown.
        InvalidInputError: a bad limit, ``room`` without a shape, or a solver the objective does not take.
        NoRoomError: ``cp-sat`` found no plan within the time limit (exit 5; nothing planned).
    """
    check_limits(max_moves, time_limit_s)
    check_solver(solver or default_solver(objective), objective)
    if for_apply:
        refuse_unfinished_run(settings)
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    if host is not None and host not in {h.name for h in snap.hosts}:
        raise NotFoundError(f"host {host!r} is not in the inventory", hint="see `vnuma host list`")
    hosts = tuple(h for h in snap.hosts if host is None or h.name == host)
    placements = tuple(sorted((p for p in snap.placements if host is None or p.host == host), key=_by_host))
    isolation = {name: t.isolation for name, t in snap.tenants.items()}
    if make_room_for is not None:
        if make_room_for.tenant is not None:
            tenant = snap.tenants.get(make_room_for.tenant)
            if tenant is None:
                raise NotFoundError(
                    f"tenant {make_room_for.tenant!r} is not in the inventory", hint="see `vnuma tenant list`"
                )
            make_room_for = replace(make_room_for, isolation=tenant.isolation)
        if make_room_for.host is None and host is not None:
            make_room_for = replace(make_room_for, host=host)
    loads = _loads(settings) if objective is Objective.BANDWIDTH else {}
    state = FleetState(hosts, placements, isolation, loads, exclude or Exclusion())
    return plan_moves(
        state, objective, max_moves, make_room_for, time_limit_s, clock=time.monotonic, solver=solver
    )


def _loads(settings: Settings) -> dict[str, VmLoad]:
    """The kept bandwidth samples (InvalidInputError when there is none: nothing to plan on)."""
    from vnuma.services.bandwidth import measured_loads

    loads = measured_loads(settings)
    if not loads:
        raise InvalidInputError(
            "objective bandwidth plans on measured samples, and the inventory has none",
            hint="measure first: vnuma stats --bandwidth",
        )
    return loads


def drain_plan(
    settings: Settings, host: str, *, max_moves: int | None = None, time_limit_s: float = 10.0,
    for_apply: bool = False, solver: str | None = None,
) -> Plan:
    """Cordon ``host`` (as ``kubectl drain`` does, also for a plan only), then plan moving every VM off it.

    ``max_moves`` None: as many as the host has VMs. The plan's ``left`` names each VM that stays and why.

    Raises:
        NotFoundError: unknown host.
        ConflictError: ``for_apply`` and a rebalance run is unfinished (the host is not cordoned then).
        InvalidInputError: a bad limit.
    """
    from vnuma.services.queries import set_cordoned

    check_limits(max_moves, time_limit_s)
    # before the cordon: a refused drain changes nothing
    check_solver(solver or default_solver(Objective.DRAIN), Objective.DRAIN)
    if for_apply:
        refuse_unfinished_run(settings)
    set_cordoned(settings, host, True)
    failpoints.reached("cordoned")
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    state = FleetState(
        tuple(snap.hosts), tuple(sorted(snap.placements, key=_by_host)),
        {name: t.isolation for name, t in snap.tenants.items()},
    )
    most = max_moves if max_moves is not None else sum(1 for p in snap.placements if p.host == host)
    return plan_moves(
        state, Objective.DRAIN, most, None, time_limit_s, clock=time.monotonic, drain=host, solver=solver
    )


def _by_host(p: Placement) -> tuple[str, str]:
    return (p.host, p.vm)


def refuse_unfinished_run(settings: Settings) -> None:
    """A plan to apply must not start while a run's claims are half-way between two placements."""
    from vnuma.inventory import open_inventory
    from vnuma.inventory.journal import run_unfinished

    with open_inventory(settings.db_url) as inventory:
        run = inventory.unfinished_run()
    if run is not None:
        raise run_unfinished(run.id, run.status)


def held_up(settings: Settings) -> str | None:
    """Why carrying a plan out would be refused now (an unfinished run, with how to go on), None if nothing
    holds it up: said beside a plan that is only shown (``--dry-run``)."""
    try:
        refuse_unfinished_run(settings)
    except ConflictError as err:
        return f"{err}: carrying this plan out is refused until then ({err.hint})"
    return None


def plan_room_for(
    settings: Settings, request: VmRequest, *, max_moves: int, time_limit_s: float = 10.0, for_apply: bool = False
) -> Plan:
    """Moves after which ``request`` (a tenant's VM that fits nowhere now) would fit: ``place --rebalance``.

    The request keeps its tenant, so the tenant's isolation applies to the
    room being made; ``--host`` limits the plan to that host.

    Raises:
        NotFoundError: unknown tenant or host.
        ConflictError: ``for_apply`` and a rebalance run is unfinished.
    """
    return plan_rebalance(
        settings, Objective.ROOM, host=request.host, max_moves=max_moves,
        make_room_for=request, time_limit_s=time_limit_s, for_apply=for_apply,
    )


def drain_refusal(host: str, plan: Plan, partial: bool, doc: dict[str, Any]) -> NoRoomError | None:
    """A drain that would leave VMs on ``host`` moves nothing unless ``partial``: the refusal (exit 5,
    carrying the plan's document ``doc``), or None."""
    if not plan.left or partial:
        return None
    return NoRoomError(
        f"host {host}: {count_of(len(plan.left), 'VM')} cannot leave ({plan.left[0][0]}: {plan.left[0][1]}); "
        "nothing was moved",
        hint="--partial moves the others; or release, resize or make room for what stays", plan=doc,
    )


def room_words(max_moves: int, host: str | None, what: str) -> str:
    """The sentence for a room search that found no plan."""
    where = f" on host {host}" if host is not None else ""
    return f"no plan of at most {max_moves} move(s){where} makes room for {what}"


def no_room(doc: dict[str, Any], max_moves: int, host: str | None) -> NoRoomError | None:
    """A ``--make-room-for`` plan without moves (its document ``doc``): None when the shape already fits,
    else the refusal (exit 5), carrying the document."""
    if doc["before"] == 0:
        return None
    return NoRoomError(
        room_words(max_moves, host, "the shape"),
        hint="allow more moves (--max-moves N), release VMs, or ask for a smaller shape", plan=doc,
    )
