"""Rebalance planner: an ordered list of VM moves that improves an objective.

Pure: no I/O, deterministic for a given state (the only outside input is the
optional ``clock`` used for the time limit). A move re-places one VM: new
cells and pCPUs on its host, or another host. Each move is a real
:func:`~vnuma.placement.engine.place` on the state the earlier moves left,
with the VM itself removed first, so every intermediate state is valid by
construction: replaying the moves in order (remove the VM, add its new
placement) never needs capacity that is not free at that step. Only VMs
whose devices are all GPUs and recorded NICs move (:func:`is_movable`); each VM moves at most
once per plan in ``room``, and a greedy step may move a VM again only if
that gains again. A move asks the VM's own request again, as it was asked
(:func:`vnuma.placement.kept.move_request`): a VM placed with ``numa_nodes`` N
keeps N guest cells of the sizes it asked; only one placed with ``auto`` may
change its cell count; its GPUs go where its ``--gpu-affinity`` lets them.

Objectives (lower is better; ``Plan.before``/``after`` are their values):

* ``locality``: per VM, the cells it uses beyond the fewest the engine gives
  it (with its own guest shape, so an explicit N is never charged) on an
  empty host of its shape (with its GPUs on those cells when that
  fits, so a 2-GPU VM on one-GPU cells is not charged for needing two
  cells), plus its GPUs off its own cells, plus its GPU–NIC pairs worse
  than the level its NICs were asked within. Greedy:
  each step tries only the VMs with a positive cost, highest cost first, as
  a re-pin on their own host and, on a multi-host fleet, wherever the engine
  puts them, and keeps the move that lowers the total most (ties: less memory to
  migrate, so a re-pin beats a migration, then VM name); a VM whose cost is
  below the best gain found is not tried (a move gains at most its VM's
  cost). Work: at most ``max_moves`` x 4C engine calls for C VMs with a
  positive cost. ``optimal``: the total reached 0, the lower bound.
  With ``solver="cp-sat"`` the moves are chosen together instead
  (:mod:`.joint`): a VM may leave cells another VM needs, which no single
  greedy step does (the move gains nothing by itself).
* ``room``: 0 when ``make_room_for`` fits, else 1. The fewest moves that
  let it in, by iterative deepening (depth 1, 2, .. ``max_moves``). The
  shape lands on one host and moves only take capacity elsewhere, so a plan
  is searched per *target host*, moving only that host's VMs. Narrowing, by
  a capacity bound per host (a necessary condition: pCPUs, memory and GPUs
  free on the host, and per cell for an explicit ``numa_nodes`` N at least
  N cells with a 1/N share, counting what the k largest departures would
  free, per resource): a host is a target only when the bound holds with k
  = the moves left; a search node is cut, and a VM's move not tried, when
  the bound fails for the moves left after it. Target hosts are searched
  by the fewest moves their bound allows, then name. A VM's candidate
  moves are a re-pin onto other cells of its host and, on a multi-host
  fleet, the engine's choice with its whole host blocked; smallest memory
  first. Work: per depth d and target host with V movable VMs at most
  (2V)^d engine calls, cut by the bound, by states already seen and by the
  time limit. ``optimal``: every shallower depth was searched completely,
  so the plan has the fewest moves among those the search considers (or no
  plan within ``max_moves`` exists there). Not considered: chains through
  other hosts (a VM leaving another host so one of the target's VMs can
  move there). With ``solver="cp-sat"`` (:mod:`.roomsolver`): the shape's
  host and cells and the moves that free them chosen together over several
  target hosts, the search's plan as the first answer; fewest moves, then
  least memory to migrate.
* ``drain``: the VMs on one host, to be 0. Each VM moves once, largest
  first (vCPUs, then memory, then devices), to where the engine places it
  with that host avoided (its guest shape kept, as every move); a VM that
  fits on no other host, holds devices that do not move, comes after
  ``max_moves`` or is not reached within the time limit stays, with the
  reason (``Plan.left``). The VMs of an affine group move together, to one
  host (:func:`.drain.together`; consecutive moves, each admitted when
  carried out with the group's other arriving VMs not counted elsewhere).
  Work: one explained engine call per VM on the host (up to 3 per VM of a
  group that does not fit whole on the engine's first choice). ``optimal``:
  every VM leaves.
  With ``solver="cp-sat"`` the drain is one assignment problem for OR-Tools
  CP-SAT instead (:mod:`.solver`): every VM's destination chosen together,
  the most VMs moved, then the best locality; the plan carries the solver's
  gap to its bound. An affine group is one unit of the model: its
  candidates put all its VMs on one host, and its move counts its VMs.
* ``spread-tenants``: for each tenant and host where the tenant has n >= 2
  VMs, its *crowded* VMs (those sharing a host cell, i.e. a memory
  controller, with another VM of the same tenant) minus the unavoidable
  max(0, n - C + 1) when n exceeds the host's C CPU cells (pigeonhole);
  summed over tenants and hosts. Greedy like ``locality``: candidates are
  only the crowded VMs of (tenant, host) pairs with a positive value; each
  is tried as a re-pin onto cells none of its tenant's other VMs on that
  host use and, on a multi-host fleet, the engine's choice on another host
  (its own blocked). The move that lowers the total most wins (ties: less
  memory to migrate, then VM name); its reason names the shared cells, the
  VMs it shared them with and the value before/after on the touched hosts.
  Work: at most ``max_moves`` x 2C engine calls for C candidates.
  ``optimal``: the total reached 0, the lower bound (VMs spanning several
  cells may keep a positive value no move can remove: then not proven).
  With ``solver="cp-sat"`` (:mod:`.joint`, :mod:`.terms`): the moves chosen
  together, crowding and the pigeonhole credit written over the choices.

* ``fragmentation``: the CPU cells, over all hosts, that are partly used
  (some VM uses the cell and some of its placeable threads are free): each
  one is room a whole-cell VM cannot use. Greedy like ``locality``:
  candidates are the movable VMs on partly used cells, smallest first (at
  most 32 per step); each is tried as a re-pin on its host with its own
  cells blocked and, on a multi-host fleet, wherever the engine puts it with
  its host blocked (``pack`` fills partly used cells first). The move that
  empties or fills the most partly used cells wins (ties: less memory to
  migrate, then VM name). Work: at most ``max_moves`` x 64 engine calls.
  ``optimal``: the total reached 0 (every used cell full).
  With ``solver="cp-sat"`` (:mod:`.joint`): the moves chosen together, each
  CPU cell a candidate touches counted partly used when the chosen VMs use
  it without filling its free threads.

* ``bandwidth``: measured memory bandwidth (``FleetState.loads``, from
  ``vnuma stats --bandwidth``) spread evenly over the fleet's L3 domains.
  Domains: every (host, L3 id) of the hosts in the fleet state that have
  resctrl facts (``cell_domains(host)`` non-empty). Hosts without L3
  domains are neither measured nor a destination (their VMs are ignored;
  moves add those hosts to ``avoid_hosts``). A VM's load per domain, for a
  placement p with ``state.loads[p.vm] = VmLoad(host, total_bps, domains,
  taken_at)``: if ``load.host == p.host`` and the set of ids in
  ``load.domains`` equals the set of L3 ids p's pCPUs touch, the measured
  split (``load.domains``); else ``total_bps`` split over the L3 domains
  p's pCPUs (all pCPUs of its cells, ``c.pcpus``) touch, in proportion to
  its pCPUs on each. VMs without a load carry nothing. share = (sum of all
  domains' loads) / (number of domains): the fleet's fair share; constant
  under moves since moves stay among domain hosts (but for a VM whose
  measured split does not add up to its ``total_bps``, or whose pCPUs
  touch no L3 domain: its move recomputes every domain). The value: sum
  over domains of max(0, load - share), in MB/s (10**6 bytes/s), rounded to int. Greedy like ``locality``: each
  step, candidates are the movable VMs with load on an over-share domain,
  heaviest (``total_bps``) first, at most 16 per step; each is tried as a
  re-pin on its own host avoiding the cells whose L3 domains are at or over
  the share (its own included: it leaves them) and, on a multi-host fleet,
  on each of up to 4 other domain hosts (least loaded first by their most
  loaded domain, then name) avoiding that host's cells at or over the share
  (GPUs ``required``, then ``preferred`` if that finds nothing). The exact
  gain (the value before less after the move, only the touched domains
  recomputed) decides: the largest wins (ties: less memory to migrate, then
  VM name); its reason names the most loaded domain it leaves, the share,
  the VM's measured total and when, and the value before/after. Work: at
  most ``max_moves`` x 16 x 5 engine calls (twice that for VMs with GPUs).
  ``optimal``: the value reached 0 (every domain at or under the share).

``time_limit_s`` with a ``clock`` (e.g. ``time.monotonic``): the best plan
found when the time is up comes back, ``optimal`` false unless proven.

``solver="cp-sat"`` (``drain``, ``locality``, ``room``, ``fragmentation``,
``spread-tenants``; ``bandwidth`` is refused by :func:`check_solver`): one
assignment problem for OR-Tools CP-SAT over the engine's own candidates per VM (stay, re-pin on its host, its best
other hosts), the admission rule's per-cell counts as capacities, the goal
with each move as a cost below one unit of it, at most ``max_moves`` moves
(the shared core: :mod:`.assign`). The chosen moves are replayed through the
engine in order, each confined to its chosen host and cells and admitted on
the state the earlier ones left; a move into room another move frees is
retried after it (replay passes), and what still fails is cut from the model,
which is solved again. The hand-written plan is computed first (the solver's
first answer, and the yardstick): a solver plan is never the worse one, and
when it would be, the hand-written plan comes back with ``Plan.solver``
``search``. ``Plan.gap``: 0.0 when CP-SAT proved its answer optimal for its
model, else the distance to its best bound. No assignment within the time
limit: ``drain`` leaves every VM (with the reason), ``room`` returns the
search's plan, the others raise
:class:`~vnuma.errors.NoRoomError` (exit 5).
"""

