"""How a host and its cells are chosen for a request: the filters, as named units, in pipeline order.

Pure: no I/O, reads the ledger only. An :class:`~vnuma.placement.attempt.Attempt` is one request
on one host with ``n`` guest cells; each filter narrows its candidate
cells (or page sizes) and returns a :class:`Rejection` tagged with its
name when too few are left, or None. :data:`PIPELINE` lists them:

1. per host: ``host`` (the one asked for), ``avoid`` (hosts the request must avoid),
   ``cordoned`` (admission's cordon rule, asked before any cell is looked at),
   ``group`` (a replica group's affinity: only the host its other VMs are
   on, or anti-affinity; under ``cell`` the host view also drops the cells
   the group's other VMs hold), ``resctrl-host`` (cache
   or bandwidth allocation where a slice is asked), ``cold-memory`` (a
   memory-only cell of a capacity tier with room, where a cold tier is asked:
   :mod:`vnuma.placement.cold`; :func:`vnuma.placement.fit.fit_host` asks it
   too, as the pre-filtered path runs no host filter and its arrays know no
   memory-only cell);
2. per guest-cell count ``n``: ``numa-nodes`` (enough CPU cells), ``smt``
   (sibling pairs for ``require``), ``cell-isolation`` (cells the tenant may
   use at all), ``cell-cpus`` (``n`` cells with the vCPUs per cell),
   ``gpu-reserve`` (the same after ``gpu-first`` keeps free GPUs' shares),
   ``resctrl`` (a class of service left on the host, cells whose L3 domains
   have room for the cache slice and bandwidth cap asked), ``emulator`` (a
   cell with room for an isolated emulator pCPU),
   ``page-size`` (page sizes that divide the memory per cell);
3. per page size, largest first: ``cell-pages`` (``n`` cells with the pages),
   ``emulator-pages`` (the emulator's cell among them), then
   ``gpus`` (:mod:`.fit`: the closest cell set with the GPUs, refusing
   with ``gpu-strand`` when only ``gpu-first``'s no-stranding rule is in the way).

Sizing a GPU-only request (``size``) happens before, in :mod:`.request`;
admission (:mod:`.ledger.admit`) has the last word on the placement built
from the chosen cells. :data:`STAGE` orders check names by how far a
request got, so the closest rejection can be told
(:mod:`vnuma.placement.refusal`). The page filters (``page-size``,
``cell-pages``, ``emulator-pages``) are in :mod:`.pagefilters`.
"""

from __future__ import annotations

from typing import Protocol

from vnuma.placement.attempt import Attempt, Filter
from vnuma.placement.cold import refusal as cold_refusal
from vnuma.placement.groups import group_cells, group_refusal, occupied
from vnuma.placement.ledger.admit import ADMISSION
from vnuma.placement.ledger.cell import CellState
from vnuma.placement.ledger.cpuchecks import cordon_refusal
from vnuma.placement.ledger.host import HostState
from vnuma.placement.model import CpuPolicy, EmulatorThreads, ThreadPolicy, VmRequest
from vnuma.placement.pagefilters import CellPages, EmulatorPages, PageSize
from vnuma.placement.partitionchoice import room, shortage
from vnuma.placement.resctrl import cell_room, host_problem, host_room, wants
from vnuma.placement.result import Rejection


class HostFilter(Protocol):
    """A named filter on the host alone (before any cell is looked at)."""

    name: str

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Why ``hs`` cannot take ``req`` at all, or None."""
        ...


class RequestedHost:
    """``host``: only the host the request names (``--host``)."""

    name = "host"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject every other host."""
        if req.host is not None and hs.name != req.host:
            return Rejection(hs.name, self.name, f"not the requested host {req.host!r}")
        return None


class AvoidedHost:
    """``avoid``: hosts the request must stay off (``avoid_hosts``)."""

    name = "avoid"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject avoided hosts."""
        if hs.name in req.avoid_hosts:
            return Rejection(hs.name, self.name, "the request avoids this host")
        return None


class Cordoned:
    """``cordoned``: a cordoned host takes nothing (:func:`~vnuma.placement.ledger.cpuchecks.cordon_refusal`)."""

    name = "cordoned"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject a cordoned host."""
        refusal = cordon_refusal(hs)
        return None if refusal is None else Rejection(hs.name, self.name, refusal.reason, refusal.hint)


class Group:
    """``group``: a replica group's rule (:func:`~vnuma.placement.groups.group_refusal`): a host that is not
    the affine group's host, that holds a member under anti-affinity ``host``, or under ``cell`` on every
    CPU cell."""

    name = "group"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject a host the group's other VMs keep this one off."""
        if req.group is None:
            return None
        refused = group_refusal(hs, req.name, req.group, req.anti_affinity, None, req.affinity)
        if refused is not None:
            return Rejection(hs.name, self.name, refused.reason, refused.hint, refused.gist)
        taken = group_cells(hs, req.name, req.group, req.anti_affinity)
        if taken and all(c.id in taken for c in hs.cells):
            where = occupied(hs.group_index, req.group, req.name, req.anti_affinity)
            return Rejection(hs.name, self.name, f"group {req.group!r} (anti-affinity cell) holds every CPU cell "
                             f"of host {hs.name!r}", gist=f"group {req.group!r} (anti-affinity cell) holds every "
                             f"CPU cell of the host (it has VMs on {where})")
        return None


