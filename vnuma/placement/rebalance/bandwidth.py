"""The ``bandwidth`` objective: measured memory bandwidth spread evenly over the fleet's L3 domains.

Pure: no I/O. Definition and work bound: see :mod:`vnuma.placement.rebalance`. Loads are exact
fractions of bytes/s (no float drift between a step's gain and the total recomputed later); only the
objective's value is rounded, to whole MB/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from vnuma.placement.kept import move_request
from vnuma.placement.model import Placement
from vnuma.placement.objectives import Objective
from vnuma.placement.rebalance.base import Move, Plan, VmLoad, is_movable, make_move
from vnuma.placement.rebalance.search import Search, greedy
from vnuma.placement.resctrl import cell_domains, domains_of
from vnuma.topology import Host

CANDIDATES = 16
"""VMs tried per step (the heaviest with load on an over-share domain)."""
OTHER_HOSTS = 4
"""Other domain hosts a candidate is tried on (least loaded first)."""
MB = 10**6

Domain = tuple[str, int]  # (host, L3 id)
Loads = dict[Domain, Fraction]


def domain_hosts(search: Search) -> dict[str, tuple[int, ...]]:
    """The hosts with resctrl facts, each with its L3 ids (those its CPU cells touch); name order."""
    found = {h: sorted({i for ids in cell_domains(search.fleet.host(h)).values() for i in ids}) for h in search.on_host}
    return {h: tuple(ids) for h, ids in sorted(found.items()) if ids}


def split(host: Host, p: Placement, load: VmLoad | None) -> Loads:
    """What ``p`` carries per domain: the measured split when it was measured on this host and these L3
    domains, else its total in proportion to its pCPUs on each domain they touch (none without a load)."""
    if load is None:
        return {}
    cpus = domains_of(host, (x for c in p.cells for x in c.pcpus))
    if load.host == p.host and {i for i, _ in load.domains} == cpus.keys():
        measured: Loads = {}
        for i, bps in load.domains:
            measured[(p.host, i)] = measured.get((p.host, i), Fraction(0)) + bps
        return measured
    n = sum(cpus.values())
    return {(p.host, i): Fraction(load.total_bps * k, n) for i, k in cpus.items()}


def measure(search: Search, hosts: Mapping[str, tuple[int, ...]]) -> tuple[Loads, dict[str, Loads]]:
    """Every domain's load on the working fleet, and each VM's split (VMs on domain hosts only)."""
    loads: Loads = {(h, i): Fraction(0) for h, ids in hosts.items() for i in ids}
    by_vm: dict[str, Loads] = {}
    for h in hosts:
        for p in search.placements_on(h):
            mine = by_vm[p.vm] = split(search.fleet.host(h), p, search.loads.get(p.vm))
            for d, bps in mine.items():
                loads[d] += bps
    return loads, by_vm


def share_of(loads: Loads) -> Fraction:
    """The fair share: all domains' load over their number."""
    return sum(loads.values(), Fraction(0)) / len(loads) if loads else Fraction(0)


def excess(loads: Loads, share: Fraction) -> Fraction:
    """The load above the share, summed over ``loads``' domains (bytes/s)."""
    return sum((max(Fraction(0), bps - share) for bps in loads.values()), Fraction(0))


def mbs(bps: Fraction) -> int:
    return round(bps / MB)


def plan_bandwidth(search: Search, max_moves: int) -> Plan:
    """Greedy: each step makes the move that lowers the excess over the fair share most."""
    loads, _ = measure(search, domain_hosts(search))
    return greedy(search, Objective.BANDWIDTH, mbs(excess(loads, share_of(loads))), _best_move, max_moves)


def _best_move(search: Search) -> tuple[int, Move] | None:
    hosts = domain_hosts(search)
    loads, by_vm = measure(search, hosts)
    share = share_of(loads)
    total = excess(loads, share)
    over = {d for d, bps in loads.items() if bps > share}
    movable = [p for h in hosts for p in search.placements_on(h)
               if is_movable(p) and any(bps > 0 and d in over for d, bps in by_vm[p.vm].items())]
    best: tuple[tuple[int, int, str], int, Move] | None = None
    for p in sorted(movable, key=lambda p: (-search.loads[p.vm].total_bps, p.vm))[:CANDIDATES]:
        mine = by_vm[p.vm]
        for new in _targets(search, p, hosts, loads, share):
            theirs = split(search.fleet.host(new.host), new, search.loads[p.vm])
            after = _after(loads, share, total, mine, theirs)
            gain = mbs(total) - mbs(after)
            if gain <= 0:
                continue
            hot = max(sorted(d for d in mine if d in over), key=mine.__getitem__)
            move = make_move(p, new, _reason(p, new, search.loads[p.vm], hot, loads[hot], share, total, after))
            key = (-gain, move.cost_kib, p.vm)
            if best is None or key < best[0]:
                best = (key, gain, move)
    return None if best is None else (best[1], best[2])


def _targets(
    search: Search, p: Placement, hosts: Mapping[str, tuple[int, ...]], loads: Loads, share: Fraction
) -> list[Placement]:
    """A re-pin on its host and, on a multi-host fleet, a move to each of the least loaded other domain hosts;
    each off the host's cells whose L3 domains are at or over the share (on its own host its own domains too:
    a VM alone heavy enough to put its domain over the share leaves it)."""
    others = sorted((h for h in hosts if h != p.host), key=lambda h: (max(loads[(h, i)] for i in hosts[h]), h))
    avoid = frozenset(search.on_host) - hosts.keys()
    found = []
    for h in [p.host, *others[:OTHER_HOSTS]]:
        cells = cell_domains(search.fleet.host(h))
        hot = {(h, c) for c, ids in cells.items() if any(loads[(h, i)] >= share for i in ids)}
        req = move_request(p, search.iso(p.tenant))
        new = search.refit(p, replace(req, host=h, avoid_hosts=avoid, avoid_cells=frozenset(hot)))
        if new is not None:
            found.append(new)
    return found


def _after(loads: Loads, share: Fraction, total: Fraction, mine: Loads, theirs: Loads) -> Fraction:
    """The excess once the VM carries ``theirs`` instead of ``mine``: only the touched domains recomputed,
    unless its load on the domains changes in all (a measured split apart from its total), which moves the share."""
    touched = {d: loads[d] - mine.get(d, 0) + theirs.get(d, 0) for d in mine.keys() | theirs.keys()}
    if sum(mine.values()) != sum(theirs.values()):
        moved = loads | touched
        return excess(moved, share_of(moved))
    return total - excess({d: loads[d] for d in touched}, share) + excess(touched, share)


def _reason(
    old: Placement, new: Placement, load: VmLoad, hot: Domain, carries: Fraction, share: Fraction,
    total: Fraction, after: Fraction,
) -> str:
    where = f" on {load.host}" if load.host != old.host else ""
    to = f"cells {list(new.host_cells)}" if new.host == old.host else f"host {new.host} cells {list(new.host_cells)}"
    return (
        f"L3 domain {hot[1]} of {hot[0]} carries {mbs(carries)} MB/s, share {mbs(share)} MB/s; "
        f"{old.vm} measured {mbs(Fraction(load.total_bps))} MB/s{where} at {load.taken_at}; to {to}; "
        f"excess {mbs(total)} -> {mbs(after)} MB/s"
    )