from __future__ import annotations

from collections.abc import Callable

from vnuma.errors import InvalidInputError
from vnuma.placement.model import VmRequest
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.bandwidth import plan_bandwidth
from vnuma.placement.rebalance.base import Exclusion, FleetState, Move, Plan, VmLoad, is_movable, move_cost_kib
from vnuma.placement.rebalance.drain import plan_drain
from vnuma.placement.rebalance.fragmentation import plan_fragmentation
from vnuma.placement.rebalance.joint import plan_joint
from vnuma.placement.rebalance.locality import plan_locality
from vnuma.placement.rebalance.room import plan_room
from vnuma.placement.rebalance.roomsolver import plan_room_cpsat
from vnuma.placement.rebalance.search import Search
from vnuma.placement.rebalance.solver import plan_drain_cpsat
from vnuma.placement.rebalance.spread import plan_spread

SOLVERS = ("search", "cp-sat")

__all__ = [
    "SOLVERS",
    "Exclusion",
    "FleetState",
    "Move",
    "Objective",
    "Plan",
    "VmLoad",
    "check_limits",
    "check_solver",
    "default_solver",
    "is_movable",
    "move_cost_kib",
    "plan_moves",
]


SOLVED = (Objective.DRAIN, Objective.LOCALITY, Objective.ROOM, Objective.FRAGMENTATION, Objective.SPREAD_TENANTS)
"""The objectives ``--solver cp-sat`` plans."""
CP_SAT_FIRST = (Objective.DRAIN, Objective.LOCALITY, Objective.ROOM)
"""The objectives CP-SAT plans by default: ``bench/bench_drain.py`` and ``bench/bench_solver.py`` measure its
plans never worse than the search's, often better, for at most ~0.7 s more on fleets of up to 1,000 hosts.
The search stays the default where it is measured better: ``fragmentation`` and ``spread-tenants`` (CP-SAT
uses the whole time limit on small dense fleets without closing its bound) and ``bandwidth`` (not modelled)."""