class ResctrlHost:
    """``resctrl-host``: a VM asking for a cache slice or a bandwidth cap only goes to a host with resctrl for it
    (:func:`~vnuma.placement.resctrl.host_problem`; the ways the host keeps are the cell filter's)."""

    name = "resctrl-host"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject a host without cache or bandwidth allocation."""
        problem = host_problem(hs.host, req, policy=False) if wants(req) else None
        return None if problem is None else Rejection(hs.name, self.name, problem.reason, problem.hint)


class ColdMemory:
    """``cold-memory``: a VM asking for a cold tier only goes to a host with a memory-only cell that may serve it
    and has the room (:func:`~vnuma.placement.cold.refusal`; which one is the build's choice)."""

    name = "cold-memory"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject a host without such a cell."""
        problem = cold_refusal(hs.shape.cold, hs.cold_free, req) if req.cold_memory_kib else None
        hint = "see the memory-only cells and their kinds in `vnuma host show`"
        return None if problem is None else Rejection(hs.name, self.name, problem, hint)


class NumaNodes:
    """``numa-nodes``: the host has at least ``n`` CPU cells."""

    name = "numa-nodes"

    def apply(self, a: Attempt) -> Rejection | None:
        """Reject hosts with fewer CPU cells than guest cells."""
        have = len(a.view.hs.cells)
        if a.n > have:
            return a.reject(self.name, f"has {have} CPU cell(s), the VM asks for {a.n}", missing=a.n - have)
        return None


class Smt:
    """``smt``: the ``require`` thread policy needs SMT siblings and an even vCPU count per cell."""

    name = "smt"

    def apply(self, a: Attempt) -> Rejection | None:
        """Reject hosts without sibling pairs, and odd per-cell counts."""
        req = a.view.req
        if req.cpu_policy is not CpuPolicy.DEDICATED or req.thread_policy is not ThreadPolicy.REQUIRE:
            return None
        if a.view.hs.width < 2:
            return a.reject(self.name, "has no SMT siblings; thread policy require needs sibling pairs")
        odd = next((v for v in a.vs if v % 2), None)
        if odd is not None:
            return a.reject(self.name, f"{odd} vCPUs per cell cannot be packed on sibling pairs")
        return None


class CellIsolation:
    """``cell-isolation``: the cells the tenant may use at all (and the request does not avoid)."""

    name = "cell-isolation"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the usable cells."""
        a.cells = [c for c in a.view.hs.cells if a.view.raw[c.id] >= 0]
        if not a.cells:
            return a.reject(
                self.name,
                "every CPU cell is used by a tenant with cell isolation (or, for a cell-isolated tenant, "
                "by other tenants), or avoided by the request",
            )
        if len(a.cells) < a.n:
            return _short(a, self.name, a.view.raw)
        return None


class CellCpus:
    """``cell-cpus``: ``n`` cells with the per-cell vCPUs, in the policy's units."""

    name = "cell-cpus"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the cells with room for ``v`` vCPUs."""
        raw = a.view.raw
        ok = [c for c in a.cells if raw[c.id] >= a.v]
        if len(ok) < a.n:
            return _short(a, self.name, raw)
        a.cells = ok
        return None


class GpuReserve:
    """``gpu-reserve``: under ``gpu-first`` a VM without GPUs leaves free GPUs' shares alone."""

    name = "gpu-reserve"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the cells with room beyond the reserve."""
        if not a.view.reserve:
            return None
        caps = a.view.caps
        ok = [c for c in a.cells if caps[c.id] >= a.v]
        if len(ok) < a.n:
            best = _most(a, caps)
            return a.reject(
                self.name,
                f"needs {a.n} cell(s) with {a.v} {a.view.unit()}; gpu-first keeps the rest for free GPUs "
                f"(most left: cell {best.id} with {caps[best.id]})",
                missing=_missing(a, caps),
            )
        a.cells = ok
        return None


class Slices:
    """``resctrl``: a VM asking for a cache slice or a bandwidth cap goes only where resctrl can give it
    (:func:`~vnuma.placement.resctrl.host_problem`) and a resctrl group is left on the host
    (:func:`~vnuma.placement.resctrl.host_room`: classes of service and monitoring IDs are host-wide), on
    cells whose every L3 domain has room for it (:func:`~vnuma.placement.resctrl.refusal`; a cell spanning
    several domains needs room on each)."""

    name = "resctrl"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the cells whose domains have room."""
        req, hs = a.view.req, a.view.hs
        if not wants(req):
            return None
        problem = host_problem(hs.host, req) or host_room(hs.host, hs.resctrl_use)
        if problem is not None:
            return Rejection(hs.name, self.name, problem.reason, problem.hint)
        ok, first = [], None
        room = a.view.slice_room
        for c in a.cells:
            if c.id not in room:
                room[c.id] = cell_room(hs.host, hs.resctrl_use, req, hs.shape.domains.get(c.id, ()))
            why = room[c.id]
            if why is None:
                ok.append(c)
            elif first is None:
                first = why
        if len(ok) < a.n:
            assert first is not None
            return Rejection(hs.name, self.name, f"{first.reason} (cells with room: {len(ok)}, needs {a.n})",
                             first.hint)
        a.cells = ok
        return None


class Emulator:
    """``emulator``: an isolated emulator pCPU needs a cell with room for one more."""

    name = "emulator"

    def apply(self, a: Attempt) -> Rejection | None:
        """Note the cells that can anchor the emulator pCPU (guest cell 0)."""
        if a.view.req.emulator_threads is not EmulatorThreads.ISOLATE:
            return None
        a.anchors = [c.id for c in a.cells if a.view.emulator_ok(c, a.v)]
        if not a.anchors:
            return a.reject(
                self.name, f"no cell has {a.v} {a.view.unit()} plus 1 for the isolated emulator thread"
            )
        return None


def _most(a: Attempt, caps: dict[int, int]) -> CellState:
    return max((c for c in a.view.hs.cells if a.view.raw[c.id] >= 0), key=lambda c: (caps[c.id], -c.id))


def _short(a: Attempt, check: str, caps: dict[int, int]) -> Rejection:
    """Too few cells with the vCPUs: name the best one."""
    best = _most(a, caps)
    unit = a.view.unit()
    have = sum(1 for c in a.cells if caps[c.id] >= a.v)
    missing = _missing(a, caps)
    if a.n == 1:
        return a.reject(check, f"cell {best.id}: needs {a.v} {unit}, {caps[best.id]} free", missing=missing)
    return a.reject(
        check,
        f"needs {a.n} cells with {a.v} {unit} each, {have} have them (most free: cell {best.id}, {caps[best.id]})",
        missing=missing,
    )


def _missing(a: Attempt, caps: dict[int, int]) -> int:
    """The vCPUs the ``n`` usable cells with the most room lack for ``v`` each (a missing cell lacks all ``v``)."""
    most = sorted((max(0, caps[c.id]) for c in a.view.hs.cells if a.view.raw[c.id] >= 0), reverse=True)[: a.n]
    return sum(max(0, a.v - k) for k in most) + a.v * (a.n - len(most))


class Partitions:
    """``partitions``: a VM asking GPU partitions only goes to a host whose GPUs can hold them all now
    (:func:`~vnuma.placement.partitions.room`; which GPUs, near which cells, is the fit's choice)."""

    name = "partitions"

    def apply(self, hs: HostState, req: VmRequest) -> Rejection | None:
        """Reject a host without room for the partitions."""
        ask = req.partition
        found = room(hs, ask) if ask is not None else 0
        if ask is None or found >= ask.count:
            return None
        short = shortage(hs, tuple(c.id for c in hs.cells), req, found)
        return Rejection(hs.name, self.name, short.reason, short.hint, short.gist, short.missing)


COLD_MEMORY = ColdMemory()
PARTITIONS = Partitions()
HOST_FILTERS: tuple[HostFilter, ...] = (
    RequestedHost(), AvoidedHost(), Cordoned(), Group(), ResctrlHost(), COLD_MEMORY, PARTITIONS
)
"""Run once per host."""
CELL_FILTERS: tuple[Filter, ...] = (
    NumaNodes(),
    Smt(),
    CellIsolation(),
    CellCpus(),
    GpuReserve(),
    Slices(),
    Emulator(),
    PageSize(),
)
"""Run per guest-cell count."""
SIZE_FILTERS: tuple[Filter, ...] = (CellPages(), EmulatorPages())
"""Run per page size; then :mod:`.fit` picks the cell set."""

PIPELINE: tuple[str, ...] = (
    *(f.name for f in HOST_FILTERS),
    "size",
    *(f.name for f in CELL_FILTERS),
    *(f.name for f in SIZE_FILTERS),
    "gpus",
    "gpu-strand",
    "nic-affinity",
    *(unit.name for unit in ADMISSION),
)
"""Every check name in the order a request meets it: the filters, then admission's checks."""
STAGE: dict[str, int] = {}
for _i, _name in enumerate(PIPELINE):
    STAGE.setdefault(_name, _i)  # a rule both filtered and admitted (cordoned) ranks where the filter meets it
"""How far a request got on a host, by the check that stopped it (higher: closer to fitting)."""
