"""Benchmark the rebalance planner (``plan_moves``) on fragmented fleets.

Usage (from the repository root):
    .venv/bin/python bench/bench_rebalance.py [--traces DIR] [--seed N] [--max-moves N] [--time-limit S]

Every fleet is fragmented the same way: place a stream of VMs with the
engine (``pack``, core isolation), then release a seeded random third of
them. Then each objective is planned on it with the time limit the CLI uses
(default 10 s) and the process clock, and one row is printed per fleet and
objective: VMs, objective before -> after, moves, memory to migrate, seconds
for the plan, and whether it is proven optimal.

* synthetic: 1 host and 100 hosts, each 4 cells x 16 cores x 2 threads,
  256 GiB and 2 GPUs per cell, 16 tenants; 22 and 2,000 requests (more
  than fit), so 10 and 1,012 VMs stay after the release. VMs are 2..24
  vCPUs, some with GPUs; 30 % of those with 8 or more are asked as 2 guest
  cells (work for ``locality``), the rest auto.
* traces: every ``*.json`` trace in ``--traces`` (default: the
  repository's ``examples/traces``), placed with ``vnuma.simulate.run``.

``room`` is planned for two shapes: the issue's example (32 vCPUs, 256 GiB,
2 GPUs, cells auto) and one that does not fit but may after moves: for the
fewest guest cells N at which not even N whole cells are free anywhere, N
cells with 4 x N more vCPUs than the largest N-cell VM that fits now (at
most N whole cells), 16 GiB per cell. No such row when some host has every
cell free (then every shape that fits a host fits already).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from tests.builders import make_host
from vnuma.placement.engine import place
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.rebalance import FleetState, Objective, Plan, plan_moves
from vnuma.simulate import load_trace, run
from vnuma.topology import KIB_PER_GIB, Host

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO / "examples" / "traces"
TENANTS = [f"tenant-{i:02d}" for i in range(16)]
SIZES = (2, 2, 4, 4, 6, 8, 8, 12, 16, 24)


def synthetic(hosts: int, vms: int, seed: int, release: float = 1 / 3) -> FleetState:
    """``hosts`` hosts of 4 cells, ``vms`` requests placed (pack) and a seeded share (a third) released."""
    fleet_hosts = [
        make_host(f"host-{i:03d}", cells=4, cores_per_cell=16, smt=2, gpus_per_cell=2,
                  memory_gib=256, hugepages_1g_gib=192, hugepages_2m_gib=32)
        for i in range(hosts)
    ]
    rng = random.Random(seed)
    isolation = dict.fromkeys(TENANTS, Isolation.CORE)
    fleet = Fleet(fleet_hosts, (), isolation)
    for i in range(vms):
        vcpus = rng.choice(SIZES)
        tenant = rng.choice(TENANTS)
        gpus = rng.choice((0, 0, 0, 1, 2)) if vcpus >= 8 else 0
        nodes = 2 if vcpus >= 8 and rng.random() < 0.3 else None
        req = VmRequest(f"vm-{i:05d}", tenant, vcpus, vcpus * rng.choice((2, 4)) * KIB_PER_GIB, gpus, nodes)
        chosen = place(req, fleet, Strategy.PACK, explain=False).chosen
        if chosen is not None:
            fleet.add(chosen, Isolation.CORE)
    return _release(tuple(fleet_hosts), fleet.placements(), isolation, rng, release)


def from_trace(path: Path, seed: int) -> tuple[str, FleetState]:
    """A trace placed with ``vnuma simulate``'s engine (pack, core isolation), a seeded third released."""
    trace = load_trace(path.read_bytes(), str(path))
    report = run(trace, Strategy.PACK, Isolation.CORE)
    placed = tuple(p for p in report.placements if p is not None)
    isolation = {r.tenant: Isolation.CORE for r in trace.requests}
    return trace.scenario, _release(trace.hosts, placed, isolation, random.Random(seed), 1 / 3)


def _release(
    hosts: tuple[Host, ...], placed: tuple[Placement, ...], isolation: dict[str, Isolation], rng: random.Random,
    share: float,
) -> FleetState:
    gone = set(rng.sample(range(len(placed)), int(len(placed) * share)))
    kept = tuple(p for i, p in enumerate(placed) if i not in gone)
    return FleetState(hosts, kept, isolation)


def room_shapes(state: FleetState) -> list[tuple[str, VmRequest]]:
    """The room requests for ``state``: the issue's example shape, and the smallest N-cell shape
    (N = 1, 2, ..) that does not fit now, 4 x N vCPUs over the largest N-cell VM that does."""
    fleet = Fleet(state.hosts, state.placements, state.isolation)
    example = VmRequest("room", None, 32, 256 * KIB_PER_GIB, 2)
    shapes = [("room 32 vCPUs, 256 GiB, 2 GPUs", example)]
    whole = min(len(c.cpus) for h in state.hosts for c in h.cells if c.cpus)
    most = min(sum(1 for c in h.cells if c.cpus) for h in state.hosts)
    for n in range(1, most + 1):
        probe = VmRequest("room", None, n, 16 * n * KIB_PER_GIB, numa_nodes=n)
        low, high = 0, whole  # per-cell vCPUs: low fits (0 trivially), high + 1 never does
        while low < high:
            mid = (low + high + 1) // 2
            if place(replace(probe, vcpus=mid * n), fleet, Strategy.PACK, explain=False).chosen is not None:
                low = mid
            else:
                high = mid - 1
        if low < whole:
            vcpus = n * min(whole, low + 4)
            shapes.append((f"room {vcpus} vCPUs on {n} cell{'s' if n > 1 else ''}", replace(probe, vcpus=vcpus)))
            break
    return shapes


def plans(state: FleetState, max_moves: int, limit: float) -> Iterator[tuple[str, Plan, float]]:
    """Each objective planned on ``state`` (room once per shape): (label, plan, seconds)."""
    runs: list[tuple[str, Objective, VmRequest | None]] = [
        (str(Objective.LOCALITY), Objective.LOCALITY, None),
        *((label, Objective.ROOM, shape) for label, shape in room_shapes(state)),
        (str(Objective.SPREAD_TENANTS), Objective.SPREAD_TENANTS, None),
        (str(Objective.FRAGMENTATION), Objective.FRAGMENTATION, None),
    ]
    for label, objective, shape in runs:
        start = time.perf_counter()
        plan = plan_moves(state, objective, max_moves, shape, limit, clock=time.monotonic)
        yield label, plan, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES, help="directory of trace JSON files")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-moves", type=int, default=3, help="the CLI's default is 3")
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    fleets: list[tuple[str, FleetState]] = [
        ("synthetic 1 host x 4 cells", synthetic(1, 22, args.seed)),
        ("synthetic 100 hosts x 4 cells", synthetic(100, 2000, args.seed)),
    ]
    fleets += [from_trace(p, args.seed) for p in sorted(args.traces.glob("*.json"))]
    print(f"max moves {args.max_moves}, time limit {args.time_limit:g} s, seed {args.seed}\n")
    print("| fleet | hosts | VMs | objective | before -> after | moves | migrates | seconds | optimal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, state in fleets:
        for label, plan, took in plans(state, args.max_moves, args.time_limit):
            gib = sum(m.cost_kib for m in plan.moves) / KIB_PER_GIB
            print(
                f"| {name} | {len(state.hosts)} | {len(state.placements)} | {label} | {plan.before} -> "
                f"{plan.after} | {len(plan.moves)} | {gib:.0f} GiB | {took:.2f} | {'yes' if plan.optimal else 'no'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