def default_solver(objective: Objective) -> str:
    """The solver an objective is planned with when none is asked: ``cp-sat`` for :data:`CP_SAT_FIRST`."""
    return "cp-sat" if objective in CP_SAT_FIRST else "search"


def check_solver(solver: str, objective: Objective) -> None:
    """Refuse an unknown solver, or ``cp-sat`` for an objective it does not plan (InvalidInputError)."""
    if solver not in SOLVERS:
        raise InvalidInputError(f"unknown solver {solver!r}; use {' or '.join(SOLVERS)}")
    if solver != "cp-sat" or objective in SOLVED:
        return
    raise InvalidInputError(
        f"--solver cp-sat plans {', '.join(str(o) for o in SOLVED)}, not {objective}",
        hint="plan it with the search: `vnuma rebalance --solver search`",
    )


def check_limits(max_moves: int | None, time_limit_s: float) -> None:
    """Refuse a negative move limit or a time limit that is not positive (InvalidInputError)."""
    if max_moves is not None and max_moves < 0:
        raise InvalidInputError(f"--max-moves must be 0 or more, got {max_moves}")
    if time_limit_s <= 0:
        raise InvalidInputError(f"--time-limit must be positive, got {time_limit_s}")


def plan_moves(
    fleet_state: FleetState,
    objective: Objective,
    max_moves: int,
    make_room_for: VmRequest | None = None,
    time_limit_s: float = 10.0,
    *,
    clock: Callable[[], float] | None = None,
    drain: str | None = None,
    solver: str | None = None,
) -> Plan:
    """Plan at most ``max_moves`` moves improving ``objective``; the best found within the time limit.

    ``clock`` (seconds, e.g. ``time.monotonic``) enforces ``time_limit_s``;
    without it the search runs to its work bound (see the module docstring).
    ``drain`` names the host the ``drain`` objective empties. ``solver``:
    None (:func:`default_solver`), ``search`` (written here), or ``cp-sat`` (OR-Tools, :mod:`.solver`: the
    ``drain``, ``locality``, ``fragmentation`` and ``spread-tenants``: :data:`SOLVED`).

    Raises:
        InvalidInputError: ``room`` without ``make_room_for``, ``drain`` without a
            host the fleet has, bad limits (:func:`check_limits`), or a solver that
            does not plan the objective (:func:`check_solver`).
        NotFoundError: ``make_room_for.host`` is not in the fleet.
        NoRoomError: ``cp-sat`` found no plan within the time limit (nothing planned).
    """
    check_limits(max_moves, time_limit_s)
    solver = solver or default_solver(objective)
    check_solver(solver, objective)
    search = Search(fleet_state, time_limit_s, clock)
    if objective is Objective.DRAIN:
        if drain is None or drain not in search.on_host:
            raise InvalidInputError(f"objective drain needs a host of the fleet, got {drain!r}")
        if solver == "cp-sat":
            return plan_drain_cpsat(search, drain, max_moves, time_limit_s)
        return plan_drain(search, drain, max_moves)
    if solver == "cp-sat" and objective is not Objective.ROOM:
        return plan_joint(search, objective, max_moves, time_limit_s)
    if objective is Objective.LOCALITY:
        return plan_locality(search, max_moves)
    if objective is Objective.SPREAD_TENANTS:
        return plan_spread(search, max_moves)
    if objective is Objective.FRAGMENTATION:
        return plan_fragmentation(search, max_moves)
    if objective is Objective.BANDWIDTH:
        return plan_bandwidth(search, max_moves)
    if make_room_for is None:
        raise InvalidInputError(
            "objective room needs a VM shape",
            hint='e.g. `vnuma rebalance --objective room --make-room-for "vcpus=32,memory=256GiB"`'
        )
    if solver == "cp-sat":
        return plan_room_cpsat(search, make_room_for, max_moves, time_limit_s)
    return plan_room(search, make_room_for, max_moves)
