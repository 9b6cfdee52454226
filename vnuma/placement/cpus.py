"""Which pCPUs of one cell a VM gets, per CPU and thread policy.

Pure: no I/O; reads a :class:`CellState`, never changes it (the fleet does
when the placement is added). Every picker succeeds whenever
:meth:`CellState.capacity` says the cell has room, so the fit can decide on
capacities alone and pick pCPUs only for the chosen host.

* ``prefer``: sibling pairs from whole free cores first (the guest then sees
  ``threads=2``); an odd vCPU, or vCPUs beyond the free cores, go to the
  tenant's own half-used cores first, then split free cores.
* ``isolate``: one whole free core per vCPU, pinned to its first thread;
  the other threads stay empty.
* ``require``: sibling pairs only (from the tenant's own partly used cores
  with two free threads, then whole free cores).
* ``shared``: the tenant's usable shared pool of the cell, grown with its
  own half-used cores and then whole free cores until it has at least
  ``vcpus`` pCPUs. The pool is not overcommit-limited in this version.
* ``mixed``: the cell's dedicated vCPUs are picked as ``dedicated`` ones,
  then its floating vCPUs as ``shared`` ones, around those pins (the
  capacity rule, :meth:`CellState.capacity`, leaves room for both).

An isolated emulator pCPU follows the thread policy: a whole core under
``isolate``, one thread otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from vnuma.placement.ledger.cell import CellState, CoreState
from vnuma.placement.model import ThreadPolicy


@dataclass(frozen=True, slots=True)
class Pick:
    """pCPUs for one guest cell: ``pins[i]`` runs vCPU i; ``paired``: pins come in sibling pairs."""

    pins: tuple[int, ...]
    emulator: int | None
    paired: bool


def _own_cores(cell: CellState, bucket: str) -> list[CoreState]:
    return [c for c in cell.cores if c.bucket == bucket]


def _free_cores(cell: CellState) -> list[CoreState]:
    return [cell.cores[i] for i in sorted(cell.free_cores)]


def _singles(holes: list[int], opened: list[int], fresh: list[CoreState]) -> Iterator[int]:
    yield from holes
    yield from opened
    for core in fresh:
        yield from core.cpus


def pick_dedicated(cell: CellState, bucket: str, policy: ThreadPolicy, vcpus: int, emulator: bool) -> Pick:
    """Pins for ``vcpus`` dedicated vCPUs (and one emulator pCPU if asked) on one cell."""
    if policy is ThreadPolicy.ISOLATE:
        cores = _free_cores(cell)[: vcpus + int(emulator)]
        pins = tuple(c.cpus[0] for c in cores[:vcpus])
        return Pick(pins, cores[vcpus].cpus[0] if emulator else None, False)
    own = _own_cores(cell, bucket)
    free = _free_cores(cell)
    pairs: list[int] = []
    opened: list[int] = []
    wanted = vcpus // 2
    if policy is ThreadPolicy.REQUIRE:
        for core in own:
            threads = sorted(core.free)
            while wanted and len(threads) >= 2:
                pairs += threads[:2]
                threads = threads[2:]
                wanted -= 1
    holes = sorted(t for core in own for t in core.free if t not in pairs)
    fresh: list[CoreState] = []
    for core in free:
        if not wanted or len(core.cpus) < 2:
            fresh.append(core)
            continue
        threads = list(core.cpus)
        while wanted and len(threads) >= 2:
            pairs += threads[:2]
            threads = threads[2:]
            wanted -= 1
        opened += threads
    singles = _singles(holes, opened, fresh)
    rest = [next(singles) for _ in range(vcpus - len(pairs))]
    extra = next(singles) if emulator else None
    return Pick(tuple(pairs + rest), extra, not rest and bool(pairs))


def pick_shared(cell: CellState, bucket: str, vcpus: int, pinned: frozenset[int] = frozenset()) -> tuple[int, ...]:
    """The float set of a shared VM's guest cell (at least ``vcpus`` pCPUs).

    ``pinned``: what the same VM takes of the cell exclusively just before (a ``mixed`` VM's pins, with
    the threads ``isolate`` keeps empty), never floated over; whole free cores it opened count as its own.
    """
    own = _own_cores(cell, bucket)
    opened = [core for core in _free_cores(cell) if not pinned.isdisjoint(core.cpus)]
    pool = sorted(t for core in own for t in core.shared)
    for t in sorted(t for core in own + opened for t in core.free if t not in pinned):
        if len(pool) >= vcpus:
            break
        pool.append(t)
    for core in _free_cores(cell):
        if len(pool) >= vcpus:
            break
        if pinned.isdisjoint(core.cpus):
            pool += core.cpus
    return tuple(sorted(pool))


def pinned_by(cell: CellState, pick: Pick, policy: ThreadPolicy) -> frozenset[int]:
    """The pCPUs of ``cell`` a pick keeps from every other use (``isolate``: the whole cores of its pins)."""
    pins = frozenset(pick.pins) | ({pick.emulator} if pick.emulator is not None else set())
    if policy is ThreadPolicy.ISOLATE:
        return frozenset(t for cpu in pins for t in cell.core(cpu).cpus)
    return pins
