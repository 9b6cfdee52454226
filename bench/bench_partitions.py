"""GPU partitions: vnuma's choice of GPU and MIG start against the first GPU with room (Nova's way).

On the ``gpu-partitions`` scenario (8 hosts of 8 H100s with the H100 80GB MIG
geometry and three vGPU types; whole-GPU VMs beside MIG and vGPU tenants),
each seed's trace is simulated per strategy twice: with the engine as it is
(partitions on GPUs of the VM's own cells, a partly used GPU filled before a
fresh one, a MIG instance at the start that leaves the largest profile
creatable), and with a baseline that takes the first GPU of the host with
room in address order, on any cell, and a MIG instance at its lowest free
start (``vnuma.placement.partitionchoice._candidates`` and ``vnuma.placement.partitions.choose_start``
replaced for that run only; everything else, CPUs and memory included, is
the same engine), and with that baseline kept to the GPUs of the VM's cells.
Prints, summed over the seeds: VMs placed, partition
requests placed, whole GPUs, partitioned GPUs, stranded GPUs (MIG slices and
compute left free that no profile can use) and partitions on a GPU of
another cell than the VM's.

    .venv/bin/python bench/bench_partitions.py [--seeds 20]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from vnuma import simulate
from vnuma.placement import partitionchoice, partitions
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace
from vnuma.sources.trace import Trace
from vnuma.sources.tracegen import generate

Row = tuple[int, int, int, int, int, int]


def _runs(traces: list[Trace], strategy: Strategy) -> list[Row]:
    rows = []
    for trace in traces:
        r = simulate.run(trace, strategy)
        placed = [p for p in r.placements if p is not None]
        remote = sum(1 for p in placed for a in p.partitions if a.host_cell not in p.host_cells)
        rows.append((len(placed), r.partition_placed, r.gpus_used, r.gpus_partitioned, r.gpus_stranded, remote))
    return rows


def _first_gpu_with_room(hs: Any, cells: tuple[int, ...], req: Any) -> list[str]:
    return sorted(hs.shape.gpu_offers)


def _first_local_gpu_with_room(hs: Any, cells: tuple[int, ...], req: Any) -> list[str]:
    return sorted(a for a, o in hs.shape.gpu_offers.items() if o.home in cells)


def _lowest_start(geometry: Any, used: Any, name: str, free: tuple[int, ...]) -> int:
    return min(free)


def _with(candidates: Callable[..., list[str]], start: Callable[..., int], traces: list[Trace],
          strategy: Strategy) -> list[Row]:
    kept = partitionchoice._candidates, partitions.choose_start
    partitionchoice._candidates, partitions.choose_start = candidates, start
    try:
        return _runs(traces, strategy)
    finally:
        partitionchoice._candidates, partitions.choose_start = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    traces = [load_trace(generate("gpu-partitions", s).encode(), f"gpu-partitions:{s}") for s in range(args.seeds)]
    asked = sum(1 for t in traces for r in t.requests if r.partition is not None)
    print(f"gpu-partitions, {args.seeds} seeds, {asked} partition requests; sums over the seeds\n")
    print("| strategy | choice | VMs placed | partition VMs placed | GPUs whole | GPUs partitioned | stranded "
          "| on another cell | seeds vnuma places more / fewer partition VMs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for strategy in (Strategy.PACK, Strategy.GPU_FIRST, Strategy.FIRST_FIT):
        ours = _with(partitionchoice._candidates, partitions.choose_start, traces, strategy)
        for label, rows in (
            ("vnuma", ours),
            ("first GPU with room", _with(_first_gpu_with_room, _lowest_start, traces, strategy)),
            ("first GPU with room on the VM's cells", _with(_first_local_gpu_with_room, _lowest_start, traces,
                                                              strategy)),
        ):
            sums = [sum(r[i] for r in rows) for i in range(6)]
            more = sum(1 for a, b in zip(ours, rows, strict=True) if a[1] > b[1])
            fewer = sum(1 for a, b in zip(ours, rows, strict=True) if a[1] < b[1])
            seeds = f"{more} / {fewer}" if rows is not ours else ""
            print(f"| {strategy.value} | {label} | " + " | ".join(map(str, sums)) + f" | {seeds} |")


if __name__ == "__main__":
    main()
