"""GPUs stranded for RDMA: what the rule that VMs without NICs take stranded GPUs first is worth.

On the ``shared-nics`` scenario (every NIC PIX to two GPUs; half the GPU VMs
ask a NIC per GPU within ``pix`` or ``pxb``) and on ``dgx-nics`` (a NIC and 8
VFs beside every GPU), each seed's trace is simulated twice per strategy: with
the engine as it is, and with the baseline that takes a cell's free GPUs in
address order for VMs without NICs (``vnuma.placement.devices.rdma_spare_first``
replaced by the identity for that run only). Prints, summed over the seeds,
the VMs placed, the VMs asking NICs that were placed, the requests refused
with ``nic-affinity`` and the GPUs in use, and on how many seeds the rule
placed more / fewer NIC requests.

    .venv/bin/python bench/bench_rdma.py [--seeds 20]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from vnuma import simulate
from vnuma.placement import devices
from vnuma.placement.objectives import Strategy
from vnuma.simulate import load_trace
from vnuma.sources.trace import Trace
from vnuma.sources.tracegen import generate

Row = tuple[int, int, int, int]


def _runs(traces: list[Trace], strategy: Strategy) -> list[Row]:
    rows = []
    for trace in traces:
        r = simulate.run(trace, strategy)
        refused = sum(1 for c in r.rejection_checks if c == "nic-affinity")
        rows.append((sum(1 for p in r.placements if p is not None), r.nic_placed, refused, r.gpus_used))
    return rows


def _with(rule: Callable[..., list[str]], traces: list[Trace], strategy: Strategy) -> list[Row]:
    kept = devices.rdma_spare_first
    devices.rdma_spare_first = rule
    try:
        return _runs(traces, strategy)
    finally:
        devices.rdma_spare_first = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    print(f"{args.seeds} seeds per scenario; sums over the seeds\n")
    print("| scenario | strategy | rule | placed | NIC VMs placed | refused nic-affinity | GPUs used | seeds +/- |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ("shared-nics", "dgx-nics"):
        traces = [load_trace(generate(name, seed).encode(), f"{name}:{seed}") for seed in range(args.seeds)]
        for strategy in Strategy:
            on = _with(devices.rdma_spare_first, traces, strategy)
            off = _with(lambda hs, gpus: list(gpus), traces, strategy)
            more = sum(1 for a, b in zip(on, off, strict=True) if a[1] > b[1])
            fewer = sum(1 for a, b in zip(on, off, strict=True) if a[1] < b[1])
            for label, rows, seeds in (("stranded first", on, f"+{more} / -{fewer}"), ("address order", off, "")):
                sums = [sum(r[i] for r in rows) for i in range(4)]
                print(f"| {name} | {strategy.value} | {label} | " + " | ".join(map(str, sums)) + f" | {seeds} |")


if __name__ == "__main__":
    main()
